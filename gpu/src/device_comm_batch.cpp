// The communication batches of a device run (device_run.hpp): one rendezvous batch of the plan (its messages
// and collectives) begins on every member's comm stream, moves its data through the run's backend (NCCL,
// device_comm_nccl.cpp, or the single-device copies here) and finishes on every member's comm stream.

#include <cstdint>
#include <map>
#include <variant>

#include <cuda_runtime.h>

#include "device_run.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/gpu/cuda_check.hpp"
#include "hcpsim/gpu/kernels.hpp"

namespace hcpsim::gpu::detail {
namespace {

OpRef member(const PlanStep& step, int64_t rank) {
  for (const CommItem& item : step.items) {
    if (item.op.rank == rank) return item.op;
  }
  HCPSIM_ASSERT(false, "device executor: a batch source that is not a batch member");
  return OpRef{};
}

}  // namespace

cudaEvent_t DeviceRun::moved_event(int64_t rank, OpIndex op) {
  cudaEvent_t& e = moved_[{rank, op}];
  if (e == nullptr) HCPSIM_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void DeviceRun::count_batch(const PlanStep& step) {
  for (const CommItem& item : step.items) {
    const Op& op = op_of(item.op);
    if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
      if (sr->recv_peer >= 0) {
        ++stats_.messages;
        for (const CopySegment& seg : item.incoming) stats_.message_elements += seg.elements();
      }
    }
  }
  std::map<int64_t, int> collectives;  // one per group and tag
  for (const CommItem& item : step.items) {
    const Op& op = op_of(item.op);
    if (!std::holds_alternative<SendRecvOp>(op.payload)) {
      int64_t first = -1;
      if (const auto* a = std::get_if<AllToAllOp>(&op.payload)) first = a->group.front();
      if (const auto* g = std::get_if<AllGatherOp>(&op.payload)) first = g->group.front();
      if (const auto* rs = std::get_if<ReduceScatterOp>(&op.payload)) first = rs->group.front();
      collectives[first] = 1;
    }
  }
  stats_.all_to_alls += static_cast<int64_t>(collectives.size());
}

void DeviceRun::batch(const PlanStep& step) {
  count_batch(step);
  // Phase 1: every member waits for its own program order and marks its data ready.
  for (const CommItem& item : step.items) {
    if (!mine(item.op.rank)) continue;
    use_device(item.op.rank);
    begin(item.op, stream(item.op.rank, Stream::comm));
  }
  if (opt_.devices >= 2) {
    nccl_batch(step);
  } else {
    single_device_batch(step);
  }
  for (const CommItem& item : step.items) {
    if (!mine(item.op.rank)) continue;
    use_device(item.op.rank);
    finish(item.op, stream(item.op.rank, Stream::comm));
  }
}

void DeviceRun::single_device_batch(const PlanStep& step) {
  for (const CommItem& item : step.items) {
    cudaStream_t st = stream(item.op.rank, Stream::comm);
    for (int64_t src : item.sources) {
      const OpRef src_ref = member(step, src);
      HCPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, start_[static_cast<size_t>(src)][static_cast<size_t>(src_ref.op)], 0));
    }
    for (const CopySegment& seg : item.incoming) launch_copy_segment(resolve(seg), acc_format_, st);
    HCPSIM_CUDA_CHECK(cudaEventRecord(moved_event(item.op.rank, item.op.op), st));
  }
  for (const CommItem& item : step.items) {
    cudaStream_t st = stream(item.op.rank, Stream::comm);
    for (int64_t reader : item.readers) {
      const OpRef ref = member(step, reader);
      HCPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, moved_event(ref.rank, ref.op), 0));
    }
  }
}

}  // namespace hcpsim::gpu::detail
