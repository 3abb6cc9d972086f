// The NCCL backend of a device run's communication batches (device_run.hpp, device_comm_batch.cpp): pack on the
// senders, one grouped ncclSend/ncclRecv per batch, unpack on the destinations, all on the ranks' comm streams.

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

#include <cuda_runtime.h>
#include <nccl.h>

#include "device_run.hpp"
#include "hcpsim/gpu/cuda_check.hpp"
#include "hcpsim/gpu/kernels.hpp"

namespace hcpsim::gpu::detail {
namespace {

int64_t packed_elements(const CommItem& dst, int64_t src_rank) {
  int64_t n = 0;
  for (const CopySegment& seg : dst.incoming) {
    if (seg.src_rank == src_rank) n += seg.elements();
  }
  return n;
}

}  // namespace

void DeviceRun::nccl_batch(const PlanStep& step) {
  std::map<std::pair<int64_t, int64_t>, float*> send_stage, recv_stage;  // (src, dst) → staging
  auto alloc_stage = [&](int64_t rank, int64_t n) {
    use_device(rank);
    void* raw = nullptr;
    HCPSIM_CUDA_CHECK(cudaMallocAsync(&raw, static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float),
                                      stream(rank, Stream::comm)));
    return static_cast<float*>(raw);
  };
  // Pack on the senders.
  for (const CommItem& dst : step.items) {
    for (int64_t src : dst.sources) {
      const int64_t n = packed_elements(dst, src);
      if (mine(dst.op.rank)) recv_stage[{src, dst.op.rank}] = alloc_stage(dst.op.rank, n);
      if (!mine(src)) continue;
      float* stage = alloc_stage(src, n);
      send_stage[{src, dst.op.rank}] = stage;
      int64_t offset = 0;
      for (const CopySegment& seg : dst.incoming) {
        if (seg.src_rank != src) continue;
        DeviceSegment d = resolve(seg, true, false);
        d.dst = stage + offset;
        d.dst_offset = 0;
        d.dst_row_stride = seg.run_elements;
        d.dst_batch_stride = seg.rows * seg.run_elements;
        d.accumulate = false;
        launch_copy_segment(d, acc_format_, stream(src, Stream::comm));
        offset += seg.elements();
      }
    }
  }
  HCPSIM_NCCL_CHECK(ncclGroupStart());
  for (const CommItem& dst : step.items) {
    for (int64_t src : dst.sources) {
      const auto n = static_cast<size_t>(packed_elements(dst, src));
      if (mine(src))
        HCPSIM_NCCL_CHECK(ncclSend(send_stage.at({src, dst.op.rank}), n, ncclFloat, static_cast<int>(dst.op.rank),
                                   comms_[static_cast<size_t>(src)], stream(src, Stream::comm)));
      if (mine(dst.op.rank))
        HCPSIM_NCCL_CHECK(ncclRecv(recv_stage.at({src, dst.op.rank}), n, ncclFloat, static_cast<int>(src),
                                   comms_[static_cast<size_t>(dst.op.rank)], stream(dst.op.rank, Stream::comm)));
    }
  }
  HCPSIM_NCCL_CHECK(ncclGroupEnd());
  // Unpack on the destinations.
  for (const CommItem& dst : step.items) {
    if (!mine(dst.op.rank)) continue;
    use_device(dst.op.rank);
    cudaStream_t st = stream(dst.op.rank, Stream::comm);
    std::map<int64_t, int64_t> offset;
    for (const CopySegment& seg : dst.incoming) {
      DeviceSegment d = resolve(seg, seg.src_rank == dst.op.rank, true);
      if (seg.src_rank != dst.op.rank) {
        d.src = recv_stage.at({seg.src_rank, dst.op.rank}) + offset[seg.src_rank];
        d.src_offset = 0;
        d.src_row_stride = seg.run_elements;
        d.src_batch_stride = seg.rows * seg.run_elements;
        offset[seg.src_rank] += seg.elements();
      }
      launch_copy_segment(d, acc_format_, st);
    }
  }
  for (const auto& [key, p] : send_stage) {
    use_device(key.first);
    HCPSIM_CUDA_CHECK(cudaFreeAsync(p, stream(key.first, Stream::comm)));
  }
  for (const auto& [key, p] : recv_stage) {
    use_device(key.second);
    HCPSIM_CUDA_CHECK(cudaFreeAsync(p, stream(key.second, Stream::comm)));
  }
}

}  // namespace hcpsim::gpu::detail
