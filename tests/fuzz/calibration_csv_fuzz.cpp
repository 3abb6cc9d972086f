// libFuzzer target: `hcpsim calibrate`. The input bytes are a measured per-op CSV, written to a per-process file
// (read_measured_ops_csv takes a path), read back, fitted on the H100 preset and written as a calibration file,
// as cmd_calibrate.cpp does. Every malformed CSV must end in hcpsim::InputError; anything else (another exception,
// a crash, a hang, a sanitizer report) is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/io/measured_ops.hpp"
#include "hcpsim/step/calibration.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/hcpsim_calibration_fuzz_" + std::to_string(getpid()) + ".csv";
  static const hcpsim::GpuSpec base = hcpsim::cluster_preset("dgx-h100", 1)->gpu;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const auto rows = hcpsim::read_measured_ops_csv(path);
    const auto fit = hcpsim::sim::fit_calibration(rows, base, path);
    (void)hcpsim::sim::calibration_yaml(fit, path);
  } catch (const hcpsim::InputError&) {
    // the expected outcome for a malformed CSV
  }
  return 0;
}
