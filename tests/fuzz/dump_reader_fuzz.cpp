// libFuzzer target: hcpsim's HDF5 dump reader. The input bytes are written to a file and read back with
// read_dump(); a malformed file must end in hcpsim::InputError. Crashes inside Debian's libhdf5 itself are
// recorded in docs/robustness.md.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/dump.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/hcpsim_dump_fuzz_" + std::to_string(getpid()) + ".h5";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const hcpsim::DumpContents d = hcpsim::read_dump(path);
    (void)d;
  } catch (const hcpsim::InputError&) {
    // the expected outcome for a malformed dump
  }
  return 0;
}
