#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>
#include <utility>

#include "admission.hpp"
#include "app_common.hpp"
#include "progress.hpp"
#include "hcpsim/io/csv.hpp"
#include "report/plan_chart.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/plan/plan.hpp"
#include "hcpsim/sim/simulation_cost.hpp"

namespace hcpsim::app {

namespace {

struct PlanArgs {
  Common common;
  int64_t cp = 0;
  int64_t gpus = 0;
  std::string tp;
  std::string objective = "time";
  std::string csv;
  std::string svg;
  int threads = 0;
  std::string max_memory;  ///< --max-memory text; empty: the machine's default (admission.hpp)
};

std::vector<int64_t> parse_tp_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(part, &used);
      if (used != part.size() || v < 1) throw std::invalid_argument(part);
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError(SourceLoc{}, "--tp", "'" + part + "' is not a positive TP size", "give e.g. --tp 1,2,4,8");
    }
  }
  return out;
}

std::string csv_text(const sim::PlanResult& r) {
  std::string out =
      "rank,option,cp_comm_type,a2a_size,p2p_size,tp,cp,dp,step_time_s,model_tflops_per_gpu,attention_forward_s,"
      "attention_backward_s,layer_exposed_comm_s,memory_per_gpu_bytes,fits,a2a_intra_node,dropped_reason\n";
  for (const auto& o : r.ranked)
    out += fmt::format("{},{},{},{},{},{},{},{},{:.12g},{:.6g},{:.12g},{:.12g},{:.12g},{:.0f},{},{},\n", o.rank,
                       csv_quoted(o.label),
                       to_string(o.cp_comm_type), o.a2a_size, o.p2p_size, o.tp, o.cp, o.data_parallel_size,
                       static_cast<double>(o.step.step_ps) * 1e-12, o.step.model_tflops_per_gpu,
                       static_cast<double>(o.attention_forward_ps) * 1e-12,
                       static_cast<double>(o.attention_backward_ps) * 1e-12,
                       static_cast<double>(o.step.layer_exposed_comm_ps) * 1e-12, o.step.memory.total_bytes,
                       o.step.memory.fits ? "yes" : "no", o.has_a2a ? (o.a2a_intra_node ? "yes" : "no") : "n/a");
  for (const auto& o : r.dropped) {
    std::string reason = o.dropped_reason;  // one line per option
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    out += fmt::format(",{},{},{},{},{},{},,,,,,,,,,{}\n", csv_quoted(o.label), to_string(o.cp_comm_type), o.a2a_size,
                       o.p2p_size, o.tp, o.cp, csv_quoted(reason));
  }
  return out;
}

/// No option survived the sweep: exit 2 (bad input) naming the first few reasons, not an empty ranking with exit 0.
[[noreturn]] void fail_no_legal_option(const sim::PlanResult& r, const std::string& scenario_path) {
  constexpr size_t kShown = 3;
  std::string reasons;
  for (size_t i = 0; i < r.dropped.size() && i < kShown; ++i) {
    std::string reason = r.dropped[i].dropped_reason;
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    reasons += fmt::format("{}{}: {}", i == 0 ? "" : "; ", r.dropped[i].label, reason);
  }
  if (r.dropped.size() > kShown) reasons += fmt::format("; and {} more", r.dropped.size() - kShown);
  SourceLoc where;
  where.file = scenario_path;
  throw InputError(where, "",
                   fmt::format("no legal option: all {} ruled out ({})", r.dropped.size(),
                               reasons.empty() ? "nothing to enumerate" : reasons),
                   "change what the reasons name in the scenario or overrides, or sweep other sizes with --cp, --gpus "
                   "or --tp (hcpsim validate shows the scenario's own problems)");
}

