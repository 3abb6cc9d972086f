// libFuzzer target: `hcpsim import bridge-config`. The input bytes are a Megatron-Bridge YAML config: read with
// parse_bridge_config, then written as a scenario that the real loader loads and validates, as cmd_import.cpp
// does. Every malformed config must end in hcpsim::InputError; anything else (another exception, a crash, a
// sanitizer report) is a bug, unless it is inside yaml-cpp (then docs/robustness.md records it).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_import_check.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/interop/megatron_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    hcpsim::fuzz::import_as_scenario(hcpsim::parse_bridge_config(text, "fuzz.yaml"));
  } catch (const hcpsim::InputError&) {
    // the expected outcome for a malformed config
  }
  return 0;
}
