#pragma once
/// Reading scenario YAML (schema_version 1) and applying Megatron-Bridge style `key.path=value` overrides.

#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"

namespace hcpsim {

/// Reads `path` and applies `overrides` (each "a.b.c=value", value parsed as YAML) before conversion.
/// Unknown keys, wrong types and malformed overrides raise InputError naming file:line:col (or the override
/// text), the key path and a fix; unknown keys get a did-you-mean suggestion.
/// Does not apply the configuration rules (see validation.hpp).
/// @throws InputError
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});

/// Same as load_scenario, from YAML text; `display_name` stands in for the file name in messages.
/// @throws InputError
Scenario load_scenario_text(const std::string& text, const std::string& display_name,
                            const std::vector<std::string>& overrides = {});

/// Reads only the `expect:` block of a scenario file, even when the rest of the file is invalid (the goldens of
/// scenarios/invalid/ describe the error the rest produces). Absent block: ExpectSpec{} with present = false.
/// @throws InputError if the file cannot be read, is not YAML, or the expect block itself is malformed.
ExpectSpec load_expect(const std::string& path);

/// Whether `path` holds a calibration file of `hcpsim calibrate` (a YAML map with `source` and `gpu` and no
/// `schema_version`) rather than a scenario: replay skips such files, which live next to the scenarios that include
/// them. False for anything it cannot read or parse (the scenario reader then reports it).
bool is_calibration_file(const std::string& path);

/// Levenshtein distance, used for did-you-mean suggestions.
int edit_distance(const std::string& a, const std::string& b);

}  // namespace hcpsim
