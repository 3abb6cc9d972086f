#pragma once
/// The one entry point that simulates a scenario's attention layer: placement of the CP ranks on the
/// topology's GPUs, the schedule, the symmetry-reduced run where it applies and its fallback to the full run
/// where it is not exact. Used by `simulate`, `plan`, `diff` and `replay`.

#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "hcpsim/sim/topology.hpp"

namespace hcpsim::sim {

/// Global GPU index of every CP rank of the first CP group of `scenario` (Megatron rank order, place_cp_group()),
/// without checking them against a topology.
/// @param data_parallel_size  the resolved size (ValidationReport::data_parallel_size).
std::vector<int64_t> cp_group_gpus(const Scenario& scenario, int64_t data_parallel_size);

/// cp_group_gpus(), checked against `topology`.
/// @throws InputError located at `cluster` if `topology` has fewer GPUs than the placement needs.
std::vector<int64_t> scenario_cp_gpus(const Scenario& scenario, int64_t data_parallel_size, const Topology& topology);

/// One simulated attention layer and how it was obtained.
struct AttentionSimulation {
  SimResult result;
  bool reduced = false;  ///< from the symmetry-reduced run, which was exact (same times, bytes and memory)
  std::string note;      ///< one line for the user: what was simulated and why
  /// The schedule simulated: build_schedule_ranks' representatives when `reduced`, build_schedule's otherwise.
  /// simulate_step can wrap it into the layer instead of building it again (move it there).
  Schedule schedule;
};

/// Simulates the forward and backward of one attention layer of `cp_comm_type` for one TP rank.
/// The symmetry reduction (docs/simulator.md) is tried when symmetry_reduction_blocker() finds nothing against it
/// and `full_run_reason` is empty; when its run reports symmetry_exact = false, the full schedule is simulated
/// instead. The reduced run gives the full run's times, messages and memory, but not its event and flow counts
/// or the order of its flows, so anything that prints those (a trace, a digest of the summary) passes a reason.
/// @param options  options.symmetry_reduction is ignored (set here).
/// @throws InputError from scenario_cp_gpus() or the layout (cp_layout_for()).
AttentionSimulation simulate_attention(const Scenario& scenario, CpCommType cp_comm_type, int64_t data_parallel_size,
                                       const Topology& topology, const SimOptions& options,
                                       const std::string& full_run_reason = "");

}  // namespace hcpsim::sim
