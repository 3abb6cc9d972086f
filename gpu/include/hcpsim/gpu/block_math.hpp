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
/// Source of the formulas: docs/algorithm.md §4.4 (forward block, merge, output correction), §5.2 (block backward).

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define HCPSIM_HD __host__ __device__
#else
#define HCPSIM_HD
#endif

namespace hcpsim::gpu {

/// Largest head dimension (dk, dv) the row kernels support: their per-thread accumulators are fixed-size arrays.
/// Source: TE/FlashAttention support head dims up to 256 (FlashAttention-2 README).
constexpr int kMaxHeadDim = 256;

/// Storage/rounding format codes, in hcpsim::Dtype order (types.hpp) so a Dtype converts with static_cast.
enum class RoundFormat : int32_t { fp64 = 0, fp32 = 1, bf16 = 2, fp16 = 3 };

/// Attention mask codes, in hcpsim::BlockMask order (schedule.hpp).
enum class MaskCode : int32_t { none = 0, causal = 1, causal_bottom_right = 2 };

/// The IEEE-754 bit pattern of a float (memcpy: no aliasing or union tricks, valid on host and device).
HCPSIM_HD inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
/// The float with bit pattern `u` (inverse of float_bits).
HCPSIM_HD inline float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// Rounds an fp32 value to `format` (IEEE round-to-nearest-even) and returns it widened exactly to float.
/// fp32/fp64: unchanged; bf16: the top 16 bits of the rounded fp32 pattern (fp32's exponent range, so overflow
/// only past FLT_MAX); fp16: 11 significant bits, subnormals down to 2⁻²⁴, |x| ≥ 65520 → ±inf (65520 is the tie
/// between 65504 and 2¹⁶, which rounds to even, i.e. up). NaN and ±inf pass through.
/// Equals hcpsim::round_to_dtype (oracles/precision.hpp) on every float input (tested on CPU).
/// Source: IEEE 754-2008 §4.3.1; bfloat16 = truncated binary32 layout; binary16 layout.
HCPSIM_HD inline float round_float(float x, RoundFormat format) {
  if (format == RoundFormat::fp32 || format == RoundFormat::fp64) return x;
  if (!(x == x) || x == INFINITY || x == -INFINITY) return x;
  if (format == RoundFormat::bf16) {
    uint32_t u = float_bits(x);
    const uint32_t lsb = (u >> 16) & 1u;
    u += 0x7FFFu + lsb;
    return bits_float(u & 0xFFFF0000u);
  }
  // fp16
  const float ax = x < 0 ? -x : x;
  if (ax >= 65520.0f) return x < 0 ? -INFINITY : INFINITY;
  if (ax == 0.0f) return x;
  int e = 0;
  (void)frexpf(ax, &e);            // ax = f·2^e, f ∈ [0.5, 1): unit in the last place of 11 bits is 2^(e−11)
  int shift = 11 - e;
  if (e - 11 < -24) shift = 24;    // subnormal range: quantum 2⁻²⁴
  const float scaled = ldexpf(x, shift);  // exact: a power-of-two scaling inside float range
  return ldexpf(rintf(scaled), -shift);   // rintf rounds half to even in the default rounding mode
}

/// Number of leading KV rows of a block (of nk) visible to block row r of nq rows: none nk; causal r + 1;
/// causal_bottom_right r + 1 + nk − nq; clamped to [0, nk]. Same as the CPU oracle's rule (block_attention.hpp).
HCPSIM_HD inline int64_t visible_kv_rows(MaskCode mask, int64_t r, int64_t nq, int64_t nk) {
  int64_t v = nk;
  if (mask == MaskCode::causal) v = r + 1;
  if (mask == MaskCode::causal_bottom_right) v = r + 1 + nk - nq;
  if (v < 0) v = 0;
  if (v > nk) v = nk;
  return v;
}

/// First block row (of nq) that sees KV row c: the inverse of visible_kv_rows (nq when no row sees it).
HCPSIM_HD inline int64_t first_row_seeing(MaskCode mask, int64_t c, int64_t nq, int64_t nk) {
  int64_t r = 0;
  if (mask == MaskCode::causal) r = c;
  if (mask == MaskCode::causal_bottom_right) r = c - (nk - nq);
  if (r < 0) r = 0;
  if (r > nq) r = nq;
  return r;
}

/// A device (or host) view of one buffer [b, rows, heads, width] stored as floats, row-major.
struct TensorRef {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t heads = 0;
  int64_t width = 0;
  /// Flat element index of (b, r, h, w): ((b·rows + r)·heads + h)·width + w.
  HCPSIM_HD int64_t index(int64_t b, int64_t r, int64_t h, int64_t w) const {
    return ((b * rows + r) * heads + h) * width + w;
  }
  /// Address of the `width` contiguous elements of (b, r, h).
  HCPSIM_HD float* at(int64_t b, int64_t r, int64_t h) const { return data + index(b, r, h, 0); }
};

/// Arguments of one forward block (AttnFwdBlockOp): q rows [q_row0, q_row0 + nq) of q against KV rows
/// [kv_row0, kv_row0 + nk) of k, v; writes out rows [0, nq) and lse rows [0, nq).
/// Shapes: q [batch, ≥ q_row0+nq, hq, dk]; k [batch, ≥ kv_row0+nk, hkv, dk]; v [batch, ·, hkv, dv];
/// out [batch, ≥ nq, hq, dv]; lse [batch, ≥ nq, hq, 1]. GQA: q head h uses kv head h / (hq / hkv).
struct AttnFwdArgs {
  TensorRef q, k, v, out, lse;
  int64_t batch = 0, q_row0 = 0, nq = 0, kv_row0 = 0, nk = 0;
  MaskCode mask = MaskCode::none;
  float scale = 0;                        ///< softmax_scale
  RoundFormat format = RoundFormat::fp32; ///< out is rounded to this format; lse stays fp32
};

/// Arguments of one backward block (AttnBwdBlockOp) given the global out and lse. Reads q, out, dout, lse at
/// q rows [q_row0, q_row0 + nq) and k, v at [kv_row0, kv_row0 + nk); writes dq rows [0, nq) and dk, dv rows
/// [0, nk). `delta` is scratch [batch, nq, hq] (D_r = Σ dout_r·out_r), filled by attn_bwd_delta_row first.
struct AttnBwdArgs {
  TensorRef q, k, v, out, dout, lse, dq, dk, dv;
  float* delta = nullptr;
  int64_t batch = 0, q_row0 = 0, nq = 0, kv_row0 = 0, nk = 0;
  MaskCode mask = MaskCode::none;
  float scale = 0;
  RoundFormat format = RoundFormat::fp32;  ///< dq, dk, dv are rounded to this format
};

/// Forward of block row r of query head h, batch b (one GPU thread): online softmax over the visible KV rows in
/// ascending order (running max, rescaled sum and accumulator, fp32), then lse = max + log(sum) and
/// out = round(acc / sum). A row with no visible key: lse = −inf and out = 0 (never NaN).
/// Requires dv ≤ kMaxHeadDim. Source: Milakov & Gimelshein 2018 (online softmax); docs/algorithm.md §4.4.
HCPSIM_HD inline void attn_fwd_row(const AttnFwdArgs& a, int64_t b, int64_t r, int64_t h) {
  const int64_t group = a.q.heads / a.k.heads;
  const int64_t g = h / group;
  const int64_t dk = a.q.width;
  const int64_t dv = a.v.width;
  const float* q = a.q.at(b, a.q_row0 + r, h);
  float acc[kMaxHeadDim];
  for (int64_t w = 0; w < dv; ++w) acc[w] = 0.0f;
  float row_max = -INFINITY;
  float row_sum = 0.0f;
  const int64_t visible = visible_kv_rows(a.mask, r, a.nq, a.nk);
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
  for (int64_t w = 0; w < dv; ++w) out[w] = round_float(acc[w] * inv, a.format);
  lse[0] = row_max + logf(row_sum);
}

/// D_r = Σ_w dout[r, w]·out[r, w] (fp32) for block row r of head h, batch b, into a.delta[(b·nq + r)·hq + h].
HCPSIM_HD inline void attn_bwd_delta_row(const AttnBwdArgs& a, int64_t b, int64_t r, int64_t h) {
  const float* o = a.out.at(b, a.q_row0 + r, h);
  const float* d = a.dout.at(b, a.q_row0 + r, h);
  float sum = 0.0f;
  for (int64_t w = 0; w < a.out.width; ++w) sum += d[w] * o[w];
  a.delta[(b * a.nq + r) * a.q.heads + h] = sum;
}

/// dQ of block row r of query head h, batch b (one GPU thread): for every visible KV row c in ascending order,
/// P = exp(s − L_r), dS = P·(dout_r·v_c − D_r), dQ_r += scale·dS·k_c (fp32), then rounded to a.format.
/// Requires dk ≤ kMaxHeadDim and delta filled. Source: docs/algorithm.md §5.2; FlashAttention-2 Algorithm 2.
HCPSIM_HD inline void attn_bwd_dq_row(const AttnBwdArgs& a, int64_t b, int64_t r, int64_t h) {
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
  const int64_t visible = visible_kv_rows(a.mask, r, a.nq, a.nk);
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
  for (int64_t w = 0; w < dk; ++w) dq[w] = round_float(acc[w], a.format);
}

/// dK and dV of block KV row c of kv head g, batch b (one GPU thread): summed over the query heads of the group
/// in ascending order and, per head, over the block rows that see c in ascending order (fp32):
/// dV_c += P·dout_r, dK_c += scale·dS·q_r; then rounded to a.format. Requires dk, dv ≤ kMaxHeadDim.
HCPSIM_HD inline void attn_bwd_dkdv_row(const AttnBwdArgs& a, int64_t b, int64_t c, int64_t g) {
  const int64_t group = a.q.heads / a.k.heads;
  const int64_t dk = a.q.width;
  const int64_t dv = a.v.width;
  const float* k = a.k.at(b, a.kv_row0 + c, g);
  const float* v = a.v.at(b, a.kv_row0 + c, g);
  float acc_k[kMaxHeadDim];
  float acc_v[kMaxHeadDim];
  for (int64_t w = 0; w < dk; ++w) acc_k[w] = 0.0f;
  for (int64_t w = 0; w < dv; ++w) acc_v[w] = 0.0f;
  const int64_t r0 = first_row_seeing(a.mask, c, a.nq, a.nk);
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
  for (int64_t w = 0; w < dk; ++w) dkp[w] = round_float(acc_k[w], a.format);
  for (int64_t w = 0; w < dv; ++w) dvp[w] = round_float(acc_v[w], a.format);
}

/// TE's LSE merge in fp32: max(a, b) + log1p(exp(min − max)); merge(−inf, −inf) = −inf; NaN propagates.
/// Same conventions as hcpsim::lse_merge_fp32 (block_attention.hpp). Source: TE context_parallel.py
/// flash_attn_fwd_softmax_lse_correction (≥ v2.4 in fp32, docs/algorithm.md §4.4).
HCPSIM_HD inline float lse_merge_float(float a, float b) {
  if (!(a == a) || !(b == b)) return a + b;
  const float hi = a > b ? a : b;
  const float lo = a > b ? b : a;
  if (hi == -INFINITY) return -INFINITY;
  return hi + log1pf(expf(lo - hi));
}

/// The pre-#716 merge log(exp(a) + exp(b)) in fp32 (fault injector naive_lse_merge): overflows for a, b ≳ 88.7.
HCPSIM_HD inline float lse_merge_naive_float(float a, float b) { return logf(expf(a) + expf(b)); }

/// One element of TE's output correction: returns round(src·w) (init) or round(dst + src·w) (accumulate) with
/// w = exp(src_lse − lse) in fp32; a src_lse of −inf contributes 0 (init writes 0, accumulate leaves dst).
HCPSIM_HD inline float out_correction_element(float dst, float src, float src_lse, float lse, bool accumulate,
                                              RoundFormat format) {
  if (src_lse == -INFINITY) return accumulate ? dst : 0.0f;
  const float weight = expf(src_lse - lse);
  const float term = src * weight;
  return round_float(accumulate ? dst + term : term, format);
}

}  // namespace hcpsim::gpu
