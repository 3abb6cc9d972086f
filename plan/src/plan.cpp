#include "hcpsim/plan/plan.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <exception>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "hcpsim/config/validation.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/sim/attention_simulation.hpp"
#include "hcpsim/sim/simulation_cost.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/step/training_model.hpp"
#include "plan_search.hpp"

namespace hcpsim::sim {
namespace {

/// The whole step of option `o` (writes step and the per-layer message bytes only).
void simulate_option_step(const Scenario& s, PlanOption& o) {
  SimOptions options;
  options.record_timeline = false;
  options.record_flows = false;
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
  options.record_flows = false;
  const SimResult attn = simulate_attention(s, o.cp_comm_type, o.data_parallel_size, Topology::from_cluster(s.cluster),
                                            options)
                             .result;
  o.attention_forward_ps = attn.forward_ps;
  o.attention_backward_ps = attn.backward_ps;
  o.attention_exposed_comm_ps = attn.critical_exposed_comm_ps();
  o.attention_load_imbalance_ps = attn.load_imbalance_ps();
}

/// The option whose attention-alone simulation option `i` shares: the first with the same comm type, [A, P], TP,
/// CP, PP and micro-batch. Options differ only in those, recompute and VP, and the attention alone reads neither
/// recompute nor VP (simulate_attention: placement, layout, attention shape and cluster), so their results are
/// identical.
std::vector<size_t> shared_attention(const std::vector<PlanOption>& options) {
  std::map<std::tuple<CpCommType, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, size_t> first;
  std::vector<size_t> out(options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    const PlanOption& o = options[i];
    out[i] = first.try_emplace({o.cp_comm_type, o.a2a_size, o.p2p_size, o.tp, o.cp, o.pp, o.micro_batch_size}, i)
                 .first->second;
  }
  return out;
}

/// Runs the simulations of every option (its step, and its attention alone unless an earlier option's is the same,
/// shared_attention) on up to `threads` OpenMP threads. Every simulation is independent and writes only its own
/// fields, so the results do not depend on the thread count or on scheduling. `progress`, when set, hears of every
/// finished simulation, one thread at a time.
void simulate_options(const std::vector<Scenario>& scenarios, std::vector<PlanOption>& options, int threads,
                      const std::function<void(size_t, size_t)>& progress) {
  const std::vector<size_t> attention_of = shared_attention(options);
  struct Task {
    size_t option;
    bool attention;
  };
  std::vector<Task> tasks;
  for (size_t i = 0; i < options.size(); ++i) {
    tasks.push_back({i, false});
    if (attention_of[i] == i) tasks.push_back({i, true});
  }
  // Longest first (all_gather's all-pairs flows, then the longest rings), so two threads finish together.
  auto cost_rank = [&](size_t task) {
    const PlanOption& o = options[tasks[task].option];
    return std::make_tuple(o.cp_comm_type == CpCommType::all_gather ? 0 : 1, -o.p2p_size, tasks[task].option);
  };
  std::vector<size_t> order(tasks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return cost_rank(x) < cost_rank(y); });
  std::vector<std::exception_ptr> errors(tasks.size());
  const int n = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), std::max<size_t>(tasks.size(), 1)));
  size_t done = 0;
  // Dynamic scheduling in `order`, one task at a time: the longest tasks start first. No exception may leave
  // the parallel region, so each task's is kept and the first in task order rethrown afterwards.
#pragma omp parallel for schedule(dynamic, 1) num_threads(n)
  for (size_t k = 0; k < tasks.size(); ++k) {
    const Task& task = tasks[order[k]];
    try {
      if (task.attention) simulate_option_attention(scenarios[task.option], options[task.option]);
      else simulate_option_step(scenarios[task.option], options[task.option]);
    } catch (...) {
      errors[order[k]] = std::current_exception();
    }
#pragma omp critical(hcpsim_plan_progress)
    {
      ++done;
      if (progress) progress(done, tasks.size());
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);  // the first failure in task order
  for (size_t i = 0; i < options.size(); ++i) {
    const PlanOption& from = options[attention_of[i]];
    options[i].attention_forward_ps = from.attention_forward_ps;
    options[i].attention_backward_ps = from.attention_backward_ps;
    options[i].attention_exposed_comm_ps = from.attention_exposed_comm_ps;
    options[i].attention_load_imbalance_ps = from.attention_load_imbalance_ps;
    options[i].simulated = true;
  }
}

// The options to simulate: every one whose closed-form memory fits, or when none does the kLeastMemory that need
// the least and any tied with the last of them (so the answer can say what would be needed); the rest stay in
// `over_memory`, least memory first.
constexpr size_t kLeastMemory = 3;

