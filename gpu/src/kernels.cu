#include "hcpsim/gpu/kernels.hpp"

#include <limits>

#include "hcpsim/gpu/cuda_check.hpp"

namespace hcpsim::gpu {

namespace {

/// Threads per block of the element and row kernels. Source: a multiple of the 32-thread warp; 128 keeps
/// several blocks per SM for the register-heavy row kernels (NVIDIA CUDA C++ Best Practices Guide, occupancy).
constexpr int kThreads = 128;
/// Upper bound on blocks per launch of the grid-stride kernels (they loop over the rest).
/// Source: 65535 is far above the H100/H200's 132 SMs × resident blocks; a grid-stride loop covers any size.
constexpr int64_t kMaxBlocks = 65535;

unsigned blocks_for(int64_t items) {
  int64_t blocks = (items + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

/// Runs body(i) for every i in [0, n) over a grid-stride loop (any grid size covers any n).
template <typename Body>
__device__ void grid_stride(int64_t n, Body&& body) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) body(i);
}

/// (batch, row, head) of flat index i over [batch, rows, heads], heads fastest.
struct RowIndex {
  int64_t b, r, h;
};
__device__ inline RowIndex split_row_index(int64_t i, int64_t rows, int64_t heads) {
  return RowIndex{i / (heads * rows), (i / heads) % rows, i % heads};
}

__global__ void attn_fwd_clear_kernel(AttnFwdArgs a) {
  grid_stride(a.batch * a.nq * a.q.heads, [&](int64_t i) {
    const RowIndex x = split_row_index(i, a.nq, a.q.heads);
    attn_fwd_row(a, x.b, x.r, x.h);
  });
}

__global__ void attn_bwd_delta_kernel(AttnBwdArgs a) {
  grid_stride(a.batch * a.nq * a.q.heads, [&](int64_t i) {
    const RowIndex x = split_row_index(i, a.nq, a.q.heads);
    attn_bwd_delta_row(a, x.b, x.r, x.h);
  });
}

__global__ void attn_bwd_dq_kernel(AttnBwdArgs a) {
  grid_stride(a.batch * a.nq * a.q.heads, [&](int64_t i) {
    const RowIndex x = split_row_index(i, a.nq, a.q.heads);
    attn_bwd_dq_row(a, x.b, x.r, x.h);
  });
}

__global__ void attn_bwd_dkdv_kernel(AttnBwdArgs a) {
  grid_stride(a.batch * a.nk * a.k.heads, [&](int64_t i) {
    const RowIndex x = split_row_index(i, a.nk, a.k.heads);
    attn_bwd_dkdv_row(a, x.b, x.r, x.h);
  });
}

__global__ void copy_segment_kernel(DeviceSegment s, Dtype acc_format) {
  grid_stride(s.batch * s.rows * s.run_elements, [&](int64_t i) {
    const int64_t e = i % s.run_elements;
    const int64_t r = (i / s.run_elements) % s.rows;
    const int64_t b = i / (s.run_elements * s.rows);
    const float v = s.src[s.src_offset + b * s.src_batch_stride + r * s.src_row_stride + e];
    float& d = s.dst[s.dst_offset + b * s.dst_batch_stride + r * s.dst_row_stride + e];
    d = s.accumulate ? semantics::round_to_dtype(d + v, acc_format) : v;
  });
}

__global__ void lse_merge_kernel(TensorRef dst, int64_t dst_row0, TensorRef src, int64_t batch, int64_t rows,
                                 bool naive) {
  grid_stride(batch * rows * dst.heads, [&](int64_t i) {
    const RowIndex x = split_row_index(i, rows, dst.heads);
    float* l = dst.at(x.b, dst_row0 + x.r, x.h);
    const float li = *src.at(x.b, x.r, x.h);
    *l = naive ? semantics::lse_merge_naive(*l, li) : semantics::lse_merge(*l, li);
  });
}

__global__ void out_correction_kernel(TensorRef dst, int64_t dst_row0, TensorRef src, TensorRef src_lse,
                                      TensorRef lse, int64_t batch, int64_t rows, bool accumulate,
                                      Dtype format) {
  grid_stride(batch * rows * dst.heads * dst.width, [&](int64_t i) {
    const int64_t w = i % dst.width;
    const int64_t h = (i / dst.width) % dst.heads;
    const int64_t r = (i / (dst.width * dst.heads)) % rows;
    const int64_t b = i / (dst.width * dst.heads * rows);
    float* d = dst.at(b, dst_row0 + r, h) + w;
    *d = semantics::out_correction(*d, src.at(b, r, h)[w], *src_lse.at(b, r, h), *lse.at(b, dst_row0 + r, h),
                                accumulate, format);
  });
}

__global__ void fill_nan_kernel(float* data, int64_t count) {
  grid_stride(count, [&](int64_t i) { data[i] = __int_as_float(0x7fc00000); });  // quiet NaN
}

}  // namespace

void launch_attn_fwd_clear(const AttnFwdArgs& args, cudaStream_t stream) {
  const int64_t items = args.batch * args.nq * args.q.heads;
  if (items == 0) return;
  attn_fwd_clear_kernel<<<blocks_for(items), kThreads, 0, stream>>>(args);
  HCPSIM_LAUNCH_CHECK("attn_fwd_clear");
}

void launch_attn_bwd_clear(const AttnBwdArgs& args, cudaStream_t stream) {
  const int64_t q_items = args.batch * args.nq * args.q.heads;
  const int64_t kv_items = args.batch * args.nk * args.k.heads;
  if (q_items > 0) {
    attn_bwd_delta_kernel<<<blocks_for(q_items), kThreads, 0, stream>>>(args);
    HCPSIM_LAUNCH_CHECK("attn_bwd_delta");
    attn_bwd_dq_kernel<<<blocks_for(q_items), kThreads, 0, stream>>>(args);
    HCPSIM_LAUNCH_CHECK("attn_bwd_dq_clear");
  }
  if (kv_items > 0) {
    attn_bwd_dkdv_kernel<<<blocks_for(kv_items), kThreads, 0, stream>>>(args);
    HCPSIM_LAUNCH_CHECK("attn_bwd_dkdv_clear");
  }
}

void launch_copy_segment(const DeviceSegment& seg, Dtype acc_format, cudaStream_t stream) {
  const int64_t items = seg.batch * seg.rows * seg.run_elements;
  if (items == 0) return;
  copy_segment_kernel<<<blocks_for(items), kThreads, 0, stream>>>(seg, acc_format);
  HCPSIM_LAUNCH_CHECK("copy_segment");
}

void launch_lse_merge(TensorRef dst, int64_t dst_row0, TensorRef src, int64_t batch, int64_t rows, bool naive,
                      cudaStream_t stream) {
  const int64_t items = batch * rows * dst.heads;
  if (items == 0) return;
  lse_merge_kernel<<<blocks_for(items), kThreads, 0, stream>>>(dst, dst_row0, src, batch, rows, naive);
  HCPSIM_LAUNCH_CHECK("lse_merge");
}

void launch_out_correction(TensorRef dst, int64_t dst_row0, TensorRef src, TensorRef src_lse, TensorRef lse,
                           int64_t batch, int64_t rows, bool accumulate, Dtype format, cudaStream_t stream) {
  const int64_t items = batch * rows * dst.heads * dst.width;
  if (items == 0) return;
  out_correction_kernel<<<blocks_for(items), kThreads, 0, stream>>>(dst, dst_row0, src, src_lse, lse, batch, rows,
                                                                    accumulate, format);
  HCPSIM_LAUNCH_CHECK("out_correction");
}

void launch_fill_nan(float* data, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  fill_nan_kernel<<<blocks_for(count), kThreads, 0, stream>>>(data, count);
  HCPSIM_LAUNCH_CHECK("fill_nan");
}

}  // namespace hcpsim::gpu
