#include "hcpsim/sim/attention_simulation.hpp"

#include <fmt/format.h>

#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule_builder.hpp"

namespace hcpsim::sim {

std::vector<int64_t> cp_group_gpus(const Scenario& s, int64_t data_parallel_size) {
  std::vector<int64_t> gpus;
  for (const auto& p : place_cp_group(s.parallel.order, parallel_sizes(s, data_parallel_size), s.cluster.gpus_per_node))
    gpus.push_back(p.global_rank);
  return gpus;
}

std::vector<int64_t> scenario_cp_gpus(const Scenario& s, int64_t data_parallel_size, const Topology& topology) {
  const std::vector<int64_t> gpus = cp_group_gpus(s, data_parallel_size);
  for (int64_t g : gpus)
    if (g >= topology.gpu_count())
      throw InputError(s.locations.count("cluster") ? s.locations.at("cluster") : SourceLoc{}, "cluster",
                       fmt::format("the topology has {} GPUs but CP rank placement needs GPU {}", topology.gpu_count(), g),
                       "add GPUs to cluster.topology or reduce the parallel sizes");
  return gpus;
}

AttentionSimulation simulate_attention(const Scenario& s, CpCommType t, int64_t data_parallel_size,
                                       const Topology& topology, const SimOptions& options,
                                       const std::string& full_run_reason) {
  const std::vector<int64_t> gpus = scenario_cp_gpus(s, data_parallel_size, topology);
  const CpLayout layout = cp_layout_for(s, t);
  const AttentionShape shape = attention_shape(s);
  const int64_t a = layout.a2a_size(), p = layout.p2p_size();
  const std::string blocker =
      full_run_reason.empty() ? symmetry_reduction_blocker(t, a, p, s.cluster, gpus) : full_run_reason;
  AttentionSimulation out;
  SimOptions run = options;
  if (blocker.empty()) {
    run.symmetry_reduction = true;
    out.schedule = build_schedule_ranks(t, layout, shape, symmetry_representatives(a, p), options.threads);
    out.result = simulate(out.schedule, s.cluster, topology, gpus, run);
    if (out.result.symmetry_exact) {
      out.reduced = true;
      out.note = fmt::format("symmetry reduction: simulated {} representative CP rank{} (a2a_rank 0), each "
                             "standing for its {} a2a peers; exact",
                             out.result.simulated_ranks, out.result.simulated_ranks == 1 ? "" : "s", a);
      return out;
    }
    out.note = "symmetry reduction not exact here (" + out.result.symmetry_note + "); full simulation";
  } else {
    out.note = "full simulation (symmetry reduction does not apply: " + blocker + ")";
  }
  run.symmetry_reduction = false;
  run.schedule_checked = true;  // build_schedule checks what it builds
  out.schedule = build_schedule(t, layout, shape, options.threads);
  out.result = simulate(out.schedule, s.cluster, topology, gpus, run);
  return out;
}

}  // namespace hcpsim::sim
