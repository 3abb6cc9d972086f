#include "hcpsim/plan/plan.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <exception>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <tuple>

#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/cp_variant.hpp"
#include "hcpsim/config/cp_variant_config.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/config/thd_packing.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/attention_simulation.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/sim/trace_writer.hpp"

namespace hcpsim::sim {
namespace {

std::string label_of(CpCommType t, int64_t a, int64_t p, int64_t tp) {
  if (cp_variant(t).takes_hierarchical_sizes) return fmt::format("{} [{},{}] TP{}", to_string(t), a, p, tp);
  return fmt::format("{} TP{}", to_string(t), tp);
}

std::string time_text(TimePs ps) {
  const double s = static_cast<double>(ps) * 1e-12;
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} us", s * 1e6);
}

std::string gb_text(double bytes) { return fmt::format("{:.2f} GB", bytes / 1e9); }

/// Labels, layout and placement facts of option `t` of a validated scenario (no simulation).
PlanOption describe(const Scenario& s, CpCommType t, int64_t dp) {
  PlanOption o;
  o.cp_comm_type = t;
  o.tp = s.parallel.tensor_model_parallel_size;
  o.cp = s.parallel.context_parallel_size;
  o.data_parallel_size = dp;
  const CpLayout layout = cp_layout_for(s, t);
  o.a2a_size = layout.a2a_size();
  o.p2p_size = layout.p2p_size();
  o.label = label_of(t, o.a2a_size, o.p2p_size, o.tp);
  o.has_a2a = o.a2a_size > 1;  // an a2a level: only a2a and a2a+p2p take A > 1 (CpVariant::accepts)
  if (o.has_a2a) {
    ParallelSizes sizes;
    sizes.tp = o.tp;
    sizes.cp = o.cp;
    sizes.dp = dp;
    sizes.pp = s.parallel.pipeline_model_parallel_size;
    const auto place = place_cp_group(s.parallel.order, sizes, s.cluster.gpus_per_node);
    o.a2a_intra_node = true;
    for (int64_t p = 0; p < o.p2p_size; ++p) {
      std::set<int64_t> nodes;
      for (int64_t g : layout.a2a_group(p)) nodes.insert(place[static_cast<size_t>(g)].node);
      o.a2a_intra_node = o.a2a_intra_node && nodes.size() == 1;
    }
  }
  return o;
}

/// The whole step of option `o` (writes step and the per-layer message bytes only).
void simulate_option_step(const Scenario& s, PlanOption& o) {
  SimOptions options;
  options.record_timeline = false;
  o.step = simulate_step(s, o.cp_comm_type, o.data_parallel_size, Topology::from_cluster(s.cluster), options);
  for (Phase ph : {Phase::forward, Phase::backward}) {
    o.intra_node_bytes_per_layer += o.step.layer.message_totals(ph, LinkLevel::intra_node).bytes;
    o.inter_node_bytes_per_layer += o.step.layer.message_totals(ph, LinkLevel::inter_node).bytes;
  }
}

/// The attention layer alone of option `o`, as `simulate` times it (writes the attention_* fields only).
void simulate_option_attention(const Scenario& s, PlanOption& o) {
  SimOptions options;
  options.record_timeline = false;
  const SimResult attn = simulate_attention(s, o.cp_comm_type, o.data_parallel_size, Topology::from_cluster(s.cluster),
                                            options)
                             .result;
  o.attention_forward_ps = attn.forward_ps;
  o.attention_backward_ps = attn.backward_ps;
  for (const RankStats& r : attn.ranks) o.attention_exposed_comm_ps = std::max(o.attention_exposed_comm_ps, r.exposed_comm_ps);
}

/// Runs the two simulations of every option on up to `threads` OpenMP threads. Every simulation is independent and
/// writes only its own fields, so the results do not depend on the thread count or on scheduling.
void simulate_options(const std::vector<Scenario>& scenarios, std::vector<PlanOption>& options, int threads,
                      const std::function<void(size_t, size_t)>& progress) {
  const size_t tasks = 2 * options.size();
  // Longest first (all_gather's all-pairs flows, then the longest rings), so two threads finish together.
  auto cost_rank = [&](size_t option) {
    const PlanOption& o = options[option];
    return std::make_tuple(o.cp_comm_type == CpCommType::all_gather ? 0 : 1, -o.p2p_size, option);
  };
  std::vector<size_t> order(tasks);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return cost_rank(x / 2) < cost_rank(y / 2); });
  std::vector<std::exception_ptr> errors(tasks);
  size_t finished = 0;  // simulations done, for request.progress (changed inside the critical section only)
  const int n = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), std::max<size_t>(tasks, 1)));
  // Dynamic scheduling in `order`, one task at a time: the longest tasks start first. No exception may leave
  // the parallel region, so each task's is kept and the first in task order rethrown afterwards.
