#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>
#include <utility>

#include "admission.hpp"
#include "app_common.hpp"
#include "progress.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/io/csv.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/plan/plan.hpp"
#include "report/plan_chart.hpp"
#include "report/plan_json.hpp"

namespace hcpsim::app {

namespace {

struct PlanArgs {
  Common common;
  int64_t cp = 0;
  int64_t gpus = 0;
  std::set<std::string> given;  ///< which of --cp / --gpus were on the command line (0 is "not given" otherwise)
  std::string tp, pp, vp, recompute, micro_batch, fixed;
  size_t max_configurations = 5000;
  std::string objective = "time";
  std::string csv;
  std::string svg;
  std::string json;
  int threads = 1;  ///< --threads; the command sets default_threads() (admission.hpp) before parsing
  std::string max_memory;  ///< --max-memory text; empty: the machine's default (admission.hpp)
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) out.push_back(part);
  return out;
}

// A comma list of positive sizes for `option` (--tp, --pp, --vp, --micro-batch).
std::vector<int64_t> parse_size_list(const std::string& text, const std::string& option) {
  std::vector<int64_t> out;
  for (const std::string& part : split_list(text)) {
    try {
      size_t used = 0;
      const long long v = std::stoll(part, &used);
      if (used != part.size() || v < 1) throw std::invalid_argument(part);
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError(SourceLoc{}, option, "'" + part + "' is not a positive size", "give e.g. " + option + " 1,2,4");
    }
  }
  return out;
}

std::vector<sim::PlanRecompute> parse_recompute_list(const std::string& text) {
  std::vector<sim::PlanRecompute> out;
  for (const std::string& part : split_list(text)) {
    bool known = false;
    for (auto r : {sim::PlanRecompute::none, sim::PlanRecompute::selective, sim::PlanRecompute::full,
                   sim::PlanRecompute::partial})
      if (to_string(r) == part) {
        out.push_back(r);
        known = true;
      }
    if (!known)
      throw InputError(SourceLoc{}, "--recompute", "unknown recompute setting '" + part + "'",
                       "use a comma list of none, selective, full, partial");
  }
  return out;
}

std::string csv_text(const sim::PlanResult& r) {
  std::string out =
      "rank,option,cp_comm_type,a2a_size,p2p_size,tp,cp,pp,vp,dp,recompute,recompute_num_layers,micro_batch_size,"
      "step_time_s,model_tflops_per_gpu,attention_forward_s,attention_backward_s,layer_exposed_comm_s,"
      "layer_critical_exposed_comm_s,layer_load_imbalance_s,memory_per_gpu_bytes,fits,simulated,a2a_intra_node,"
      "dropped_reason\n";
  auto config = [](const sim::PlanOption& o) {
    if (o.sizes_only) return fmt::format("{},,,,{},,{},,,,,", csv_quoted(o.label), o.tp, o.pp);  // only TP and PP
    return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}", csv_quoted(o.label), to_string(o.cp_comm_type),
                       o.a2a_size, o.p2p_size, o.tp, o.cp, o.pp, o.vp, o.data_parallel_size, to_string(o.recompute),
                       o.recompute_num_layers, o.micro_batch_size);
  };
  for (const auto& o : r.ranked)
    out += fmt::format("{},{},{:.12g},{:.6g},{:.12g},{:.12g},{:.12g},{:.12g},{:.12g},{:.0f},{},yes,{},\n",
                       o.rank > 0 ? std::to_string(o.rank) : "", config(o),
                       static_cast<double>(o.step.step_ps) * 1e-12, o.step.model_tflops_per_gpu,
                       static_cast<double>(o.attention_forward_ps) * 1e-12,
                       static_cast<double>(o.attention_backward_ps) * 1e-12,
                       static_cast<double>(o.step.layer_exposed_comm_ps) * 1e-12,
                       static_cast<double>(o.step.layer_critical_exposed_comm_ps) * 1e-12,
                       static_cast<double>(o.step.layer_load_imbalance_ps) * 1e-12, o.step.memory.total_bytes,
                       o.step.memory.fits ? "yes" : "no", o.has_a2a ? (o.a2a_intra_node ? "yes" : "no") : "n/a");
  for (const auto& o : r.over_memory)
    out += fmt::format(",{},,,,,,,,{:.0f},no,no,,\n", config(o), o.step.memory.total_bytes);
  for (const auto& o : r.dropped) {
    std::string reason = o.dropped_reason;  // one line per option
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    out += fmt::format(",{},,,,,,,,,,no,,{}\n", config(o), csv_quoted(reason));  // fits unknown: not computed
  }
  return out;
}

