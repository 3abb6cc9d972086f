// The CUDA/NCCL objects of a device run (device_run.hpp): which device runs which rank, the streams, the t0 events
// and the NCCL communicators, made in setup() and released by the destructor.

#include <algorithm>
#include <array>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "device_run.hpp"
#include "hcpsim/gpu/cuda_check.hpp"
#include "hcpsim/gpu/host_replay.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim::gpu::detail {

DeviceRun::DeviceRun(const Schedule& schedule, const ExecutionPlan& plan, const DeviceRunOptions& options)
    : s_(schedule), plan_(plan), opt_(options) {
  const size_t nranks = schedule.ranks.size();
  device_of_.resize(nranks);
  for (size_t r = 0; r < nranks; ++r) {
    device_of_[r] = opt_.devices >= 2 && opt_.process_rank < 0 ? static_cast<int>(r) : opt_.device_index;
  }
  streams_.assign(nranks, std::array<cudaStream_t, kStreams>{});
  ptr_.resize(nranks);
  start_.resize(nranks);
  end_.resize(nranks);
  for (size_t r = 0; r < nranks; ++r) {
    ptr_[r].assign(schedule.ranks[r].buffers.size(), nullptr);
    start_[r].assign(schedule.ranks[r].ops.size(), nullptr);
    end_[r].assign(schedule.ranks[r].ops.size(), nullptr);
  }
  scale_ = static_cast<float>(effective_softmax_scale(schedule.shape));
  format_ = opt_.dtype;
  acc_format_ = accumulator_dtype(schedule, opt_.dtype);
}

DeviceRun::~DeviceRun() {
  for (int d : devices()) {
    cudaSetDevice(d);
    cudaDeviceSynchronize();
  }
  for (size_t r = 0; r < ptr_.size(); ++r) {
    cudaSetDevice(device_of_[r]);
    for (float* p : ptr_[r]) {
      if (p != nullptr) cudaFree(p);
    }
    for (cudaEvent_t e : start_[r]) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    for (cudaEvent_t e : end_[r]) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    for (cudaStream_t st : streams_[r]) {
      if (st != nullptr) cudaStreamDestroy(st);
    }
  }
  for (const auto& [d, e] : t0_) {
    cudaSetDevice(d);
    cudaEventDestroy(e);
  }
  for (auto& [key, e] : moved_) {
    cudaSetDevice(device_of_[static_cast<size_t>(key.first)]);
    cudaEventDestroy(e);
  }
  for (ncclComm_t c : comms_) {
    if (c != nullptr) ncclCommDestroy(c);
  }
  cudaGetLastError();
}

std::vector<int> DeviceRun::devices() const {
  if (opt_.process_rank >= 0) return {opt_.device_index};
  std::vector<int> d(device_of_.begin(), device_of_.end());
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  return d;
}

void DeviceRun::setup() {
  for (int d : devices()) {
    HCPSIM_CUDA_CHECK(cudaSetDevice(d));
    cudaEvent_t e = nullptr;
    HCPSIM_CUDA_CHECK(cudaEventCreate(&e));
    t0_[d] = e;
  }
  for (size_t r = 0; r < streams_.size(); ++r) {
    if (!mine(static_cast<int64_t>(r))) continue;
    HCPSIM_CUDA_CHECK(cudaSetDevice(device_of_[r]));
    for (int k = 0; k < kStreams; ++k)
      HCPSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[r][static_cast<size_t>(k)], cudaStreamNonBlocking));
  }
  if (opt_.process_rank >= 0) {
    comms_.assign(s_.ranks.size(), nullptr);
    ncclUniqueId id;
    static_assert(sizeof(id.internal) == 128, "NCCL_UNIQUE_ID_BYTES");
    std::copy(opt_.nccl_unique_id.begin(), opt_.nccl_unique_id.end(), id.internal);
    HCPSIM_CUDA_CHECK(cudaSetDevice(opt_.device_index));
    HCPSIM_NCCL_CHECK(ncclCommInitRank(&comms_[static_cast<size_t>(opt_.process_rank)],
                                       static_cast<int>(s_.ranks.size()), id, opt_.process_rank));
  } else if (opt_.devices >= 2) {
    comms_.assign(static_cast<size_t>(opt_.devices), nullptr);
    std::vector<int> list(static_cast<size_t>(opt_.devices));
    for (int d = 0; d < opt_.devices; ++d) list[static_cast<size_t>(d)] = d;
    HCPSIM_NCCL_CHECK(ncclCommInitAll(comms_.data(), opt_.devices, list.data()));
  }
}

size_t DeviceRun::first_rank_on(int device) const {
  for (size_t r = 0; r < device_of_.size(); ++r) {
    if (device_of_[r] == device && mine(static_cast<int64_t>(r))) return r;
  }
  return 0;
}

}  // namespace hcpsim::gpu::detail
