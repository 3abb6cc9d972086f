#pragma once
// `hcpsim verify --backend gpu`: the GPU backend as a verify runner, and the writers of its measured timeline.
// gpu_runner.cpp implements it with the CUDA parts; without them gpu_runner_stub.cpp throws the no-device error
// (DeviceError, exit 3) from every function. No CUDA type appears here.

#include <memory>
#include <string>

#include "hcpsim/io/provenance.hpp"
#include "hcpsim/oracles/verify.hpp"

namespace hcpsim::app {

/// Options of the GPU backend from the command line.
struct GpuVerifyOptions {
  int devices = 1;           ///< --devices: 1 = single-device backend, N = NCCL on N GPUs
  bool tensor_cores = true;  ///< --kernels auto (true) | clear (false)
  Dtype dtype = Dtype::fp32;
};

/// What the last run of a runner measured, for printing and for --trace / --ops-csv.
struct GpuRunRecord;

/// True when this binary has the GPU backend (built with the CUDA parts).
bool gpu_backend_built();

/// Throws DeviceError (exit 3) with the runtime's reason when no CUDA device is usable, or when fewer than
/// options.devices exist; prints nothing. Called before any CPU work so that a host without a GPU fails fast.
void require_gpu(const GpuVerifyOptions& options);

/// A ScheduleRunner that runs the schedule with gpu::run_schedule_on_device and keeps its measurements in
/// `record` (replaced on every call).
ScheduleRunner make_gpu_runner(const GpuVerifyOptions& options, std::shared_ptr<GpuRunRecord>& record);

/// One line: backend, device, measured forward/backward time and kernel counts of the last run.
std::string describe_gpu_run(const GpuRunRecord& record);

/// Writes the measured timeline as a Chrome trace laid out like the simulator's (gpu::measured_timeline: one thread
/// per rank and stream; single-device runs show each virtual rank as its own GPU), with `provenance` as its
/// "otherData" — temporary file, then rename.
void write_gpu_trace(const std::string& path, const GpuRunRecord& record, const Provenance& provenance);

/// Writes the per-op CSV that `hcpsim calibrate` reads (gpu::measured_ops_csv).
void write_gpu_ops_csv(const std::string& path, const GpuRunRecord& record);

/// "single-device" or "nccl", and the device name, of the last run (dump metadata).
std::string gpu_backend_name(const GpuRunRecord& record);
std::string gpu_device_name(const GpuRunRecord& record);

}  // namespace hcpsim::app
