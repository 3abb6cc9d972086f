#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "plan_search.hpp"

namespace hcpsim::sim::detail {
namespace {

bool held(const SearchSpace& space, PlanDimension d) {
  return std::find(space.fixed.begin(), space.fixed.end(), d) != space.fixed.end();
}

// Where an option's step time goes, per iteration: the pipeline bubble, the recomputed forwards, the exposed
// communication of its layers on their busiest GPU, their load imbalance, the exposed data-parallel collectives
// with the optimizer, and the rest (compute).
struct TimeSplit {
  double bubble = 0, recompute = 0, comm = 0, imbalance = 0, slowed = 0, data_parallel = 0, compute = 0;
};

// The kernel time the layer's busiest GPU (the most compute_busy_ps) loses to communication running beside its
// kernels (RankStats::time_breakdown comm_slowdown_ps, GpuSpec::compute_slowdown_during_comm), ps.
double kernel_time_lost_to_comm(const StepResult& r) {
  const RankStats* busiest = r.layer.most_busy_rank();
  TimePs lost = 0;
  if (busiest != nullptr)
    for (const TimeBreakdown& t : busiest->time_breakdown) lost += t.comm_slowdown_ps;
  return static_cast<double>(lost);
}

TimeSplit time_split(const PlanOption& o) {
  const StepResult& r = o.step;
  TimeSplit t;
  const auto m = static_cast<double>(r.num_microbatches);
  t.bubble = static_cast<double>(r.pipeline_ps) - static_cast<double>(r.stage_microbatch_ps) * m;
  int64_t recomputed = 0;
  for (int64_t k : r.stage_recomputed_layers) recomputed = std::max(recomputed, k);
  t.recompute = static_cast<double>(recomputed) * static_cast<double>(r.layer_forward_ps) * m;
  const double layers = static_cast<double>(r.layers_per_stage) * m;
  // Selective recompute reruns the core attention's forward inside each layer's backward (no whole layer is
  // recomputed): its cost is that forward, the attention alone's as simulated for the option.
  if (o.recompute == PlanRecompute::selective) t.recompute = static_cast<double>(o.attention_forward_ps) * layers;
  t.comm = static_cast<double>(r.layer_critical_exposed_comm_ps) * layers;
  t.imbalance = static_cast<double>(r.layer_load_imbalance_ps) * layers;
  t.slowed = kernel_time_lost_to_comm(r) * layers;
  t.data_parallel = static_cast<double>(r.dp_grad_reduce_exposed_ps + r.dp_param_gather_exposed_ps + r.optimizer_ps);
  t.compute =
      static_cast<double>(r.step_ps) - t.bubble - t.recompute - t.comm - t.imbalance - t.slowed - t.data_parallel;
  return t;
}

std::string ps_text(double ps) { return time_text(static_cast<TimePs>(std::max(0.0, ps))); }

// What would close a compute gap. With the same GPUs per model replica (TP x CP x PP) the two options compute the
// same FLOPs per GPU, so the gap lies in how fast their kernels run: name the kernel category (summed op time of
// the layer's busiest GPU, RankStats::time_breakdown) in which the runner-up spends the most more.
std::string compute_need(const PlanOption& w, const PlanOption& ru) {
  if (w.tp * w.cp * w.pp != ru.tp * ru.cp * ru.pp || w.step.layer.ranks.empty() || ru.step.layer.ranks.empty())
    return "less compute per GPU (a larger share of the model's GPUs)";
  auto sums = [](const StepResult& r) {
    const RankStats& g = r.layer.ranks[static_cast<size_t>(r.layer.busiest_cp_rank)];
    std::array<double, 4> s{};
    for (const TimeBreakdown& t : g.time_breakdown) {
      s[0] += static_cast<double>(t.attention_kernel_ps);
      s[1] += static_cast<double>(t.merge_correction_ps);
      s[2] += static_cast<double>(t.copy_ps);
      s[3] += static_cast<double>(t.other_compute_ps);
    }
    return s;
  };
  const std::array<const char*, 4> names{"attention kernels", "merges and corrections", "copies",
                                         "GEMMs and other kernels"};
  const auto mine = sums(w.step), theirs = sums(ru.step);
  size_t k = 0;
  for (size_t i = 1; i < names.size(); ++i)
    if (theirs[i] - mine[i] > theirs[k] - mine[k]) k = i;
  return fmt::format("faster kernels at the same FLOPs per GPU: per layer its busiest GPU spends {} in {} against {}",
                     ps_text(theirs[k]), names[k], ps_text(mine[k]));
}

// Why the runner-up loses: the part of the step where it spends the most more, and what would close the gap.
std::string runner_up_text(const PlanOption& w, const PlanOption& ru) {
  const double gap = static_cast<double>(ru.step.step_ps - w.step.step_ps);
  const double pct = 100.0 * gap / static_cast<double>(w.step.step_ps);
  // Below 1% the two are a tie within what the cost model can tell apart (assumed efficiencies, no jitter).
  const std::string slower = pct < 1.0 ? fmt::format("is only {:.1f}% slower, a tie within the model's accuracy", pct)
                                       : fmt::format("is {:.1f}% slower", pct);
  const TimeSplit a = time_split(w), b = time_split(ru);
  const std::string compute = compute_need(w, ru);
  const std::array<std::tuple<const char*, double, double, const char*>, 7> parts{{
      {"pipeline bubble", a.bubble, b.bubble,
       ru.vp > 1 ? "more micro-batches per iteration (a larger global batch)"
                 : "more micro-batches per iteration or interleaving (VP)"},
      {"recomputed forwards", a.recompute, b.recompute, "the memory to recompute fewer layers"},
      {"exposed layer communication (on the busiest GPU)", a.comm, b.comm,
       "more of its CP and TP traffic hidden or on NVLink"},
      {"layer load imbalance (the least busy GPU waiting for the busiest)", a.imbalance, b.imbalance,
       "a more even split of the layer's kernel time over its GPUs"},
      {"kernel time lost to communication running beside the kernels", a.slowed, b.slowed,
       "less communication during its kernels (fewer or smaller messages while they run)"},
      {"exposed data-parallel collectives and optimizer", a.data_parallel, b.data_parallel,
       "more overlap of its gradient reduce and parameter gather"},
      {"compute", a.compute, b.compute, compute.c_str()},
  }};
  size_t worst = 0;
  for (size_t i = 1; i < parts.size(); ++i)
    if (std::get<2>(parts[i]) - std::get<1>(parts[i]) > std::get<2>(parts[worst]) - std::get<1>(parts[worst])) worst = i;
  const auto& [name, mine, theirs, need] = parts[worst];
  // The gap can exceed the whole part: removing it alone would not make the runner-up win.
  const std::string alone = gap > theirs ? fmt::format(" (more than all of its {}: that part alone cannot close it)", name)
                                         : std::string();
  return fmt::format("; the runner-up {} {} ({}): the largest difference is its {} ({} against {} per iteration); to "
                     "win it would need {} less per iteration{}, e.g. {}; it uses {} per GPU against {}",
                     ru.label, slower, time_text(ru.step.step_ps), name, ps_text(theirs), ps_text(mine), ps_text(gap),
                     alone, need, gb_text(ru.step.memory.total_bytes), gb_text(w.step.memory.total_bytes));
}

// What the search could not use that might make an option fit: dimensions held by --fixed, list bounds, GPUs.
std::string what_would_fit(const SearchSpace& space) {
  std::vector<std::string> ways;
  if (held(space, PlanDimension::pp)) ways.push_back("more pipeline stages (PP is held by --fixed pp)");
  if (held(space, PlanDimension::recompute)) {
    // Held: the dimension's one value is the scenario's own setting; suggest full recompute unless it is that.
    const auto rc = std::find_if(space.dimensions.begin(), space.dimensions.end(),
                                 [](const PlanDimensionValues& d) { return d.dimension == PlanDimension::recompute; });
    if (rc == space.dimensions.end() || rc->values != std::vector<std::string>{"full"})
      ways.push_back("full recompute (recompute is held by --fixed)");
  }
  else if (std::find(space.recompute.begin(), space.recompute.end(), PlanRecompute::full) == space.recompute.end())
    ways.push_back("full recompute (not in --recompute)");
  if (held(space, PlanDimension::tp)) ways.push_back("a larger TP (held by --fixed tp)");
  if (space.micro_batch.front() > 1) ways.push_back("micro-batch 1 (not in --micro-batch)");
  if (space.model_gpus > 0)
    ways.push_back(fmt::format("more GPUs per model replica (e.g. --gpus {}: weights, gradients and optimizer "
                               "shard over more ranks)",
                               2 * space.model_gpus));
  else if (space.cp)  // --cp (or --fixed cp) excludes --gpus: TP·CP·PP grows with the cluster's nodes
    ways.push_back(fmt::format("more nodes (cluster.nodes=N: with CP {} held, TP x PP can grow to the GPUs the "
                               "cluster has)",
                               *space.cp));
  else
    ways.push_back("more GPUs per model replica (--gpus N, so PP can grow)");
  std::string out;
  for (size_t i = 0; i < ways.size(); ++i) out += (i == 0 ? "" : "; ") + ways[i];
  return out;
}

// No option fits: name no winner; the closest option, by how much it exceeds the GPU, and what would fit.
std::string nothing_fits_text(const PlanResult& r, const SearchSpace& space) {
  // The closest simulated option (`ranked` holds the simulated ones; its memory includes the CP attention buffers);
  // only when none was simulated, the least closed-form estimate of `over_memory`, a lower bound and said to be one.
  const bool estimated = r.ranked.empty();
  const auto& pool = estimated ? r.over_memory : r.ranked;
  const PlanOption* closest = &*std::min_element(pool.begin(), pool.end(), [](const PlanOption& a, const PlanOption& b) {
    return a.step.memory.total_bytes < b.step.memory.total_bytes;
  });
  const MemoryBreakdown& mb = closest->step.memory;
  return fmt::format("nothing fits in GPU memory, so there is no winner: the closest {}option, {}, needs {}{} per GPU "
                     "of {} ({} over; weights {}, gradients {}, optimizer {}, activations {}); the search could not "
                     "use: {}",
                     estimated ? "" : "simulated ", closest->label, estimated ? "at least " : "",
                     gb_text(mb.total_bytes), gb_text(mb.capacity_bytes),
                     gb_text(mb.total_bytes - mb.capacity_bytes), gb_text(mb.weights_bytes),
                     gb_text(mb.gradients_bytes), gb_text(mb.optimizer_bytes), gb_text(mb.activations_bytes),
                     what_would_fit(space));
}

}  // namespace

std::string time_text(TimePs ps) {
  const double s = static_cast<double>(ps) * 1e-12;
  if (ps == 0) return "0 s";  // e.g. no pipeline bubble at PP 1
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} us", s * 1e6);
}

