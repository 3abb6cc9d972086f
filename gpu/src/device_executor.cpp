#include "hcpsim/gpu/device_executor.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "device_run.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/gpu/cuda_check.hpp"
#include "hcpsim/gpu/execution_plan.hpp"
#include "hcpsim/gpu/host_replay.hpp"

namespace hcpsim::gpu {

namespace detail {

DeviceRunResult DeviceRun::run(const AttentionInputs& inputs) {
  setup();
  load_inputs(inputs);
  for (const PlanStep& step : plan_.steps) {
    if (step.is_batch) {
      batch(step);
    } else if (mine(step.op.rank)) {
      compute(step.op);
    }
  }
  for (int d : devices()) {
    HCPSIM_CUDA_CHECK(cudaSetDevice(d));
    HCPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  DeviceRunResult out;
  if (opt_.process_rank >= 0) {
    out.local_outputs = local_outputs();
  } else {
    out.result.outputs = gather_outputs();
  }
  out.result.stats = stats_;
  out.timeline = measure();
  out.backend = opt_.devices >= 2 ? "nccl" : "single-device";
  cudaDeviceProp prop{};
  HCPSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, devices().front()));
  out.device_name = prop.name;
  out.tensor_core_blocks = tensor_core_blocks_;
  out.clear_blocks = clear_blocks_;
  for (const MeasuredOp& m : out.timeline) out.elapsed_s = std::max(out.elapsed_s, m.end_s);
  return out;
}

}  // namespace detail

namespace {

int usable_device_count() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw DeviceError(std::string("no usable CUDA device: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err) +
                      "; run on a host with an NVIDIA GPU and driver, or use --backend cpu");
  }
  if (count == 0) throw DeviceError("no usable CUDA device: cudaGetDeviceCount returned 0; use --backend cpu");
  return count;
}

/// The memory check before any allocation: per device the planned peak bytes of its ranks (planned_peak_bytes,
/// summed over the ranks of this process on that device) against cudaMemGetInfo's free memory.
/// @return the bound of the busiest device.
/// @throws DeviceError when a device's bound exceeds its free memory.
int64_t check_device_memory(const Schedule& schedule, const DeviceRunOptions& options) {
  const auto nranks = static_cast<int64_t>(schedule.ranks.size());
  std::map<int, int64_t> bound;
  for (int64_t r = 0; r < nranks; ++r) {
    if (options.process_rank >= 0 && r != options.process_rank) continue;
    const int d = options.devices >= 2 && options.process_rank < 0 ? static_cast<int>(r) : options.device_index;
    bound[d] += planned_peak_bytes(schedule.ranks[static_cast<size_t>(r)]);
  }
  int64_t peak = 0;
  for (const auto& [d, bytes] : bound) {
    HCPSIM_CUDA_CHECK(cudaSetDevice(d));
    size_t free_bytes = 0, total_bytes = 0;
    HCPSIM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    peak = std::max(peak, bytes);
    if (bytes > static_cast<int64_t>(free_bytes))
      throw DeviceError(fmt::format("the schedule needs up to {:.2f} GiB on GPU {} but {:.2f} GiB are free; reduce "
                                    "model.seq_length, check a head subset (oracle.heads) or use more --devices",
                                    static_cast<double>(bytes) / 1073741824.0, d,
                                    static_cast<double>(free_bytes) / 1073741824.0));
  }
  return peak;
}

}  // namespace