/// No option survived the sweep: exit 2 (bad input) naming the first few reasons, not an empty ranking with exit 0.
/// `shaping`: the search options the command line gave (e.g. "--gpus 3"), named in the fix since they decide the
/// sizes every option had.
[[noreturn]] void fail_no_legal_option(const sim::PlanResult& r, const std::string& scenario_path,
                                       const std::string& shaping) {
  constexpr size_t kShown = 3;
  std::string reasons;  // by reason, largest group first: one example each instead of the same reason per comm type
  for (size_t i = 0; i < r.dropped_summary.size() && i < kShown; ++i) {
    const auto& g = r.dropped_summary[i];
    std::string example = g.example;
    std::replace(example.begin(), example.end(), '\n', ' ');
    reasons += fmt::format("{}{} x {}, e.g. {}", i == 0 ? "" : "; ", g.count, g.key, example);
  }
  if (r.dropped_summary.size() > kShown) reasons += fmt::format("; and {} more reasons", r.dropped_summary.size() - kShown);
  SourceLoc where;
  where.file = scenario_path;
  throw InputError(where, shaping.empty() ? "" : shaping.substr(0, shaping.find(' ')),
                   fmt::format("no legal option: all {} ruled out, by reason: {}", r.dropped.size(),
                               reasons.empty() ? "nothing to enumerate" : reasons),
                   shaping.empty()
                       ? "change what the reasons name in the scenario or overrides, or search other sizes with --cp, "
                         "--gpus, --tp or --pp (hcpsim validate shows the scenario's own problems)"
                       : fmt::format("the sizes come from {}: give other values, or change what the reasons name in "
                                     "the scenario or overrides",
                                     shaping));
}

/// The search-shaping options given on the command line, as typed ("--gpus 3, --pp 7"); "" when none.
std::string shaping_options(const PlanArgs& a) {
  std::vector<std::string> given;
  if (a.given.count("--gpus") != 0) given.push_back(fmt::format("--gpus {}", a.gpus));
  if (a.given.count("--cp") != 0) given.push_back(fmt::format("--cp {}", a.cp));
  for (const auto& [text, option] : {std::pair{a.tp, "--tp"}, std::pair{a.pp, "--pp"}, std::pair{a.vp, "--vp"},
                                     std::pair{a.micro_batch, "--micro-batch"}})
    if (!text.empty()) given.push_back(fmt::format("{} {}", option, text));
  std::string out;
  for (const auto& g : given) out += (out.empty() ? "" : ", ") + g;
  return out;
}

sim::PlanRequest plan_request(const PlanArgs& a) {
  sim::PlanRequest req;
  if (a.cp != 0) req.cp = a.cp;
  req.threads = a.threads;
  if (a.gpus != 0) req.gpus = a.gpus;
  if (!a.tp.empty()) req.tp = parse_size_list(a.tp, "--tp");
  if (!a.pp.empty()) req.pp = parse_size_list(a.pp, "--pp");
  if (!a.vp.empty()) req.vp = parse_size_list(a.vp, "--vp");
  if (!a.micro_batch.empty()) req.micro_batch = parse_size_list(a.micro_batch, "--micro-batch");
  if (!a.recompute.empty()) req.recompute = parse_recompute_list(a.recompute);
  for (const std::string& key : split_list(a.fixed)) req.fixed.push_back(sim::parse_plan_dimension(key));
  req.max_configurations = a.max_configurations;
  if (a.objective == "memory") {
    req.objective = sim::PlanRequest::Objective::memory;
  } else if (a.objective != "time") {
    throw InputError(SourceLoc{}, "--objective", "unknown objective '" + a.objective + "'", "use time or memory");
  }
  return req;
}

