#include "gpu_runner.hpp"

#include <fmt/core.h>

#include "app_common.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/gpu/device_info.hpp"
#include "hcpsim/io/chrome_trace.hpp"

namespace hcpsim::app {

struct GpuRunRecord {
  gpu::DeviceRunResult run;
  Schedule schedule;  ///< the schedule of `run` (the trace's buffer sizes and message matching)
  Dtype dtype = Dtype::fp32;
};

bool gpu_backend_built() { return true; }

void require_gpu(const GpuVerifyOptions& options) {
  const gpu::DeviceProbe probe = gpu::probe_devices();
  if (probe.devices.empty())
    throw DeviceError("verify --backend gpu: " + probe.status +
                      "; run on a host with an NVIDIA GPU and driver, or use --backend cpu");
  if (static_cast<int>(probe.devices.size()) < options.devices)
    throw DeviceError(fmt::format("verify --backend gpu --devices {}: only {} CUDA device(s) visible; use --devices 1 "
                                  "(every CP rank on one GPU)",
                                  options.devices, probe.devices.size()));
}

ScheduleRunner make_gpu_runner(const GpuVerifyOptions& options, std::shared_ptr<GpuRunRecord>& record) {
  record = std::make_shared<GpuRunRecord>();
  record->dtype = options.dtype;
  std::shared_ptr<GpuRunRecord> rec = record;
  return [options, rec](const Schedule& schedule, const AttentionInputs& inputs) {
    gpu::DeviceRunOptions o;
    o.dtype = options.dtype;
    o.devices = options.devices;
    o.tensor_cores = options.tensor_cores;
    rec->run = gpu::run_schedule_on_device(schedule, inputs, o);
    rec->schedule = schedule;
    return rec->run.result;
  };
}

std::string describe_gpu_run(const GpuRunRecord& record) {
  const gpu::DeviceRunResult& r = record.run;
  double fwd_end = 0, bwd_start = -1, bwd_end = 0;
  for (const gpu::MeasuredOp& m : r.timeline) {
    if (m.phase == Phase::forward) {
      fwd_end = std::max(fwd_end, m.end_s);
    } else {
      bwd_start = bwd_start < 0 ? m.start_s : std::min(bwd_start, m.start_s);
      bwd_end = std::max(bwd_end, m.end_s);
    }
  }
  return fmt::format("measured on {} ({} backend): forward {}, backward {}; attention blocks: {} on tensor cores, {} "
                     "by the clear kernels",
                     r.device_name, r.backend, human_time_ps(static_cast<int64_t>(fwd_end * 1e12)),
                     human_time_ps(static_cast<int64_t>((bwd_start < 0 ? 0 : bwd_end - bwd_start) * 1e12)),
                     r.tensor_core_blocks, r.clear_blocks);
}

void write_gpu_trace(const std::string& path, const GpuRunRecord& record, const Provenance& provenance) {
  TraceTimeline timeline = gpu::measured_timeline(record.run, record.schedule);
  timeline.provenance = provenance;
  write_chrome_trace(path, timeline);
}

void write_gpu_ops_csv(const std::string& path, const GpuRunRecord& record) {
  write_output_file(path, gpu::measured_ops_csv(record.run, record.dtype), "per-op CSV", "--ops-csv");
}

std::string gpu_backend_name(const GpuRunRecord& record) { return record.run.backend; }
std::string gpu_device_name(const GpuRunRecord& record) { return record.run.device_name; }

}  // namespace hcpsim::app
