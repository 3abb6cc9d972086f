// The GPU runner of a build without the CUDA parts (HCPSIM_ENABLE_CUDA=OFF or no nvcc): every entry point of
// gpu_runner.hpp throws the no-device error, so the commands need no #if of their own.
#include "gpu_runner.hpp"

#include "hcpsim/core/error.hpp"

namespace hcpsim::app {

struct GpuRunRecord {};

namespace {

[[noreturn]] void no_gpu_backend() {
  throw DeviceError("hcpsim was built without CUDA (HCPSIM_ENABLE_CUDA=OFF); use --backend cpu");
}

}  // namespace

bool gpu_backend_built() { return false; }
void require_gpu(const GpuVerifyOptions&) { no_gpu_backend(); }
ScheduleRunner make_gpu_runner(const GpuVerifyOptions&, std::shared_ptr<GpuRunRecord>&) { no_gpu_backend(); }
std::string describe_gpu_run(const GpuRunRecord&) { no_gpu_backend(); }
void write_gpu_trace(const std::string&, const GpuRunRecord&, const Provenance&) { no_gpu_backend(); }
void write_gpu_ops_csv(const std::string&, const GpuRunRecord&) { no_gpu_backend(); }
std::string gpu_backend_name(const GpuRunRecord&) { no_gpu_backend(); }
std::string gpu_device_name(const GpuRunRecord&) { no_gpu_backend(); }

}  // namespace hcpsim::app
