#pragma once
// Shared by the import fuzz targets: what `hcpsim import` does with an imported config (apps/hcpsim/cmd_import.cpp):
// write it as a scenario, then load and validate that text with the real loader.
#include <string>

#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/interop/megatron_import.hpp"

namespace hcpsim::fuzz {

/// Writes `cfg` as a scenario (dgx-h100 preset) and loads and validates it (placement scope).
/// @throws InputError like `hcpsim import` does for a config that makes no valid scenario.
inline void import_as_scenario(const MegatronConfig& cfg) {
  const ScenarioWriteOptions options;
  const std::string yaml = scenario_yaml_of(cfg, options);
  const Scenario s = load_scenario_text(yaml, "<imported scenario>");
  validate_scenario(s, ValidationScope::placement);
}

}  // namespace hcpsim::fuzz
