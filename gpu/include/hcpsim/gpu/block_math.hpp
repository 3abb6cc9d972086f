#pragma once
/// The arithmetic of the GPU backend's kernels, written once for the device and the host: every function here is
/// `__host__ __device__` under nvcc and plain C++ otherwise, so the CPU tests run exactly the code the CUDA kernels
/// run (one thread per output row) and check it against the float64 oracle without a GPU.
///
/// Storage convention of the device executor: every buffer element is a `float` holding a value of the run's
/// format (fp32, or a bf16/fp16 value widened exactly), in the schedule's layout [b, rows, heads, width] (bshd,
/// row-major; schedule.hpp). Rounding to the run's format happens only where TE's path rounds
/// (docs/algorithm.md §4.4, §5.3; the same points as the CPU oracle, cpu_executor.hpp): kernel outputs out, dq, dk,
/// dv; output corrections; accumulating copies (to the accumulator format). softmax_lse is fp32.
/// The rules these kernels apply (mask visibility, rounding) and the LSE merge and output correction the element
/// kernels run are core/semantics.hpp's, the definitions the CPU oracle uses too.
/// Source of the formulas: docs/algorithm.md §4.4 (forward block, merge, output correction), §5.2 (block backward).

#include <cmath>
#include <cstdint>

#include "hcpsim/core/host_device.hpp"
#include "hcpsim/core/semantics.hpp"

