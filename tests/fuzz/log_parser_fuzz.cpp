// libFuzzer target: the Megatron training-log reader of `hcpsim check-log` (and the logs `calibrate` users check).
// The input bytes are the log: parse_megatron_log, then what cmd_check_log.cpp does with it: the arguments block
// interpreted (log_block = true) and written as a scenario for the loader, and the hierarchical-CP and throughput
// checks. Every malformed log must end in hcpsim::InputError; anything else (another exception, a crash, a hang, a
// sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz_import_check.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/interop/megatron_log.hpp"

namespace {

/// The arguments block as check-log interprets it; std::nullopt when absent or refused.
std::optional<hcpsim::MegatronConfig> log_arguments(const hcpsim::MegatronLog& log) {
  if (log.arguments.empty()) return std::nullopt;
  try {
    hcpsim::MegatronConfig cfg = hcpsim::interpret_megatron_args(log.arguments, log.path, true);
    try {
      hcpsim::fuzz::import_as_scenario(cfg);
    } catch (const hcpsim::InputError&) {
      // check-log reports this as a finding
    }
    return cfg;
  } catch (const hcpsim::InputError&) {
    return std::nullopt;  // check-log reports this as a finding
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const hcpsim::MegatronLog log = hcpsim::parse_megatron_log(bytes, "fuzz.log");
    const auto args = log_arguments(log);
    (void)hcpsim::check_hierarchical_cp(log, args);
    const hcpsim::GpuPeak peak{989.4, "H100-SXM5-80GB, fuzz", false};
    (void)hcpsim::check_throughput_peak(log, peak, args && args->fp8);
    (void)hcpsim::check_throughput_vs_model(log, 400.0);
    (void)hcpsim::check_throughput_below_model(log, 400.0);
    (void)hcpsim::preset_of_gpu_name(log.gpu_name.value_or(""));
  } catch (const hcpsim::InputError&) {
    // the expected outcome for a malformed log
  }
  return 0;
}
