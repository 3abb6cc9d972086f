#include "hcpsim/gpu/cuda_check.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "hcpsim/core/error.hpp"

namespace hcpsim::gpu {

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear the sticky state of a non-fatal error
  throw DeviceError(fmt::format("{}:{}: {}: {}: {}", file, line, call, cudaGetErrorName(status),
                                cudaGetErrorString(status)));
}

void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  throw DeviceError(fmt::format("{}:{}: {}: {} ({})", file, line, call, ncclGetErrorString(status),
                                ncclGetLastError(nullptr)));
}

void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw DeviceError(fmt::format("{}:{}: kernel launch {}: {}: {}", file, line, kernel, cudaGetErrorName(status),
                                cudaGetErrorString(status)));
}

}  // namespace hcpsim::gpu