void print_ruled_out(const sim::PlanResult& r) {
  constexpr size_t kClosest = 3;
  if (!r.over_memory.empty()) {
    // The closed form leaves out the transient CP attention and TP buffers that only a simulation finds (the
    // simulated options' mem/GPU includes them): a lower bound, printed as one.
    fmt::print("\nnot simulated, closed-form memory above the GPU (a lower bound: without the transient CP attention "
               "and TP buffers a simulation adds): {} options; the closest:\n",
               r.over_memory.size());
    // Options of one layout that differ only in the CP variant have one closed-form memory: one line each layout,
    // its variants joined ("p2p / all_gather / a2a+p2p [2,4] TP4 PP2 VP2 full mbs1").
    auto same_layout = [](const sim::PlanOption& x, const sim::PlanOption& y) {
      return x.tp == y.tp && x.cp == y.cp && x.pp == y.pp && x.vp == y.vp && x.recompute == y.recompute &&
             x.recompute_num_layers == y.recompute_num_layers && x.micro_batch_size == y.micro_batch_size &&
             x.step.memory.total_bytes == y.step.memory.total_bytes;
    };
    size_t shown = 0;
    for (size_t i = 0; i < r.over_memory.size() && shown < kClosest; ++shown) {
      const sim::PlanOption& o = r.over_memory[i];
      // "<variant> TP.. PP.. ...": the layout after the variant (every option label names its TP)
      const size_t tp_at = std::min(o.label.rfind(" TP"), o.label.size());
      std::string variants = o.label.substr(0, tp_at);
      size_t j = i + 1;
      for (; j < r.over_memory.size() && same_layout(o, r.over_memory[j]); ++j) {
        const std::string& l = r.over_memory[j].label;
        variants += " / " + l.substr(0, std::min(l.rfind(" TP"), l.size()));
      }
      fmt::print("  {:<46} at least {:.2f} GB of {:.2f} GB\n", variants + o.label.substr(tp_at),
                 o.step.memory.total_bytes / 1e9, o.step.memory.capacity_bytes / 1e9);
      i = j;
    }
  }
  if (r.dropped.empty()) return;
  fmt::print("\nruled out: {} options, by reason (count, first example):\n", r.dropped.size());
  for (const auto& g : r.dropped_summary) fmt::print("  {:>5} x {}\n          e.g. {}\n", g.count, g.key, g.example);
}

