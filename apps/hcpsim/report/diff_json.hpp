#pragma once
/// The JSON report of `hcpsim diff A [B] [overrides] --json FILE` (schema: README, "diff --json").

#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/plan/plan.hpp"

namespace hcpsim::app {

/// One side of a diff as the report names it.
struct DiffSide {
  const Scenario* scenario = nullptr;   ///< the loaded scenario (after overrides)
  std::string path;                     ///< as given on the command line
  std::vector<std::string> overrides;   ///< overrides applied to this side, in order (A has none)
  const sim::PlanOption* option = nullptr;  ///< its simulated whole step (sim::evaluate_scenario)
};

/// Writes `{"a": side, "b": side, "compared": N, "changed": M, "rows": [...], "provenance": B's}` where a side is
/// `{"name", "path", "overrides", "option", "cp_comm_type", "a2a_size", "p2p_size", "tp", "cp",
/// "data_parallel_size", "step_time_s", "memory_per_gpu_bytes", "capacity_bytes", "fits", "scenario_digest"}` and
/// a row `{"group", "quantity", "unit", "a", "b", "delta", "relative"}` in sim::diff_rows order (every row, the
/// unchanged ones last). Units: "s", "bytes" (message bytes and memory), "count", "TFLOP/s"; `relative` is
/// |b − a| / |a|, null when a = 0 ≠ b. Written atomically through io's output writer.
/// @throws InputError naming `path` and --json if it cannot be written.
void write_diff_json(const std::string& path, const DiffSide& a, const DiffSide& b,
                     const std::vector<sim::DiffRow>& rows);

}  // namespace hcpsim::app