int cmd_plan(const PlanArgs& a) {
  for (const auto& [value, option] : {std::pair{a.cp, "--cp"}, std::pair{a.gpus, "--gpus"}}) {
    if (value > kMaxPlanGpus || value < 0)
      throw InputError(SourceLoc{}, option, fmt::format("{} is outside 1..{}", value, kMaxPlanGpus),
                       fmt::format("use {} {} or fewer (2^17, above the largest training clusters)", option,
                                   kMaxPlanGpus));
  }
  if (a.threads < 0) throw InputError(SourceLoc{}, "--threads", "must be >= 0", "give a thread count, or 0 for all cores");
  check_thread_count(a.threads, "--threads");
  const uint64_t max_memory = max_memory_limit(a.max_memory);
  const Scenario s = load_scenario(a.common.scenario_path, a.common.overrides);
  validate_scenario(s, ValidationScope::placement);  // the scenario itself must be valid
  const int64_t cp_max = a.cp != 0 ? a.cp : (a.gpus != 0 ? a.gpus : s.parallel.context_parallel_size);
  admit_plan(s, cp_max, a.threads, max_memory, a.gpus != 0 ? "--gpus" : "--cp");
  sim::PlanRequest req;
  if (a.cp != 0) req.cp = a.cp;
  req.threads = a.threads;
  if (a.gpus != 0) req.gpus = a.gpus;
  if (!a.tp.empty()) req.tp = parse_tp_list(a.tp);
  if (a.objective == "memory") {
    req.objective = sim::PlanRequest::Objective::memory;
  } else if (a.objective != "time") {
    throw InputError(SourceLoc{}, "--objective", "unknown objective '" + a.objective + "'", "use time or memory");
  }
  const int threads = a.threads > 0 ? a.threads : max_threads();
  ProgressReporter progress("plan", 0, progress_settings());
  {
    // The largest option's simulation (admission's estimate): the sweep runs `threads` of them at once.
    const sim::SimulationCost one = sim::estimate_simulation_cost(CpCommType::p2p, 1, cp_max, s.model.seq_length);
    progress.announce(fmt::format("largest option ~{:.3g} schedule ops, ~{} each; up to ~{:.3g} GB peak with {} at "
                                  "once on {} thread{}",
                                  one.ops, display_duration(one.seconds), one.bytes * threads / 1e9, threads, threads,
                                  threads == 1 ? "" : "s"),
                      one.seconds);
  }
  req.progress = progress_callback(&progress);
  const sim::PlanResult r = sim::plan(s, req);
  progress.finish();
  if (r.ranked.empty()) fail_no_legal_option(r, a.common.scenario_path);
  print_header(s);
  fmt::print("plan: {} legal options, {} ruled out; objective {}; whole training step per option at global batch {} "
             "(layer simulated; model TFLOP/s in the megatron_causal convention)\n",
             r.ranked.size(), r.dropped.size(), a.objective, r.global_batch_size);
  if (s.model.qkv_format == QkvFormat::thd)
    fmt::print("packed sequences: each option pads every sequence to a multiple of 2 x its own CP size and derives "
               "its seq_length from that (the header shows the scenario's own CP size)\n");
  fmt::print("\n{}\n\n", r.explanation);
  if (r.nothing_fits) fmt::print("warning: no option fits in GPU memory; ranked by time anyway\n\n");
  fmt::print("{:>4}  {:<26} {:>12} {:>9} {:>12} {:>12} {:>13} {:>10} {:>5} {:>10}\n", "rank", "option", "step time",
             "TFLOP/s", "attn fwd", "attn bwd", "exposed/layer", "mem/GPU", "fits", "a2a node");
  for (const auto& o : r.ranked)
    fmt::print("{:>4}  {:<26} {:>12} {:>9.1f} {:>12} {:>12} {:>13} {:>7.2f} GB {:>5} {:>10}\n", o.rank, o.label,
               human_time_ps(o.step.step_ps), o.step.model_tflops_per_gpu, human_time_ps(o.attention_forward_ps),
               human_time_ps(o.attention_backward_ps), human_time_ps(o.step.layer_exposed_comm_ps),
               o.step.memory.total_bytes / 1e9, o.step.memory.fits ? "yes" : "NO",
               o.has_a2a ? (o.a2a_intra_node ? "inside" : "SPANS") : "-");
  if (!r.dropped.empty()) {
    fmt::print("\nruled out:\n");
    for (const auto& o : r.dropped) fmt::print("  {:<26} {}\n", o.label, o.dropped_reason);
  }
  if (!a.csv.empty()) {
    write_output_file(a.csv, csv_text(r), "plan CSV", "--csv");
    fmt::print("\nwrote {}\n", a.csv);
  }
  if (!a.svg.empty()) {
    write_output_file(a.svg, plan_svg(r, "hcpsim plan: " + s.name), "plan chart", "--svg");
    fmt::print("wrote {}\n", a.svg);
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_plan_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("plan", "rank every legal CP option (p2p, a2a, all_gather, a2a+p2p [A,P]) and TP");
  auto a = std::make_shared<PlanArgs>();
  add_scenario_args(cmd, a->common);
  cmd->add_option("--cp", a->cp, "context_parallel_size of every option (default: the scenario's)");
  cmd->add_option("--gpus", a->gpus, "GPUs per model replica, TP*CP*PP (CP = GPUs / (TP*PP) for each TP)")
      ->excludes("--cp");
  cmd->add_option("--tp", a->tp, "comma-separated TP sizes to sweep, e.g. 1,2,4 (default: the scenario's)");
  cmd->add_option("--objective", a->objective, "rank by time (default; options that fit first) or memory");
  cmd->add_option("--csv", a->csv, "write every option (ranked and ruled out) as CSV");
  cmd->add_option("--svg", a->svg, "write a grouped bar chart of the ranked options");
  cmd->add_option("--threads", a->threads, "simulate options on N threads (default 0: all cores); same results");
  add_max_memory_option(cmd, a->max_memory);
  add_quiet_flag(cmd);
  cmd->callback([&exit_code, a] { exit_code = cmd_plan(*a); });
  return cmd;
}

}  // namespace hcpsim::app