void print_plan(const Scenario& s, const sim::PlanResult& r, const std::string& objective, int64_t gpus) {
  print_header(s);
  // --gpus N plans replicas of N GPUs: a cluster too small for one grows to hold it (plan_search.cpp), said here.
  const int64_t gpn = s.cluster.gpus_per_node, nodes = (gpus + gpn - 1) / gpn;
  if (gpus > 0 && s.cluster.topology.vertices.empty() && nodes > s.cluster.nodes)
    fmt::print("note: --gpus {} needs {} nodes of {} GPUs; the scenario's cluster has {}: planned on {} nodes (set "
               "cluster.nodes to plan on another size)\n",
               gpus, nodes, gpn, s.cluster.nodes, nodes);
  std::string searched, held;
  for (const auto& d : r.dimensions) {
    std::string values;
    for (const auto& v : d.values) values += (values.empty() ? "" : ",") + v;
    (d.fixed ? held : searched) += fmt::format("{}{} {}", (d.fixed ? held : searched).empty() ? "" : "; ",
                                               to_string(d.dimension), values);
  }
  fmt::print("plan: {} configurations, {} simulated, {} over memory, {} ruled out; objective {}; whole training step "
             "per option at global batch {} (layer simulated; model TFLOP/s in the megatron_causal convention)\n",
             r.estimate.configurations, r.ranked.size(), r.over_memory.size(), r.dropped.size(), objective,
             r.global_batch_size);
  fmt::print("searched: {}\n", searched);
  if (!held.empty()) fmt::print("held by --fixed: {}\n", held);
  if (s.model.qkv_format == QkvFormat::thd)
    fmt::print("packed sequences: each option pads every sequence to a multiple of 2 x its own CP size and derives "
               "its seq_length from that (the header shows the scenario's own CP size)\n");
  fmt::print("\n{}\n", r.explanation);
  fmt::print("accuracy: the step model is optimistic against every published run it is validated on "
             "(docs/validation.md); read the times as lower bounds and rankings within a few percent as ties\n\n");
  fmt::print("{:>4}  {:<46} {:>12} {:>9} {:>12} {:>12} {:>13} {:>13} {:>10} {:>5} {:>10}\n", "rank", "option",
             "step time", "TFLOP/s", "attn fwd", "attn bwd", "busiest exp", "imbalance", "mem/GPU", "fits",
             "a2a node");
  // A wide search simulates hundreds of options: the table shows the best, the files hold them all.
  constexpr size_t kShown = 30, kShownWhenMore = 25;
  const size_t shown = r.ranked.size() <= kShown ? r.ranked.size() : kShownWhenMore;
  for (size_t i = 0; i < shown; ++i) {
    const sim::PlanOption& o = r.ranked[i];
    fmt::print("{:>4}  {:<46} {:>12} {:>9.1f} {:>12} {:>12} {:>13} {:>13} {:>7.2f} GB {:>5} {:>10}\n",
               o.rank > 0 ? std::to_string(o.rank) : "-", o.label, human_time_ps(o.step.step_ps),
               o.step.model_tflops_per_gpu, human_time_ps(o.attention_forward_ps),
               human_time_ps(o.attention_backward_ps), human_time_ps(o.step.layer_critical_exposed_comm_ps),
               human_time_ps(o.step.layer_load_imbalance_ps),
               o.step.memory.total_bytes / 1e9, o.step.memory.fits ? "yes" : "NO",
               o.has_a2a ? (o.a2a_intra_node ? "inside" : "SPANS") : "-");
  }
  if (shown < r.ranked.size())
    fmt::print("  ... and {} more simulated options (all of them in --csv and --json)\n", r.ranked.size() - shown);
  if (!r.ranked.empty())
    fmt::print("  (per layer: busiest exp = the busiest GPU's time with no kernel running; imbalance = how much less "
               "kernel time the least busy GPU has; --csv and --json give their sum as layer_exposed_comm_s; "
               "a2a node: whether each all-to-all group stays inside a node)\n");
  print_ruled_out(r);
}

