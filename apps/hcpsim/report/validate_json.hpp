#pragma once
/// The JSON report of `hcpsim validate --json FILE` (schema: README, "validate --json").

#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/core/error.hpp"

namespace hcpsim::app {

/// Writes the report of a scenario that validates: `{"verdict": "valid", "scenario": {...}, "parallel": {...},
/// "cluster": {...}, "layouts": [one per distinct cp_comm_type], "attention_backends": [...], "warnings": [...],
/// "provenance": {...}}` (ranks are global ranks, nodes 0-based). Written through io's output writer.
/// @throws InputError naming `path` and --json if it cannot be written.
void write_validate_json(const std::string& path, const Scenario& s, const ValidationReport& report,
                         const std::vector<std::string>& overrides);

/// Writes the report of a scenario that does not load or validate: `{"verdict": "invalid", "scenario": {"path"},
/// "error": {"message", "key", "problem", "fix"}}` (message is the whole line validate prints, without
/// "error: "). @throws InputError naming `path` and --json if it cannot be written.
void write_validate_error_json(const std::string& path, const std::string& scenario_path, const InputError& error);

}  // namespace hcpsim::app
