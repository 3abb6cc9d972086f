#pragma once
/// CUDA kernels of the device executor besides the tensor-core attention (attention_tc.hpp): the clear row
/// attention kernels (one thread per output row, block_math.hpp's arithmetic, every format), the strided copy of
/// a CopySegment (messages, all-to-all reorders, copy/add rules), the LSE merge and the output correction.
/// All launch on `stream`, return immediately, and throw DeviceError naming the kernel when the launch fails.

#include <cstdint>

#include <cuda_runtime.h>

#include "hcpsim/gpu/block_math.hpp"

namespace hcpsim::gpu {

/// A CopySegment (execution_plan.hpp) with its buffers resolved to device addresses.
struct DeviceSegment {
  const float* src = nullptr;
  float* dst = nullptr;
  int64_t src_offset = 0, src_batch_stride = 0, src_row_stride = 0;
  int64_t dst_offset = 0, dst_batch_stride = 0, dst_row_stride = 0;
  int64_t batch = 0, rows = 0, run_elements = 0;
  bool accumulate = false;
};

/// Forward block, one thread per (b, r, h) running attn_fwd_row. Requires dv ≤ kMaxHeadDim.
void launch_attn_fwd_clear(const AttnFwdArgs& args, cudaStream_t stream);
/// Backward block: attn_bwd_delta_row into args.delta (scratch [batch, nq, hq] floats, caller-owned), then
/// attn_bwd_dq_row per (b, r, h) and attn_bwd_dkdv_row per (b, c, g). Requires dk, dv ≤ kMaxHeadDim.
void launch_attn_bwd_clear(const AttnBwdArgs& args, cudaStream_t stream);
/// Applies a segment: dst = src, or dst = round(dst + src, acc_format) when seg.accumulate.
void launch_copy_segment(const DeviceSegment& seg, Dtype acc_format, cudaStream_t stream);
/// LseMergeOp: dst rows [dst_row0, dst_row0 + rows) ← merge(dst, src rows [0, rows)) for every batch and head
/// (semantics::lse_merge in fp32, or semantics::lse_merge_naive when naive). dst, src: [batch, ·, heads, 1].
void launch_lse_merge(TensorRef dst, int64_t dst_row0, TensorRef src, int64_t batch, int64_t rows, bool naive,
                      cudaStream_t stream);
/// OutCorrectionOp: dst rows [dst_row0, +rows) (= | +=) src·exp(src_lse − lse[dst rows]) per
/// semantics::out_correction, rounded to `format`. dst, src: [batch, ·, heads, dv]; src_lse, lse: [batch, ·, heads, 1].
void launch_out_correction(TensorRef dst, int64_t dst_row0, TensorRef src, TensorRef src_lse, TensorRef lse,
                           int64_t batch, int64_t rows, bool accumulate, Dtype format, cudaStream_t stream);
/// Fills `count` floats with quiet NaN (AllocOp: a read of an unwritten element surfaces as NaN in an output).
void launch_fill_nan(float* data, int64_t count, cudaStream_t stream);

}  // namespace hcpsim::gpu