DeviceRunResult run_schedule_on_device(const Schedule& schedule, const AttentionInputs& inputs,
                                       const DeviceRunOptions& options) {
  check_gpu_dtype(options.dtype);
  const auto nranks = static_cast<int64_t>(schedule.ranks.size());
  if (options.devices < 1)
    throw InputError(SourceLoc{}, "--devices", "must be at least 1", "use --devices 1 (one GPU for all ranks)");
  if (options.devices >= 2 && options.devices != nranks)
    throw InputError(SourceLoc{}, "--devices",
                     fmt::format("{} devices for {} CP ranks: NCCL puts one rank on each GPU", options.devices, nranks),
                     fmt::format("use --devices {} (one GPU per CP rank) or --devices 1 (all ranks on one GPU)",
                                 nranks));
  if (options.process_rank >= 0 && (options.devices < 2 || options.process_rank >= nranks))
    throw InputError(SourceLoc{}, "--devices",
                     fmt::format("process rank {} of {} CP ranks needs the NCCL backend (devices = CP ranks)",
                                 options.process_rank, nranks),
                     "launch one process per CP rank with the MPI launcher (hcpsim_mpi_verify)");
  const ExecutionPlan plan = build_execution_plan(schedule);  // InputError before touching the device
  const int count = usable_device_count();
  const int needed = options.devices >= 2 && options.process_rank < 0 ? options.devices : options.device_index + 1;
  if (count < needed)
    throw DeviceError(fmt::format("{} CUDA device(s) visible, the run needs {}; use --devices 1", count, needed));
  const int64_t peak = check_device_memory(schedule, options);
  detail::DeviceRun run(schedule, plan, options);
  DeviceRunResult result = run.run(inputs);
  result.planned_peak_bytes = peak;
  return result;
}

NcclRingCheck nccl_one_rank_ring_step(int device, int64_t elements) {
  NcclRingCheck check;
  check.elements = elements;
  HCPSIM_NCCL_CHECK(ncclGetVersion(&check.nccl_version));
  const int count = usable_device_count();
  if (device < 0 || device >= count)
    throw DeviceError(fmt::format("device {} does not exist ({} visible)", device, count));
  HCPSIM_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  cudaStream_t st = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  auto release = [&] {
    if (send != nullptr) cudaFree(send);
    if (recv != nullptr) cudaFree(recv);
    if (st != nullptr) cudaStreamDestroy(st);
    if (comm != nullptr) ncclCommDestroy(comm);
  };
  try {
    int list[1] = {device};
    HCPSIM_NCCL_CHECK(ncclCommInitAll(&comm, 1, list));
    HCPSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const auto bytes = static_cast<size_t>(elements) * sizeof(float);
    HCPSIM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&send), bytes));
    HCPSIM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&recv), bytes));
    std::vector<float> host(static_cast<size_t>(elements));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 4093) * 0.25f - 511.0f;  // exact values
    HCPSIM_CUDA_CHECK(cudaMemcpy(send, host.data(), bytes, cudaMemcpyHostToDevice));
    HCPSIM_CUDA_CHECK(cudaMemset(recv, 0xFF, bytes));  // NaN pattern: an element not received stays NaN
    // One ring step of a P = 1 ring: send to the next rank (self) and receive from the previous (self), grouped.
    HCPSIM_NCCL_CHECK(ncclGroupStart());
    HCPSIM_NCCL_CHECK(ncclSend(send, static_cast<size_t>(elements), ncclFloat, 0, comm, st));
    HCPSIM_NCCL_CHECK(ncclRecv(recv, static_cast<size_t>(elements), ncclFloat, 0, comm, st));
    HCPSIM_NCCL_CHECK(ncclGroupEnd());
    HCPSIM_CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<float> got(host.size());
    HCPSIM_CUDA_CHECK(cudaMemcpy(got.data(), recv, bytes, cudaMemcpyDeviceToHost));
    double err = 0;
    bool finite = true;
    for (size_t i = 0; i < host.size(); ++i) {
      if (!std::isfinite(got[i])) finite = false;
      err = std::max(err, std::fabs(static_cast<double>(got[i]) - static_cast<double>(host[i])));
    }
    check.max_abs_err = finite ? err : INFINITY;
    check.ok = finite && err == 0;
    check.text = fmt::format("NCCL {} one-rank ring step: {} floats, max |recv − send| = {}", check.nccl_version,
                             elements, check.max_abs_err);
  } catch (...) {
    release();
    throw;
  }
  release();
  return check;
}

}  // namespace hcpsim::gpu
