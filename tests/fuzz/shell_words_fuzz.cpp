// libFuzzer target: the launch-script path of `hcpsim import megatron-args`. The input bytes are the script: split
// into Megatron arguments (shell words, variables, arithmetic), interpreted as arguments.py would, then written
// as a scenario that the real loader loads and validates, as cmd_import.cpp does. Every malformed script must end
// in hcpsim::InputError; anything else (another exception, a crash, a hang, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_import_check.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/interop/megatron_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    std::vector<std::string> unresolved;
    const auto args = hcpsim::split_megatron_command_line(text, "fuzz.sh", &unresolved);
    hcpsim::fuzz::import_as_scenario(hcpsim::interpret_megatron_args(args, "fuzz.sh"));
  } catch (const hcpsim::InputError&) {
    // the expected outcome for a malformed script
  }
  return 0;
}