void split_by_memory(detail::LegalOptions& legal, std::vector<PlanOption>& over_memory) {
  std::vector<size_t> order(legal.options.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto mem = [&](size_t i) { return std::make_tuple(legal.options[i].step.memory.total_bytes, legal.options[i].label); };
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return mem(x) < mem(y); });
  const bool any = std::any_of(legal.options.begin(), legal.options.end(),
                               [](const PlanOption& o) { return o.step.memory.fits; });
  std::vector<bool> keep(order.size(), false);
  // Options tied with the last of the kLeastMemory are simulated too: the closed form leaves out the CP buffers,
  // so comm types tie there, and a cut by label order dropped p2p (the least CP memory) from the three.
  const double cutoff = order.size() >= kLeastMemory
                             ? legal.options[order[kLeastMemory - 1]].step.memory.total_bytes
                             : std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < order.size(); ++k)
    keep[order[k]] = any ? legal.options[order[k]].step.memory.fits
                         : k < kLeastMemory || legal.options[order[k]].step.memory.total_bytes == cutoff;
  detail::LegalOptions kept;
  kept.configurations = legal.configurations;
  for (size_t i = 0; i < legal.options.size(); ++i)
    if (keep[i]) {
      kept.options.push_back(std::move(legal.options[i]));
      kept.scenarios.push_back(std::move(legal.scenarios[i]));
    }
  for (size_t i : order)
    if (!keep[i]) over_memory.push_back(std::move(legal.options[i]));
  legal = std::move(kept);
}

// The size of the search before any simulation: per option the step (its layer; partial recompute a second one
// without recompute) and the attention alone, each costed from simulation_cost.hpp's estimate of the attention
// layer (an order of magnitude, for the message before the search).
PlanEstimate estimate_search(const detail::LegalOptions& simulated, size_t legal, size_t fit, int threads) {
  PlanEstimate e;
  e.configurations = simulated.configurations;
  e.legal = legal;
  e.fit_in_memory = fit;
  e.simulated = simulated.options.size();
  e.threads = threads;
  const std::vector<size_t> attention_of = shared_attention(simulated.options);
  for (size_t i = 0; i < simulated.options.size(); ++i) {
    const PlanOption& o = simulated.options[i];
    const SimulationCost cost =
        estimate_simulation_cost(o.cp_comm_type, o.a2a_size, o.p2p_size, simulated.scenarios[i].model.seq_length);
    const int layers = o.recompute == PlanRecompute::partial ? 2 : 1;
    const double attention = attention_of[i] == i ? 1.0 : 0.0;  // shared with an earlier option
    e.simulations += static_cast<size_t>(layers) + (attention_of[i] == i ? 1 : 0);
    // Event handling grows with the layer's TP ranks; first-touching the per-token state (long sequences) costs
    // about 1.5 s per GB per simulation (measured on the 256k-token 70B scenario, rounded up).
    e.seconds += cost.seconds * (attention + static_cast<double>(layers * o.tp)) +
                 1.5e-9 * cost.bytes * (attention + layers);
  }
  return e;
}

// Ranks the simulated options: the ones that fit first, then by memory (then time) for the memory objective, else
// by step time and memory; the label breaks ties, so the order is total.
void rank_options(PlanResult& result, PlanRequest::Objective objective) {
  result.nothing_fits = std::none_of(result.ranked.begin(), result.ranked.end(),
                                     [](const PlanOption& o) { return o.step.memory.fits; });
  auto key = [&](const PlanOption& o) {
    if (objective == PlanRequest::Objective::memory)
      return std::make_tuple(o.step.memory.fits ? 0 : 1, o.step.memory.total_bytes, static_cast<double>(o.step.step_ps),
                             o.label);
    return std::make_tuple(o.step.memory.fits ? 0 : 1, static_cast<double>(o.step.step_ps), o.step.memory.total_bytes,
                           o.label);
  };
  std::sort(result.ranked.begin(), result.ranked.end(),
            [&](const PlanOption& x, const PlanOption& y) { return key(x) < key(y); });
  // Only options that fit get a place: one that does not is never called a winner (rank 0, listed after).
  int rank = 0;
  for (PlanOption& o : result.ranked) o.rank = o.step.memory.fits ? ++rank : 0;
}

}  // namespace

double DiffRow::relative() const {
  if (a == b) return 0;
  return a == 0 ? std::numeric_limits<double>::infinity() : std::fabs(b - a) / std::fabs(a);
}

