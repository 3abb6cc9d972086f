#include <cuda_runtime.h>
#include <nccl.h>

#include "hcpsim/gpu/device_info.hpp"

namespace hcpsim::gpu {

DeviceProbe probe_devices() {
  DeviceProbe probe;
  cudaRuntimeGetVersion(&probe.cuda_runtime_version);
  ncclGetVersion(&probe.nccl_version);  // works without a GPU
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    probe.status = std::string("no usable CUDA device: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error state
    return probe;
  }
  if (count == 0) {
    probe.status = "no usable CUDA device: cudaGetDeviceCount returned 0";
    return probe;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.compute_capability_major = prop.major;
    info.compute_capability_minor = prop.minor;
    info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    info.multiprocessors = prop.multiProcessorCount;
    probe.devices.push_back(info);
  }
  probe.status = "ok";
  return probe;
}

}  // namespace hcpsim::gpu