std::string gb_text(double bytes) { return fmt::format("{:.2f} GB", bytes / 1e9); }

std::vector<PlanDroppedGroup> summarise_dropped(const std::vector<PlanOption>& dropped) {
  std::map<std::string, PlanDroppedGroup> groups;
  for (const auto& o : dropped) {
    const std::string& key = o.dropped_key.empty() ? o.dropped_reason : o.dropped_key;
    PlanDroppedGroup& g = groups[key];
    if (g.count++ == 0) {
      g.key = key;
      g.example = o.label + ": " + o.dropped_reason;
    }
  }
  std::vector<PlanDroppedGroup> out;
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.count > y.count; });
  return out;
}

std::string explain(const PlanResult& r, const SearchSpace& space) {
  if (r.ranked.empty() && r.over_memory.empty())
    return "no option is legal for this scenario; see the dropped options below";
  if (r.nothing_fits) return nothing_fits_text(r, space);
  const PlanOption& w = r.ranked[0];
  const StepResult& ws = w.step;
  if (r.objective == PlanRequest::Objective::memory) {
    if (r.ranked.size() == 1)
      return fmt::format("{} is the only simulated option: {} per GPU, {} per iteration", w.label,
                         gb_text(ws.memory.total_bytes), time_text(ws.step_ps));
    const PlanOption& ru = r.ranked[1];
    return fmt::format("{} needs the least memory per GPU, {} ({} activations), against {} for the runner-up {}; "
                       "it takes {} per iteration",
                       w.label, gb_text(ws.memory.total_bytes), gb_text(ws.memory.activations_bytes),
                       gb_text(ru.step.memory.total_bytes), ru.label, time_text(ws.step_ps));
  }
  std::string head = fmt::format("{} wins with {} per iteration ({:.1f} model TFLOP/s per GPU, {} of {} per GPU)",
                                 w.label, time_text(ws.step_ps), ws.model_tflops_per_gpu,
                                 gb_text(ws.memory.total_bytes), gb_text(ws.memory.capacity_bytes));
  // A faster option that does not fit explains the choice best.
  for (const auto& o : r.ranked)
    if (!o.step.memory.fits && o.step.step_ps < ws.step_ps) {
      head += fmt::format("; the faster {} ({}) does not fit: it needs {} of {}", o.label, time_text(o.step.step_ps),
                          gb_text(o.step.memory.total_bytes), gb_text(o.step.memory.capacity_bytes));
      break;  // the fastest of them (the ranking orders them by time)
    }
  if (r.ranked.size() == 1 || !r.ranked[1].step.memory.fits) return head + "; it is the only option that fits";
  return head + runner_up_text(w, r.ranked[1]);
}

}  // namespace hcpsim::sim::detail