std::string to_string(PlanRecompute r) {
  switch (r) {
    case PlanRecompute::none: return "none";
    case PlanRecompute::selective: return "selective";
    case PlanRecompute::full: return "full";
    case PlanRecompute::partial: return "partial";
  }
  return "none";
}

std::string to_string(PlanDimension d) {
  switch (d) {
    case PlanDimension::tp: return "tp";
    case PlanDimension::cp: return "cp";
    case PlanDimension::pp: return "pp";
    case PlanDimension::vp: return "vp";
    case PlanDimension::recompute: return "recompute";
    case PlanDimension::micro_batch: return "micro_batch";
    case PlanDimension::cp_comm_type: return "cp_comm_type";
  }
  return "tp";
}

PlanDimension parse_plan_dimension(const std::string& key) {
  for (PlanDimension d : {PlanDimension::tp, PlanDimension::cp, PlanDimension::pp, PlanDimension::vp,
                          PlanDimension::recompute, PlanDimension::micro_batch, PlanDimension::cp_comm_type})
    if (to_string(d) == key) return d;
  throw InputError(SourceLoc{}, "--fixed", "unknown key '" + key + "'",
                   "use a comma list of tp, cp, pp, vp, recompute, micro_batch, cp_comm_type");
}

PlanResult plan(const Scenario& scenario, const PlanRequest& request) {
  parameter_counts(scenario);  // the whole step needs model.vocab_size: fail before any work
  const detail::SearchSpace space = detail::resolve_search_space(scenario, request);
  PlanResult result;
  result.objective = request.objective;
  result.dimensions = space.dimensions;
  result.model_gpus = space.model_gpus;
  detail::LegalOptions legal = detail::enumerate_options(scenario, space, result);
  const size_t n_legal = legal.options.size();
  const auto fit = static_cast<size_t>(std::count_if(legal.options.begin(), legal.options.end(),
                                                     [](const PlanOption& o) { return o.step.memory.fits; }));
  split_by_memory(legal, result.over_memory);
  const int threads = request.threads > 0 ? request.threads : omp_get_num_procs();
  result.estimate = estimate_search(legal, n_legal, fit, threads);
  if (request.on_estimate) request.on_estimate(result.estimate);
  if (legal.options.size() > request.max_configurations)
    throw InputError(SourceLoc{}, "--max-configurations",
                     fmt::format("the search would simulate {} configurations (of {} enumerated, ~{:.0f} s on one "
                                 "core), above the bound of {}",
                                 legal.options.size(), legal.configurations, result.estimate.seconds,
                                 request.max_configurations),
                     "narrow it with --fixed KEYS or shorter --tp/--pp/--vp/--recompute/--micro-batch lists, or raise "
                     "--max-configurations");
  simulate_options(legal.scenarios, legal.options, threads, request.progress);
  result.ranked = std::move(legal.options);
  rank_options(result, request.objective);
  result.dropped_summary = detail::summarise_dropped(result.dropped);
  result.explanation = detail::explain(result, space);
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
  t("comm", "layer exposed comm (busiest GPU)", sa.layer_critical_exposed_comm_ps, sb.layer_critical_exposed_comm_ps);
  t("comm", "layer load imbalance", sa.layer_load_imbalance_ps, sb.layer_load_imbalance_ps);
  t("comm", "attention exposed comm (busiest GPU)", a.attention_exposed_comm_ps, b.attention_exposed_comm_ps);
  t("comm", "attention load imbalance", a.attention_load_imbalance_ps, b.attention_load_imbalance_ps);
  t("comm", "DP grad reduce exposed", sa.dp_grad_reduce_exposed_ps, sb.dp_grad_reduce_exposed_ps);
  t("comm", "DP param gather exposed", sa.dp_param_gather_exposed_ps, sb.dp_param_gather_exposed_ps);
  rows.push_back({"time", "model TFLOP/s per GPU", "TFLOP/s", sa.model_tflops_per_gpu, sb.model_tflops_per_gpu});
  auto m = [&](const std::string& name, double x, double y) { rows.push_back({"memory", "memory: " + name, "GB", x, y}); };
  m("total", sa.memory.total_bytes, sb.memory.total_bytes);
  m("weights", sa.memory.weights_bytes, sb.memory.weights_bytes);
  m("FP8 weight copies", sa.memory.fp8_weight_copies_bytes, sb.memory.fp8_weight_copies_bytes);
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
  PlanOption o = detail::describe(scenario, scenario.parallel.cp_comm_type.front(), report.data_parallel_size);
  simulate_option_step(scenario, o);
  simulate_option_attention(scenario, o);
  return o;
}

}  // namespace hcpsim::sim
