#pragma once
/// The JSON report of `hcpsim plan --json FILE` (schema: README, "plan --json").

#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/plan/plan.hpp"

namespace hcpsim::app {

/// Writes the search's answer: `{"scenario": {name, path}, "objective", "request": {"dimensions": [{name, values,
/// fixed}], "model_gpus", "max_configurations"}, "global_batch_size", "estimate": {...}, "nothing_fits", "winner",
/// "explanation", "options": [every simulated option, ranked ones first], "over_memory": {"count", "options"},
/// "dropped": {"count", "by_reason"}, "provenance": {...}}`; times in seconds, sizes in bytes (unit-suffixed
/// keys). Nothing in it depends on the thread count. Written through io's output writer.
/// @throws InputError naming `path` and --json if it cannot be written.
void write_plan_json(const std::string& path, const Scenario& s, const sim::PlanResult& r, size_t max_configurations,
                     const std::vector<std::string>& overrides);

}  // namespace hcpsim::app
