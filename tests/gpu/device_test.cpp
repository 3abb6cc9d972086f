#include "catch_compat.hpp"
#include "hcpsim/gpu/device_info.hpp"

TEST_CASE("gpu: NCCL and the CUDA runtime report versions without a device", "[gpu]") {
  const auto probe = hcpsim::gpu::probe_devices();
  // CUDA 13.0 at /usr/local/cuda → runtime version >= 13000; NCCL 2.x → ncclGetVersion >= 20000.
  REQUIRE(probe.cuda_runtime_version >= 13000);
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
