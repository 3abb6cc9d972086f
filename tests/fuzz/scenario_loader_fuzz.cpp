// libFuzzer target: the scenario loader with overrides, then validation.
// Input: YAML text, optionally followed by a line "#--overrides--" and one `key.path=value` override per line.
// Every malformed input must end in hcpsim::InputError; anything else (another exception, a crash, a sanitizer
// report) is a bug.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "hcpsim/core/error.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  const std::string marker = "\n#--overrides--\n";
  if (auto pos = text.find(marker); pos != std::string::npos) {
    std::istringstream rest(text.substr(pos + marker.size()));
    std::string line;
    while (std::getline(rest, line) && overrides.size() < 8) overrides.push_back(line);
    text.resize(pos);
  }
  try {
    const hcpsim::Scenario s = hcpsim::load_scenario_text(text, "fuzz.yaml", overrides);
    hcpsim::validate_scenario(s, hcpsim::ValidationScope::placement);
  } catch (const hcpsim::InputError&) {
    // the expected outcome for malformed input
  }
  return 0;
}
