#pragma once
/// CUDA device discovery for the GPU backend and for `hcpsim devices`.

#include <cstdint>
#include <string>
#include <vector>

namespace hcpsim::gpu {

/// One visible CUDA device.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int64_t memory_bytes = 0;  ///< total global memory
  int multiprocessors = 0;
};

/// Result of probing the CUDA runtime; never throws.
struct DeviceProbe {
  std::vector<DeviceInfo> devices;  ///< empty when no usable device
  std::string status;               ///< "ok", or why no device is usable (cudaGetErrorString text)
  int cuda_runtime_version = 0;     ///< cudaRuntimeGetVersion, e.g. 13000
  int nccl_version = 0;             ///< ncclGetVersion, e.g. 22703
};

/// Lists the CUDA devices. Without a driver or GPU, returns no devices and the runtime's reason
/// (e.g. cudaErrorInsufficientDriver / cudaErrorNoDevice). Source: CUDA Runtime API cudaGetDeviceCount.
DeviceProbe probe_devices();

}  // namespace hcpsim::gpu