namespace hcpsim::gpu {

/// Largest head dimension (dk, dv) the row kernels support: their per-thread accumulators are fixed-size arrays.
/// Source: TE/FlashAttention support head dims up to 256 (FlashAttention-2 README).
constexpr int kMaxHeadDim = 256;

/// A device (or host) view of one buffer [b, rows, heads, width] stored as floats, row-major.
struct TensorRef {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t heads = 0;
  int64_t width = 0;
  /// Flat element index of (b, r, h, w): ((b·rows + r)·heads + h)·width + w.
  HCPSIM_HOST_DEVICE int64_t index(int64_t b, int64_t r, int64_t h, int64_t w) const {
    return ((b * rows + r) * heads + h) * width + w;
  }
  /// Address of the `width` contiguous elements of (b, r, h).
  HCPSIM_HOST_DEVICE float* at(int64_t b, int64_t r, int64_t h) const { return data + index(b, r, h, 0); }
};

/// Arguments of one forward block (AttnFwdBlockOp): q rows [q_row0, q_row0 + nq) of q against KV rows
/// [kv_row0, kv_row0 + nk) of k, v; writes out rows [0, nq) and lse rows [0, nq).
/// Shapes: q [batch, ≥ q_row0+nq, hq, dk]; k [batch, ≥ kv_row0+nk, hkv, dk]; v [batch, ·, hkv, dv];
/// out [batch, ≥ nq, hq, dv]; lse [batch, ≥ nq, hq, 1]. GQA: q head h uses kv head h / (hq / hkv).
struct AttnFwdArgs {
  TensorRef q, k, v, out, lse;
  int64_t batch = 0, q_row0 = 0, nq = 0, kv_row0 = 0, nk = 0;
  BlockMask mask = BlockMask::none;
  float scale = 0;                        ///< softmax_scale
  Dtype format = Dtype::fp32;             ///< out is rounded to this format; lse stays fp32
};

/// Arguments of one backward block (AttnBwdBlockOp) given the global out and lse. Reads q, out, dout, lse at
/// q rows [q_row0, q_row0 + nq) and k, v at [kv_row0, kv_row0 + nk); writes dq rows [0, nq) and dk, dv rows
/// [0, nk). `delta` is scratch [batch, nq, hq] (D_r = Σ dout_r·out_r), filled by attn_bwd_delta_row first.
struct AttnBwdArgs {
  TensorRef q, k, v, out, dout, lse, dq, dk, dv;
  float* delta = nullptr;
  int64_t batch = 0, q_row0 = 0, nq = 0, kv_row0 = 0, nk = 0;
  BlockMask mask = BlockMask::none;
  float scale = 0;
  Dtype format = Dtype::fp32;  ///< dq, dk, dv are rounded to this format
};

/// Forward of block row r of query head h, batch b (one GPU thread): online softmax over the visible KV rows in
/// ascending order (running max, rescaled sum and accumulator, fp32), then lse = max + log(sum) and
/// out = round(acc / sum). A row with no visible key: lse = −inf and out = 0 (never NaN).
/// Requires dv ≤ kMaxHeadDim. Source: Milakov & Gimelshein 2018 (online softmax); docs/algorithm.md §4.4.
HCPSIM_HOST_DEVICE inline void attn_fwd_row(const AttnFwdArgs& a, int64_t b, int64_t r, int64_t h) {
  const int64_t group = a.q.heads / a.k.heads;
  const int64_t g = h / group;
  const int64_t dk = a.q.width;
  const int64_t dv = a.v.width;
  const float* q = a.q.at(b, a.q_row0 + r, h);
  float acc[kMaxHeadDim];
  for (int64_t w = 0; w < dv; ++w) acc[w] = 0.0f;
  float row_max = -INFINITY;
  float row_sum = 0.0f;
  const int64_t visible = semantics::visible_columns(a.mask, r, a.nq, a.nk).end;
  for (int64_t c = 0; c < visible; ++c) {
    const float* k = a.k.at(b, a.kv_row0 + c, g);
    float dot = 0.0f;
    for (int64_t w = 0; w < dk; ++w) dot += q[w] * k[w];
    const float s = a.scale * dot;
    if (s > row_max) {
      const float rescale = expf(row_max - s);  // exp(−inf) = 0 on the first visible key
      row_sum *= rescale;
      for (int64_t w = 0; w < dv; ++w) acc[w] *= rescale;
      row_max = s;
    }
    const float p = expf(s - row_max);
    row_sum += p;
    const float* v = a.v.at(b, a.kv_row0 + c, g);
    for (int64_t w = 0; w < dv; ++w) acc[w] += p * v[w];
  }
  float* out = a.out.at(b, r, h);
  float* lse = a.lse.at(b, r, h);
  if (visible == 0) {  // no visible key: the empty-row rule (docs/algorithm.md §4.4), never NaN
    for (int64_t w = 0; w < dv; ++w) out[w] = 0.0f;
    lse[0] = -INFINITY;
    return;
  }
  const float inv = 1.0f / row_sum;
  for (int64_t w = 0; w < dv; ++w) out[w] = semantics::round_to_dtype(acc[w] * inv, a.format);
  lse[0] = row_max + logf(row_sum);
}

/// D_r = Σ_w dout[r, w]·out[r, w] (fp32) for block row r of head h, batch b, into a.delta[(b·nq + r)·hq + h].
HCPSIM_HOST_DEVICE inline void attn_bwd_delta_row(const AttnBwdArgs& a, int64_t b, int64_t r, int64_t h) {
  const float* o = a.out.at(b, a.q_row0 + r, h);
  const float* d = a.dout.at(b, a.q_row0 + r, h);
  float sum = 0.0f;
  for (int64_t w = 0; w < a.out.width; ++w) sum += d[w] * o[w];
  a.delta[(b * a.nq + r) * a.q.heads + h] = sum;
}

/// dQ of block row r of query head h, batch b (one GPU thread): for every visible KV row c in ascending order,
/// P = exp(s − L_r), dS = P·(dout_r·v_c − D_r), dQ_r += scale·dS·k_c (fp32), then rounded to a.format.
/// Requires dk ≤ kMaxHeadDim and delta filled. Source: docs/algorithm.md §5.2; FlashAttention-2 Algorithm 2.
HCPSIM_HOST_DEVICE inline void attn_bwd_dq_row(const AttnBwdArgs& a, int64_t b, int64_t r, int64_t h) {
  const int64_t group = a.q.heads / a.k.heads;
  const int64_t g = h / group;
  const int64_t dk = a.q.width;
  const int64_t dv = a.v.width;
  const float* q = a.q.at(b, a.q_row0 + r, h);
  const float* dout = a.dout.at(b, a.q_row0 + r, h);
  const float lse = a.lse.at(b, a.q_row0 + r, h)[0];
  const float delta = a.delta[(b * a.nq + r) * a.q.heads + h];
  float acc[kMaxHeadDim];
  for (int64_t w = 0; w < dk; ++w) acc[w] = 0.0f;
  const int64_t visible = semantics::visible_columns(a.mask, r, a.nq, a.nk).end;
  for (int64_t c = 0; c < visible; ++c) {
    const float* k = a.k.at(b, a.kv_row0 + c, g);
    const float* v = a.v.at(b, a.kv_row0 + c, g);
    float dot = 0.0f;
    for (int64_t w = 0; w < dk; ++w) dot += q[w] * k[w];
    const float p = expf(a.scale * dot - lse);
    float dp = 0.0f;
    for (int64_t w = 0; w < dv; ++w) dp += dout[w] * v[w];
    const float ds = p * (dp - delta);
    for (int64_t w = 0; w < dk; ++w) acc[w] += a.scale * ds * k[w];
  }
  float* dq = a.dq.at(b, r, 0) + h * dk;
  for (int64_t w = 0; w < dk; ++w) dq[w] = semantics::round_to_dtype(acc[w], a.format);
}

/// dK and dV of block KV row c of kv head g, batch b (one GPU thread): summed over the query heads of the group
/// in ascending order and, per head, over the block rows that see c in ascending order (fp32):
/// dV_c += P·dout_r, dK_c += scale·dS·q_r; then rounded to a.format. Requires dk, dv ≤ kMaxHeadDim.
HCPSIM_HOST_DEVICE inline void attn_bwd_dkdv_row(const AttnBwdArgs& a, int64_t b, int64_t c, int64_t g) {
  const int64_t group = a.q.heads / a.k.heads;
  const int64_t dk = a.q.width;
  const int64_t dv = a.v.width;
  const float* k = a.k.at(b, a.kv_row0 + c, g);
  const float* v = a.v.at(b, a.kv_row0 + c, g);
  float acc_k[kMaxHeadDim];
  float acc_v[kMaxHeadDim];
  for (int64_t w = 0; w < dk; ++w) acc_k[w] = 0.0f;
  for (int64_t w = 0; w < dv; ++w) acc_v[w] = 0.0f;
  const int64_t r0 = semantics::visible_rows(a.mask, c, a.nq, a.nk).begin;
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t r = r0; r < a.nq; ++r) {
      const float* q = a.q.at(b, a.q_row0 + r, h);
      const float* dout = a.dout.at(b, a.q_row0 + r, h);
      const float lse = a.lse.at(b, a.q_row0 + r, h)[0];
      const float delta = a.delta[(b * a.nq + r) * a.q.heads + h];
      float dot = 0.0f;
      for (int64_t w = 0; w < dk; ++w) dot += q[w] * k[w];
      const float p = expf(a.scale * dot - lse);
      float dp = 0.0f;
      for (int64_t w = 0; w < dv; ++w) dp += dout[w] * v[w];
      const float ds = p * (dp - delta);
      for (int64_t w = 0; w < dv; ++w) acc_v[w] += p * dout[w];
      for (int64_t w = 0; w < dk; ++w) acc_k[w] += a.scale * ds * q[w];
    }
  }
  float* dkp = a.dk.at(b, c, g);
  float* dvp = a.dv.at(b, c, g);
  for (int64_t w = 0; w < dk; ++w) dkp[w] = semantics::round_to_dtype(acc_k[w], a.format);
  for (int64_t w = 0; w < dv; ++w) dvp[w] = semantics::round_to_dtype(acc_v[w], a.format);
}

}  // namespace hcpsim::gpu