int cmd_plan(const PlanArgs& a) {
  for (const auto& [value, option] : {std::pair{a.cp, "--cp"}, std::pair{a.gpus, "--gpus"}}) {
    if (value > kMaxPlanGpus || value < 0 || (value == 0 && a.given.count(option) != 0))
      throw InputError(SourceLoc{}, option, fmt::format("{} is outside 1..{}", value, kMaxPlanGpus),
                       fmt::format("give {} a size from 1 to {} (2^17, above the largest training clusters), or "
                                   "leave it out for the scenario's",
                                   option, kMaxPlanGpus));
  }
  check_thread_count(a.threads, "--threads");
  const uint64_t max_memory = max_memory_limit(a.max_memory);
  const Scenario s = load_scenario(a.common.scenario_path, a.common.overrides);
  check_requested_outputs({{a.csv, "--csv", "plan CSV"}, {a.svg, "--svg", "plan chart"}, {a.json, "--json", "plan JSON"}});
  validate_scenario(s, ValidationScope::placement);  // the scenario itself must be valid
  // The largest CP the search can reach: --cp, or all GPUs of a replica at TP = PP = 1.
  const int64_t cp_max = a.cp != 0 ? a.cp
                                   : (a.gpus != 0 ? a.gpus
                                                  : s.parallel.tensor_model_parallel_size *
                                                        s.parallel.context_parallel_size *
                                                        s.parallel.pipeline_model_parallel_size);
  admit_plan(s, cp_max, a.threads, max_memory, a.gpus != 0 ? "--gpus" : "--cp");
  sim::PlanRequest req = plan_request(a);
  ProgressReporter progress("plan", 0, progress_settings());
  // The size of the search, before it runs (stderr: stdout stays the answer): as the progress display's estimate
  // line when the search is long enough to announce, else as a plain line.
  req.on_estimate = [&progress](const sim::PlanEstimate& e) {
    const std::string text = fmt::format("searching {} configurations ({} legal, {} fit in memory by the closed form), "
                                         "simulating {}, ~{:.1f} s on {} thread{}",
                                         e.configurations, e.legal, e.fit_in_memory, e.simulated,
                                         e.seconds / e.threads, e.threads, e.threads == 1 ? "" : "s");
    if (!progress.announce(text, e.seconds / e.threads)) std::fprintf(stderr, "plan: %s\n", text.c_str());
  };
  req.progress = progress_callback(&progress);
  const sim::PlanResult r = sim::plan(s, req);
  progress.finish();
  if (r.ranked.empty()) fail_no_legal_option(r, a.common.scenario_path, shaping_options(a));
  print_plan(s, r, a.objective, a.gpus);
  if (!a.csv.empty()) {
    write_output_file(a.csv, csv_text(r), "plan CSV", "--csv");
    fmt::print("\nwrote {}\n", a.csv);
  }
  if (!a.svg.empty()) {
    sim::PlanResult best = r;  // the chart shows the best options only (one row each; its layout is tested to 40)
    constexpr size_t kCharted = 20;
    std::string title = "hcpsim plan: " + s.name;
    if (best.ranked.size() > kCharted) {
      title += fmt::format(" (the best {} of {} simulated options)", kCharted, best.ranked.size());
      best.ranked.resize(kCharted);
    }
    write_output_file(a.svg, plan_svg(best, title), "plan chart", "--svg");
    fmt::print("wrote {}\n", a.svg);
  }
  if (!a.json.empty()) {
    write_plan_json(a.json, s, r, req.max_configurations, a.common.overrides);
    fmt::print("wrote {}\n", a.json);
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_plan_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("plan", "search TP, CP variant and [A,P], PP and VP, recompute and micro-batch; rank "
                                         "what fits by iteration time");
  auto a = std::make_shared<PlanArgs>();
  add_scenario_args(cmd, a->common);
  cmd->add_option("--cp", a->cp, "context_parallel_size of every option (default: GPUs / (TP*PP))");
  cmd->add_option("--gpus", a->gpus,
                  "GPUs per model replica, TP*CP*PP (default: the scenario's; CP = GPUs / (TP*PP), or with --cp or "
                  "--fixed cp TP*PP = GPUs / CP)");
  cmd->add_option("--tp", a->tp, "comma-separated TP sizes, e.g. 1,2,4 (default: every divisor of gpus_per_node)");
  cmd->add_option("--pp", a->pp, "comma-separated PP sizes (default: every size the scenario's pipeline split "
                                 "allows, e.g. the divisors of num_layers)");
  cmd->add_option("--vp", a->vp, "comma-separated VP sizes, 1 = not interleaved (default: 1, 2 and the scenario's, "
                                 "above 1 where the split allows)");
  cmd->add_option("--recompute", a->recompute, "comma list of none, selective, full, partial (default: all four)");
  cmd->add_option("--micro-batch", a->micro_batch, "comma-separated micro-batch sizes (default: the scenario's and "
                                                   "twice it; 1 for packed sequences)");
  cmd->add_option("--fixed", a->fixed, "comma list of tp, cp, pp, vp, recompute, micro_batch, cp_comm_type held at "
                                       "the scenario's values");
  cmd->add_option("--max-configurations", a->max_configurations,
                  "refuse a search that would simulate more options than this (default 5000)");
  cmd->add_option("--objective", a->objective, "rank by time (default; options that fit first) or memory");
  cmd->add_option("--csv", a->csv, "write every option (simulated, over memory and ruled out) as CSV");
  cmd->add_option("--svg", a->svg, "write an SVG chart of the best options: time per iteration and memory per GPU, winner marked");
  cmd->add_option("--json", a->json, "write the search and its answer as JSON (schema: README, plan --json)");
  a->threads = default_threads();
  cmd->add_option("--threads", a->threads,
                  "CPU threads that simulate options at once (default: every hardware thread, at most that many; "
                  "results are identical for any count)")
      ->capture_default_str();
  add_max_memory_option(cmd, a->max_memory);
  add_quiet_flag(cmd);
  cmd->callback([&exit_code, a, cmd] {
    for (const char* option : {"--cp", "--gpus"})
      if (cmd->count(option) != 0) a->given.insert(option);
    exit_code = cmd_plan(*a);
  });
  return cmd;
}

}  // namespace hcpsim::app