#pragma omp parallel for schedule(dynamic, 1) num_threads(n)
  for (size_t k = 0; k < tasks; ++k) {
    const size_t i = order[k];
    try {
      if (i % 2 == 0) simulate_option_step(scenarios[i / 2], options[i / 2]);
      else simulate_option_attention(scenarios[i / 2], options[i / 2]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
    if (progress) {
#pragma omp critical(hcpsim_plan_progress)
      progress(++finished, tasks);
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);  // the first failure in task order
}

std::string explain(const PlanResult& r) {
  if (r.ranked.empty()) return "no option is legal for this scenario; see the dropped options below";
  const PlanOption& w = r.ranked[0];
  const StepResult& ws = w.step;
  if (r.objective == PlanRequest::Objective::memory) {
    if (r.ranked.size() == 1)
      return fmt::format("{} is the only legal option: {} per GPU, {} per iteration", w.label,
                         gb_text(ws.memory.total_bytes), time_text(ws.step_ps));
    const PlanOption& ru = r.ranked[1];
    return fmt::format("{} needs the least memory per GPU, {} ({} activations), against {} for the runner-up {}; "
                       "it takes {} per iteration",
                       w.label, gb_text(ws.memory.total_bytes), gb_text(ws.memory.activations_bytes),
                       gb_text(ru.step.memory.total_bytes), ru.label, time_text(ws.step_ps));
  }
  std::string head = fmt::format("{} wins with {} per iteration ({:.1f} model TFLOP/s per GPU, {} per GPU{})",
                                 w.label, time_text(ws.step_ps), ws.model_tflops_per_gpu,
                                 gb_text(ws.memory.total_bytes), ws.memory.fits ? "" : ", but nothing fits");
  // A faster option that does not fit explains the choice best.
  for (const auto& o : r.ranked)
    if (!o.step.memory.fits && o.step.step_ps < ws.step_ps && ws.memory.fits)
      return head + fmt::format("; the faster {} ({}) does not fit: it needs {} of {}", o.label,
                                time_text(o.step.step_ps), gb_text(o.step.memory.total_bytes),
                                gb_text(o.step.memory.capacity_bytes));
  if (r.ranked.size() == 1) return head + "; it is the only legal option";
  const PlanOption& ru = r.ranked[1];
  const double pct = 100.0 * static_cast<double>(ru.step.step_ps - ws.step_ps) / static_cast<double>(ws.step_ps);
  // Below 1% the two are a tie within what the cost model can tell apart (assumed efficiencies, no jitter).
  const std::string slower = pct < 1.0 ? fmt::format("is only {:.1f}% slower, a tie within the model's accuracy", pct)
                                       : fmt::format("is {:.1f}% slower", pct);
  const bool network = ru.inter_node_bytes_per_layer > 0 || w.inter_node_bytes_per_layer > 0;
  const std::string bytes = network ? fmt::format(" ({} against {} cross the network per layer)",
                                                  gb_text(static_cast<double>(ru.inter_node_bytes_per_layer)),
                                                  gb_text(static_cast<double>(w.inter_node_bytes_per_layer)))
                                    : std::string(" (all of it on NVLink)");
  if (ru.step.layer_exposed_comm_ps > ws.layer_exposed_comm_ps)
    return head + fmt::format("; the runner-up {} {}: its layer exposes {} of communication against {}{}", ru.label,
                              slower, time_text(ru.step.layer_exposed_comm_ps), time_text(ws.layer_exposed_comm_ps),
                              bytes);
  return head + fmt::format("; the runner-up {} {}: its layer computes for longer ({} against {} forward + backward) "
                            "although it exposes no more communication",
                            ru.label, slower, time_text(ru.step.layer_forward_ps + ru.step.layer_backward_ps),
                            time_text(ws.layer_forward_ps + ws.layer_backward_ps));
}

// The TP sizes to sweep (--tp, or the scenario's), sorted and unique, after the checks of the request.
std::vector<int64_t> sweep_tp_sizes(const Scenario& scenario, const PlanRequest& request) {
  const SourceLoc cmd{};
  if (request.cp && request.gpus)
    throw InputError(cmd, "--cp", "--cp and --gpus both given", "give one: --cp N fixes CP, --gpus N fixes TP*CP*PP");
  if (request.cp && *request.cp < 1) throw InputError(cmd, "--cp", "must be at least 1", "give a positive CP size");
  if (request.gpus && *request.gpus < 1) throw InputError(cmd, "--gpus", "must be at least 1", "give a positive count");
  std::vector<int64_t> tps = request.tp;
  if (tps.empty()) tps.push_back(scenario.parallel.tensor_model_parallel_size);
  for (int64_t t : tps)
    if (t < 1) throw InputError(cmd, "--tp", "every TP size must be at least 1", "give e.g. --tp 1,2,4");
  std::sort(tps.begin(), tps.end());
  tps.erase(std::unique(tps.begin(), tps.end()), tps.end());
  return tps;
}

// One global batch for every option, so step times compare the same work: the scenario's, or else
// micro_batch_size x the least common multiple of the options' data-parallel sizes (each divides it).
int64_t common_global_batch_size(const Scenario& scenario, const PlanRequest& request, const std::vector<int64_t>& tps) {
  int64_t dp_lcm = 1;
  for (int64_t tp : tps) {
    const int64_t model_gpus = request.gpus ? *request.gpus
                                            : tp * request.cp.value_or(scenario.parallel.context_parallel_size) *
                                                  scenario.parallel.pipeline_model_parallel_size;
    if (request.gpus && *request.gpus % (tp * scenario.parallel.pipeline_model_parallel_size) != 0) continue;
    int64_t world = scenario.cluster.world_size();
    if (request.gpus && scenario.cluster.topology.vertices.empty())
      world = std::max(world, (model_gpus + scenario.cluster.gpus_per_node - 1) / scenario.cluster.gpus_per_node *
                                  scenario.cluster.gpus_per_node);
    const int64_t dp = scenario.parallel.data_parallel_size.value_or(model_gpus > 0 && world % model_gpus == 0
                                                                          ? std::max<int64_t>(1, world / model_gpus)
                                                                          : 1);
    dp_lcm = std::lcm(dp_lcm, dp);
  }
  return scenario.model.global_batch_size.value_or(scenario.model.micro_batch_size * dp_lcm);
}

// One option of the sweep: a comm type at (TP, CP) with its layout [A, P], A·P = CP.
struct Candidate {
  CpCommType type = CpCommType::p2p;
  int64_t tp = 1, cp = 1, a = 1, p = 1;
};

// The options of one (TP, CP), from the table of CP variants in its order: every layout each comm type a scenario
// can name sweeps at CP (CpVariant::plan_sizes: p2p always; a2a, all_gather and a2a+p2p [A, CP/A] for every
// divisor A when CP > 1).
std::vector<Candidate> comm_candidates(int64_t tp, int64_t cp) {
  std::vector<Candidate> candidates;
  for (CpCommType t : scenario_cp_comm_types())
    for (const CpSizes& ap : cp_variant(t).plan_sizes(cp)) candidates.push_back({t, tp, cp, ap[0], ap[1]});
  return candidates;
}

// The scenario of option `k`: the common global batch, its TP, CP and comm type, and enough nodes for --gpus.
Scenario option_scenario(const Scenario& scenario, const PlanRequest& request, int64_t global_batch_size,
                         const Candidate& k) {
  Scenario c = scenario;
  c.model.global_batch_size = global_batch_size;
  c.parallel.tensor_model_parallel_size = k.tp;
  c.parallel.context_parallel_size = k.cp;
  // Packed sequences are padded to multiples of 2·CP: each CP size has its own packed length.
  if (c.model.qkv_format == QkvFormat::thd && thd_seq_length(c) > 0) c.model.seq_length = thd_seq_length(c);
  c.parallel.cp_comm_type = {k.type};
  c.parallel.hierarchical_context_parallel_sizes.reset();
  if (cp_variant(k.type).takes_hierarchical_sizes)
    c.parallel.hierarchical_context_parallel_sizes = std::vector<int64_t>{k.a, k.p};
  if (request.gpus && c.cluster.topology.vertices.empty())
    c.cluster.nodes = std::max(c.cluster.nodes, (*request.gpus + c.cluster.gpus_per_node - 1) / c.cluster.gpus_per_node);
  return c;
}

// What the sweep has collected so far, in sweep order.
struct Sweep {
  PlanResult& result;           ///< ranked: the legal options (not ranked yet); dropped: the others with reasons
  std::vector<Scenario> legal;  ///< the scenario of each entry of result.ranked
  bool any_cp = false;          ///< some TP of the list gave a CP size
};

// Adds option `k` to the legal ones, or to the dropped ones with the reason: a2a+p2p [1, CP] and [CP, 1] are
// what TE runs as plain p2p and a2a, and a scenario that validation rejects names the rejected key.
void consider_option(const Scenario& scenario, const PlanRequest& request, const Candidate& k, Sweep& sweep) {
  PlanOption o;
  o.cp_comm_type = k.type;
  o.tp = k.tp;
  o.cp = k.cp;
  o.a2a_size = k.a;
  o.p2p_size = k.p;
  o.label = label_of(k.type, o.a2a_size, o.p2p_size, k.tp);
  const CpVariant& runs_as = cp_variant_for_hierarchical_sizes(k.a, k.p);
  if (cp_variant(k.type).takes_hierarchical_sizes && runs_as.comm_type != k.type) {
    o.dropped_reason = fmt::format("{} runs as plain {} in TE (see the {} option)", k.a == 1 ? "[1, CP]" : "[CP, 1]",
                                   runs_as.name, runs_as.name);
    sweep.result.dropped.push_back(o);
    return;
  }
  Scenario c = option_scenario(scenario, request, sweep.result.global_batch_size, k);
  ValidationReport report;
  try {
    report = validate_scenario(c, ValidationScope::placement);
  } catch (const InputError& e) {
    o.dropped_reason = e.key() + ": " + e.problem();
    sweep.result.dropped.push_back(o);
    return;
  }
  sweep.legal.push_back(c);
  sweep.result.ranked.push_back(describe(c, k.type, report.data_parallel_size));
}

// Every option of one TP size: CP is --cp (or the scenario's), or --gpus / (TP*PP); a TP that does not divide
// --gpus is dropped as a whole.
void sweep_tp(const Scenario& scenario, const PlanRequest& request, int64_t tp, Sweep& sweep) {
  const int64_t pp = scenario.parallel.pipeline_model_parallel_size;
  int64_t cp = request.cp.value_or(scenario.parallel.context_parallel_size);
  if (request.gpus) {
    if (*request.gpus % (tp * pp) != 0) {
      PlanOption d;
      d.tp = tp;
      d.label = fmt::format("TP{}", tp);
      d.dropped_reason = fmt::format("--gpus {} is not divisible by TP*PP = {}", *request.gpus, tp * pp);
      sweep.result.dropped.push_back(d);
      return;
    }
    cp = *request.gpus / (tp * pp);
  }
  sweep.any_cp = true;
  for (const Candidate& k : comm_candidates(tp, cp)) consider_option(scenario, request, k, sweep);
}

// Ranks the simulated options: by memory (then time) for the memory objective, else the ones that fit first,
// then by step time and memory; the label breaks ties, so the order is total.
void rank_options(PlanResult& result, PlanRequest::Objective objective) {
  result.nothing_fits = std::none_of(result.ranked.begin(), result.ranked.end(),
                                     [](const PlanOption& o) { return o.step.memory.fits; });
  auto key = [&](const PlanOption& o) {
    if (objective == PlanRequest::Objective::memory)
      return std::make_tuple(0, o.step.memory.total_bytes, static_cast<double>(o.step.step_ps), o.label);
    return std::make_tuple(o.step.memory.fits ? 0 : 1, static_cast<double>(o.step.step_ps), o.step.memory.total_bytes,
                           o.label);
  };
  std::sort(result.ranked.begin(), result.ranked.end(),
            [&](const PlanOption& x, const PlanOption& y) { return key(x) < key(y); });
  for (size_t i = 0; i < result.ranked.size(); ++i) result.ranked[i].rank = static_cast<int>(i + 1);
}

}  // namespace

double DiffRow::relative() const {
  if (a == b) return 0;
  return a == 0 ? std::numeric_limits<double>::infinity() : std::fabs(b - a) / std::fabs(a);
}

PlanResult plan(const Scenario& scenario, const PlanRequest& request) {
  parameter_counts(scenario);  // the whole step needs model.vocab_size: fail before any work
  const std::vector<int64_t> tps = sweep_tp_sizes(scenario, request);
  PlanResult result;
  result.objective = request.objective;
  result.global_batch_size = common_global_batch_size(scenario, request, tps);
  Sweep sweep{result, {}, false};
  for (int64_t tp : tps) sweep_tp(scenario, request, tp, sweep);
  simulate_options(sweep.legal, result.ranked, request.threads > 0 ? request.threads : omp_get_num_procs(),
                   request.progress);
  if (!sweep.any_cp)
    throw InputError(SourceLoc{}, "--gpus", fmt::format("--gpus {} fits no TP in the list", *request.gpus),
                     "give a GPU count divisible by TP*PP");
  rank_options(result, request.objective);
  result.explanation = explain(result);
  return result;
}

std::vector<DiffRow> diff_rows(const PlanOption& a, const PlanOption& b) {
  std::vector<DiffRow> rows;
  auto t = [&](const std::string& group, const std::string& name, TimePs x, TimePs y) {
    rows.push_back({group, name, "s", static_cast<double>(x) * 1e-12, static_cast<double>(y) * 1e-12});
  };
  const StepResult &sa = a.step, &sb = b.step;
  t("time", "step time", sa.step_ps, sb.step_ps);
  t("time", "pipeline", sa.pipeline_ps, sb.pipeline_ps);
  t("time", "layer forward", sa.layer_forward_ps, sb.layer_forward_ps);
  t("time", "layer backward", sa.layer_backward_ps, sb.layer_backward_ps);
  t("time", "output layer fwd+bwd", sa.output_layer_forward_ps + sa.output_layer_backward_ps,
    sb.output_layer_forward_ps + sb.output_layer_backward_ps);
  t("time", "attention forward", a.attention_forward_ps, b.attention_forward_ps);
  t("time", "attention backward", a.attention_backward_ps, b.attention_backward_ps);
  t("time", "optimizer step", sa.optimizer_ps, sb.optimizer_ps);
  t("comm", "layer exposed comm", sa.layer_exposed_comm_ps, sb.layer_exposed_comm_ps);
  t("comm", "attention exposed comm", a.attention_exposed_comm_ps, b.attention_exposed_comm_ps);
  t("comm", "DP grad reduce exposed", sa.dp_grad_reduce_exposed_ps, sb.dp_grad_reduce_exposed_ps);
  t("comm", "DP param gather exposed", sa.dp_param_gather_exposed_ps, sb.dp_param_gather_exposed_ps);
  rows.push_back({"time", "model TFLOP/s per GPU", "TFLOP/s", sa.model_tflops_per_gpu, sb.model_tflops_per_gpu});
  auto m = [&](const std::string& name, double x, double y) { rows.push_back({"memory", "memory: " + name, "GB", x, y}); };
  m("total", sa.memory.total_bytes, sb.memory.total_bytes);
  m("weights", sa.memory.weights_bytes, sb.memory.weights_bytes);
  m("gradients", sa.memory.gradients_bytes, sb.memory.gradients_bytes);
  m("optimizer", sa.memory.optimizer_bytes, sb.memory.optimizer_bytes);
  m("activations", sa.memory.activations_bytes, sb.memory.activations_bytes);
  m("logits + loss", sa.memory.output_layer_activations_bytes, sb.memory.output_layer_activations_bytes);
  m("CP attention + TP buffers", sa.memory.cp_attention_buffers_bytes, sb.memory.cp_attention_buffers_bytes);
  m("framework overhead", sa.memory.framework_overhead_bytes, sb.memory.framework_overhead_bytes);
  for (Phase ph : {Phase::forward, Phase::backward})
    for (LinkLevel lv : {LinkLevel::intra_node, LinkLevel::inter_node}) {
      const auto& x = sa.layer.message_totals(ph, lv);
      const auto& y = sb.layer.message_totals(ph, lv);
      const std::string base = "layer messages " + to_string(ph) + " " + to_string(lv);
      rows.push_back({"messages", base + " count", "count", static_cast<double>(x.count), static_cast<double>(y.count)});
      rows.push_back({"messages", base + " bytes", "B", static_cast<double>(x.bytes), static_cast<double>(y.bytes)});
    }
  std::stable_sort(rows.begin(), rows.end(), [](const DiffRow& x, const DiffRow& y) {
    if (x.relative() != y.relative()) return x.relative() > y.relative();
    return std::tie(x.group, x.name) < std::tie(y.group, y.name);
  });
  return rows;
}

PlanOption evaluate_scenario(const Scenario& scenario) {
  parameter_counts(scenario);
  const ValidationReport report = validate_scenario(scenario, ValidationScope::placement);
  PlanOption o = describe(scenario, scenario.parallel.cp_comm_type.front(), report.data_parallel_size);
  simulate_option_step(scenario, o);
  simulate_option_attention(scenario, o);
  return o;
}

}  // namespace hcpsim::sim
