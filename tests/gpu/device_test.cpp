#include <cuda_runtime_api.h>  // CUDART_VERSION: the toolkit this binary was compiled against

#include "catch_compat.hpp"
#include "hcpsim/gpu/device_info.hpp"

TEST_CASE("gpu: NCCL and the CUDA runtime report versions without a device", "[gpu]") {
  const auto probe = hcpsim::gpu::probe_devices();
  // The runtime loaded is the shared libcudart whose soname matches the toolkit's major version, whatever the
  // host: cudaRuntimeGetVersion encodes 1000·major + 10·minor, so the majors agree. NCCL 2.x encodes
  // ncclGetVersion as 10000·major + 100·minor + patch (>= 20000) since 2.9.
  REQUIRE(probe.cuda_runtime_version > 0);
  REQUIRE(probe.cuda_runtime_version / 1000 == CUDART_VERSION / 1000);
  REQUIRE(probe.nccl_version >= 20000);
}

TEST_CASE("gpu: visible devices have a name, memory and compute capability >= 7.5", "[gpu]") {
  const auto probe = hcpsim::gpu::probe_devices();
  if (probe.devices.empty()) GPU_SKIP_IF_NO_DEVICE(probe.status);
  for (const auto& d : probe.devices) {
    REQUIRE(!d.name.empty());
    REQUIRE(d.memory_bytes > 0);
    REQUIRE(d.compute_capability_major * 10 + d.compute_capability_minor >= 75);  // CUDA 13 dropped sm < 75
  }
}
