// The ops of a device run outside communication batches (device_run.hpp): each one waits for the plan's
// cross-stream waits, records its start event, is enqueued on its stream (alloc/free, attention blocks on tensor
// cores when supported else the clear row kernels, LSE merge, output correction, copies) and records its end event.

#include <algorithm>
#include <type_traits>
#include <variant>
#include <vector>

#include <cuda_runtime.h>

#include "device_run.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/op_visit.hpp"
#include "hcpsim/gpu/attention_tc.hpp"
#include "hcpsim/gpu/cuda_check.hpp"
#include "hcpsim/gpu/execution_plan.hpp"
#include "hcpsim/gpu/kernels.hpp"

namespace hcpsim::gpu::detail {

cudaEvent_t DeviceRun::new_event(std::vector<std::vector<cudaEvent_t>>& table, const OpRef& ref) {
  cudaEvent_t& e = table[static_cast<size_t>(ref.rank)][static_cast<size_t>(ref.op)];
  if (e == nullptr) HCPSIM_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void DeviceRun::begin(const OpRef& ref, cudaStream_t st) {
  for (OpIndex w : plan_.waits[static_cast<size_t>(ref.rank)][static_cast<size_t>(ref.op)]) {
    cudaEvent_t e = end_[static_cast<size_t>(ref.rank)][static_cast<size_t>(w)];
    HCPSIM_ASSERT(e != nullptr, "device executor: a wait on an op that was not enqueued before");
    HCPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, e, 0));
  }
  HCPSIM_CUDA_CHECK(cudaEventRecord(new_event(start_, ref), st));
}

void DeviceRun::finish(const OpRef& ref, cudaStream_t st) {
  HCPSIM_CUDA_CHECK(cudaEventRecord(new_event(end_, ref), st));
  ++stats_.ops_executed;
}

void DeviceRun::compute(const OpRef& ref) {
  use_device(ref.rank);
  const RankProgram& prog = s_.ranks[static_cast<size_t>(ref.rank)];
  const Op& op = op_of(ref);
  cudaStream_t st = stream(ref.rank, op.stream);
  begin(ref, st);
  auto ptr_of = [&](BufferId id) { return live(ref.rank, id); };
  auto outside_batch = [](const auto&) {
    HCPSIM_ASSERT(false, "device executor: a communication or layer op outside a batch");
  };
  visit_op(
      op.payload,
      Overload{
          [&](const AllocOp& p) {
            float* data = allocate(ref.rank, p.buffer, st);
            const int64_t n = prog.buffers[static_cast<size_t>(p.buffer)].elements();
            if (p.zero) {
              HCPSIM_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<size_t>(n) * sizeof(float), st));
            } else {
              launch_fill_nan(data, n, st);
            }
          },
          [&](const FreeOp& p) {
            float*& data = ptr_[static_cast<size_t>(ref.rank)][static_cast<size_t>(p.buffer)];
            HCPSIM_ASSERT(data != nullptr, "device executor: free of a buffer that is not live");
            HCPSIM_CUDA_CHECK(cudaFreeAsync(data, st));
            data = nullptr;
          },
          [&](const AttnFwdBlockOp& p) {
            const AttnFwdArgs a = make_fwd_args(prog, p, ptr_of, scale_, format_);
            if (opt_.tensor_cores && launch_attn_fwd_tensor_core(a, st)) {
              ++tensor_core_blocks_;
              kernel_[ref] = "tensor_core";
            } else {
              launch_attn_fwd_clear(a, st);
              ++clear_blocks_;
              kernel_[ref] = "clear";
            }
          },
          [&](const AttnBwdBlockOp& p) {
            AttnBwdArgs a = make_bwd_args(prog, p, ptr_of, scale_, format_);
            void* delta = nullptr;
            const int64_t n = std::max<int64_t>(a.batch * a.nq * a.q.heads, 1);
            HCPSIM_CUDA_CHECK(cudaMallocAsync(&delta, static_cast<size_t>(n) * sizeof(float), st));
            a.delta = static_cast<float*>(delta);
            if (opt_.tensor_cores && launch_attn_bwd_tensor_core(a, st)) {
              ++tensor_core_blocks_;
              kernel_[ref] = "tensor_core";
            } else {
              launch_attn_bwd_clear(a, st);
              ++clear_blocks_;
              kernel_[ref] = "clear";
            }
            HCPSIM_CUDA_CHECK(cudaFreeAsync(delta, st));
          },
          [&](const LseMergeOp& p) {
            const int64_t batch = prog.buffers[static_cast<size_t>(p.dst)].batch;
            launch_lse_merge(tensor_ref(prog, p.dst, ptr_of(p.dst)), p.dst_rows.begin,
                             tensor_ref(prog, p.src, ptr_of(p.src)), batch, p.dst_rows.count, p.naive, st);
          },
          [&](const OutCorrectionOp& p) {
            const int64_t batch = prog.buffers[static_cast<size_t>(p.dst)].batch;
            launch_out_correction(tensor_ref(prog, p.dst, ptr_of(p.dst)), p.dst_rows.begin,
                                  tensor_ref(prog, p.src, ptr_of(p.src)),
                                  tensor_ref(prog, p.src_lse, ptr_of(p.src_lse)),
                                  tensor_ref(prog, p.lse, ptr_of(p.lse)), batch, p.dst_rows.count, p.accumulate,
                                  format_, st);
          },
          [&](const CopyOp& p) { launch_copy_segment(resolve(copy_op_segment(prog, ref.rank, p)), acc_format_, st); },
          [&](const SendRecvOp& p) { outside_batch(p); },
          [&](const AllToAllOp& p) { outside_batch(p); },
          [&](const AllGatherOp& p) { outside_batch(p); },
          [&](const ReduceScatterOp& p) { outside_batch(p); },
          [&](const GemmOp& p) { outside_batch(p); },
          [&](const ElementwiseOp& p) { outside_batch(p); },
      });
  finish(ref, st);
}

}  // namespace hcpsim::gpu::detail
