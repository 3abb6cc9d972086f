#pragma once
/// Status checks at every CUDA runtime and NCCL call: a failure becomes hcpsim::DeviceError with
/// "file:line: call: error name: error string", which the command line maps to exit code 3 (docs/architecture.md "Conventions").

#include <string>

#include <cuda_runtime.h>
#include <nccl.h>

#include "hcpsim/core/error.hpp"

namespace hcpsim::gpu {

/// Throws DeviceError("file:line: call: name: text") unless `status` is cudaSuccess; clears the runtime's last
/// error first so that a later check does not report this one again.
void check_cuda(cudaError_t status, const char* call, const char* file, int line);
/// Throws DeviceError("file:line: call: ncclGetErrorString (ncclGetLastError)") unless `status` is ncclSuccess.
void check_nccl(ncclResult_t status, const char* call, const char* file, int line);
/// After a kernel launch: cudaGetLastError, reported as DeviceError("file:line: kernel launch <name>: ...").
void check_launch(const char* kernel, const char* file, int line);

}  // namespace hcpsim::gpu

/// Checks a CUDA runtime call: HCPSIM_CUDA_CHECK(cudaMalloc(&p, n)).
#define HCPSIM_CUDA_CHECK(call) ::hcpsim::gpu::check_cuda((call), #call, __FILE__, __LINE__)
/// Checks an NCCL call: HCPSIM_NCCL_CHECK(ncclGroupEnd()).
#define HCPSIM_NCCL_CHECK(call) ::hcpsim::gpu::check_nccl((call), #call, __FILE__, __LINE__)
/// Checks the launch of kernel `name` just issued.
#define HCPSIM_LAUNCH_CHECK(name) ::hcpsim::gpu::check_launch((name), __FILE__, __LINE__)
