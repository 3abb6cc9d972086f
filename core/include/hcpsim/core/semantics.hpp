#pragma once
/// The meaning of the attention ops, defined once for every consumer: which (query row, KV column) pairs a block
/// mask lets through, the visible column range of a row that the tilers loop over, the number of pairs a block
/// computes (the cost model's FLOPs), the log-sum-exp merge (and the naive fault variant), the output correction,
/// and rounding to the storage formats. The schedule builders, the simulator's cost model, the CPU oracle's
/// kernels and executor, the GPU plan's host replay and the CUDA kernels all call these functions; none of them
/// restates a rule. Everything here is standard-library only and HCPSIM_HOST_DEVICE (`__host__ __device__` under
/// nvcc): no containers, no exceptions, so device code runs exactly the host's arithmetic.
/// Floating-point rules are templates over the compute type T (float or double): the operations and their order
/// are the same for both; T = float is what TE's fp32 paths and the device kernels compute, T = double the
/// oracle's fp64 runs. Source of the rules: docs/algorithm.md §4.2 (sections and masks), §4.4 (block output, LSE
/// merge, output correction), §5.3 (rounding points), §9.5 (bottom-right causal).

#include <cmath>
#include <cstdint>

#include "hcpsim/core/host_device.hpp"
#include "hcpsim/core/types.hpp"

namespace hcpsim {

/// The mask the kernel applies inside its (Q rows × KV rows) block, rows counted within the block.
/// causal = top-left causal (row r sees KV rows ≤ r); causal_bottom_right = FlashAttention's bottom-right
/// alignment (row r sees KV rows ≤ r + kv_rows − q_rows; used by all_gather, docs/algorithm.md §9.5);
/// none = all pairs. The ring's lower and upper sections are `none` blocks over half the rows or columns
/// (docs/algorithm.md §4.2). Meaning: semantics::block_mask_desc.
enum class BlockMask { none, causal, causal_bottom_right };

namespace semantics {

// ---------------------------------------------------------------------------------------------------------------
// Masks
// ---------------------------------------------------------------------------------------------------------------

/// A half-open index range [begin, end) (rows or columns of a block).
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  /// Number of indices, 0 when end ≤ begin.
  [[nodiscard]] HCPSIM_HOST_DEVICE constexpr int64_t count() const { return end > begin ? end - begin : 0; }
};

/// Kinds of visibility a mask descriptor expresses.
enum class MaskKind : int32_t {
  full = 0,    ///< every (r, c) pair is visible
  causal = 1,  ///< (r, c) visible iff c ≤ r + diagonal
};

/// A block mask as data: the kind and its offsets, resolved for one block of nq rows × nk columns.
/// Every kind keeps a row's visible columns one contiguous range whose begin and end never decrease with the row
/// (and a column's visible rows one range whose begin never decreases with the column); the tilers' shortcuts
/// (tile_columns, tile_full_columns, visible_rows) rely on this and say so.
///
/// Extension point: a mask that the IR gains later is a new MaskKind plus fields here, and the functions below
/// are the only code to teach it; the kernels and the cost model follow through them. A sliding window adds
/// `int64_t window` (row r also needs c > r + diagonal − window, so a row's range gains a begin > 0); a
/// document-causal mask (packed sequences, TE's thd format) adds the segment boundaries as a device-readable
/// `const int64_t* segment_starts` with `int64_t segments` (ascending block-row offsets, no container), and row r
/// sees columns [start of its segment, r + diagonal] of its own segment only. Both stay monotone in the sense
/// above. The tilers iterate from column 0 today because every kind has begin = 0; a kind with begin > 0 must
/// also make them start at the range's begin.
struct MaskDesc {
  MaskKind kind = MaskKind::full;
  int64_t diagonal = 0;  ///< causal: the last visible column of row r is r + diagonal (may lie outside the block)
};

/// The descriptor of an IR block mask for a block of nq query rows and nk KV rows: none → full; causal (top-left)
/// → causal with diagonal 0; causal_bottom_right → causal with diagonal nk − nq (FlashAttention ≥ 2.1's alignment).
HCPSIM_HOST_DEVICE constexpr MaskDesc block_mask_desc(BlockMask mask, int64_t nq, int64_t nk) {
  if (mask == BlockMask::causal) return MaskDesc{MaskKind::causal, 0};
  if (mask == BlockMask::causal_bottom_right) return MaskDesc{MaskKind::causal, nk - nq};
  return MaskDesc{MaskKind::full, 0};
}

/// True when the mask cuts anything out of a block (every kind but full); what the cost model's tables call a
/// causal block.
HCPSIM_HOST_DEVICE constexpr bool is_masked(BlockMask mask) { return mask != BlockMask::none; }

/// Whether block row r sees block column c (both 0-based, inside the block; bounds are the caller's).
HCPSIM_HOST_DEVICE constexpr bool is_visible(const MaskDesc& m, int64_t r, int64_t c) {
  return m.kind == MaskKind::full || c <= r + m.diagonal;
}

/// The columns of a block of nk columns that block row r sees: [0, nk) for full, [0, r + 1 + diagonal) for
/// causal, clamped to [0, nk] (a row above the diagonal's start sees none).
HCPSIM_HOST_DEVICE constexpr IndexRange visible_columns(const MaskDesc& m, int64_t r, int64_t nk) {
  int64_t end = nk;
  if (m.kind == MaskKind::causal) end = r + 1 + m.diagonal;
  if (end < 0) end = 0;
  if (end > nk) end = nk;
  return IndexRange{0, end};
}

/// visible_columns of row r of an IR block mask over an nq × nk block.
HCPSIM_HOST_DEVICE constexpr IndexRange visible_columns(BlockMask mask, int64_t r, int64_t nq, int64_t nk) {
  return visible_columns(block_mask_desc(mask, nq, nk), r, nk);
}

/// The columns any row of the tile [r_first, r_last] (inclusive) sees: the hull of their ranges, exact because
/// ranges never move back with the row (MaskDesc): [begin of r_first, end of r_last).
HCPSIM_HOST_DEVICE constexpr IndexRange tile_columns(const MaskDesc& m, int64_t r_first, int64_t r_last, int64_t nk) {
  return IndexRange{visible_columns(m, r_first, nk).begin, visible_columns(m, r_last, nk).end};
}

/// The columns every row of the tile [r_first, r_last] sees (the intersection of their ranges; empty when
/// end ≤ begin): [begin of r_last, end of r_first), by the same monotonicity.
HCPSIM_HOST_DEVICE constexpr IndexRange tile_full_columns(const MaskDesc& m, int64_t r_first, int64_t r_last,
                                                          int64_t nk) {
  return IndexRange{visible_columns(m, r_last, nk).begin, visible_columns(m, r_first, nk).end};
}

/// The rows of a block of nq rows that see block column c: [0, nq) for full, [c − diagonal, nq) for causal,
/// clamped to [0, nq] (begin = nq: no row sees c). The begin never decreases with c, so the first row seeing a
/// tile's first column is the first row seeing any column of the tile.
HCPSIM_HOST_DEVICE constexpr IndexRange visible_rows(const MaskDesc& m, int64_t c, int64_t nq) {
  int64_t begin = 0;
  if (m.kind == MaskKind::causal) begin = c - m.diagonal;
  if (begin < 0) begin = 0;
  if (begin > nq) begin = nq;
  return IndexRange{begin, nq};
}

/// visible_rows of column c of an IR block mask over an nq × nk block.
HCPSIM_HOST_DEVICE constexpr IndexRange visible_rows(BlockMask mask, int64_t c, int64_t nq, int64_t nk) {
  return visible_rows(block_mask_desc(mask, nq, nk), c, nq);
}

/// Number of (query, key) pairs an nq × nk block computes: Σ_r visible_columns(m, r, nk).count(), in closed form.
/// full: nq·nk. causal with diagonal d: rows [0, −d) see nothing, rows r ∈ [max(0, −d), nk − d) see r + 1 + d
/// columns (an arithmetic series), rows from nk − d on see all nk (both bounds clamped to [0, nq]).
/// Source: FlashAttention-2 §3 (a causal diagonal block of n rows computes n(n+1)/2 pairs).
HCPSIM_HOST_DEVICE constexpr int64_t block_pairs(const MaskDesc& m, int64_t nq, int64_t nk) {
  if (m.kind == MaskKind::full) return nq * nk;
  if (nq <= 0 || nk <= 0) return 0;
  int64_t ramp_begin = -m.diagonal;  // first row that sees a column
  int64_t ramp_end = nk - m.diagonal;  // first row that sees all nk columns
  ramp_begin = ramp_begin < 0 ? 0 : (ramp_begin > nq ? nq : ramp_begin);
  ramp_end = ramp_end < 0 ? 0 : (ramp_end > nq ? nq : ramp_end);
  const int64_t n = ramp_end - ramp_begin;
  const int64_t first = ramp_begin + 1 + m.diagonal;  // columns of the first ramp row
  const int64_t last = ramp_end + m.diagonal;         // columns of the last ramp row
  return n * (first + last) / 2 + (nq - ramp_end) * nk;
}

/// block_pairs of an IR block mask: q_rows·kv_rows for none; q(q+1)/2 for a square causal block.
HCPSIM_HOST_DEVICE constexpr int64_t block_pairs(int64_t q_rows, int64_t kv_rows, BlockMask mask) {
  return block_pairs(block_mask_desc(mask, q_rows, kv_rows), q_rows, kv_rows);
}

// ---------------------------------------------------------------------------------------------------------------
// Floating point
// ---------------------------------------------------------------------------------------------------------------

namespace detail {
// The C library's float and double functions by overload, the same names on host and device. On the host they
// are the functions std:: calls (std::exp(float) is expf); on the device, CUDA's (exact for frexp, ldexp,
// nearbyint, fabs, copysign).
HCPSIM_HOST_DEVICE inline float c_frexp(float x, int* e) { return frexpf(x, e); }
HCPSIM_HOST_DEVICE inline double c_frexp(double x, int* e) { return frexp(x, e); }
HCPSIM_HOST_DEVICE inline float c_ldexp(float x, int e) { return ldexpf(x, e); }
HCPSIM_HOST_DEVICE inline double c_ldexp(double x, int e) { return ldexp(x, e); }
HCPSIM_HOST_DEVICE inline float c_nearbyint(float x) { return nearbyintf(x); }
HCPSIM_HOST_DEVICE inline double c_nearbyint(double x) { return nearbyint(x); }
HCPSIM_HOST_DEVICE inline float c_fabs(float x) { return fabsf(x); }
HCPSIM_HOST_DEVICE inline double c_fabs(double x) { return fabs(x); }
HCPSIM_HOST_DEVICE inline float c_copysign(float x, float s) { return copysignf(x, s); }
HCPSIM_HOST_DEVICE inline double c_copysign(double x, double s) { return copysign(x, s); }
HCPSIM_HOST_DEVICE inline float c_exp(float x) { return expf(x); }
HCPSIM_HOST_DEVICE inline double c_exp(double x) { return exp(x); }
HCPSIM_HOST_DEVICE inline float c_log(float x) { return logf(x); }
HCPSIM_HOST_DEVICE inline double c_log(double x) { return log(x); }
HCPSIM_HOST_DEVICE inline float c_log1p(float x) { return log1pf(x); }
HCPSIM_HOST_DEVICE inline double c_log1p(double x) { return log1p(x); }

/// Rounds x to `bits` significant bits (round to nearest, ties to even: nearbyint in the default rounding mode,
/// which nothing in hcpsim changes) with exponent floor `min_exp` (frexp convention: the smallest normal is
/// 0.5·2^min_exp; below it the spacing stays that of the smallest binade, i.e. subnormals) and overflow to ±inf
/// past `max_finite`. NaN, ±inf and ±0 pass through. Every step is exact in T, so float and double give the same
/// value for a float x.
template <typename T>
HCPSIM_HOST_DEVICE inline T round_significand(T x, int bits, int min_exp, T max_finite) {
  if (!(x == x) || x == static_cast<T>(INFINITY) || x == -static_cast<T>(INFINITY) || x == static_cast<T>(0)) return x;
  int e = 0;
  (void)c_frexp(x, &e);  // x = m·2^e, |m| ∈ [0.5, 1)
  const int eff = e < min_exp ? min_exp : e;
  const T r = c_ldexp(c_nearbyint(c_ldexp(x, bits - eff)), eff - bits);
  if (c_fabs(r) > max_finite) return c_copysign(static_cast<T>(INFINITY), x);
  return r;
}
}  // namespace detail

/// Rounds x to the nearest value of format `dtype` (IEEE round-to-nearest-even) and returns it widened exactly to
/// T. fp64: x unchanged; fp32: (float)x; bf16: 8 significant bits with fp32's exponent range (largest finite
/// (2 − 2⁻⁷)·2¹²⁷, subnormals down to 2⁻¹³³); fp16: 11 significant bits, subnormals down to 2⁻²⁴, values past
/// 65504 that round beyond it → ±inf (65520, the tie between 65504 and 2¹⁶, rounds to even, i.e. up). NaN and
/// ±inf pass through. A double x is rounded once, directly (no detour through float); for a float x this is the
/// float → bf16/fp16 conversion PyTorch and CUDA's __float2bfloat16_rn perform.
/// Source: IEEE 754-2008 §4.3.1; bfloat16 = the top 16 bits of binary32; binary16 layout.
template <typename T>
HCPSIM_HOST_DEVICE inline T round_to_dtype(T x, Dtype dtype) {
  switch (dtype) {
    case Dtype::fp64: return x;
    case Dtype::fp32: return static_cast<T>(static_cast<float>(x));
    case Dtype::bf16: return detail::round_significand(x, 8, -125, static_cast<T>(0x1.fep127));
    case Dtype::fp16: return detail::round_significand(x, 11, -13, static_cast<T>(65504.0));
  }
  return x;
}

/// TE's log-sum-exp merge of two softmax_lse values (natural log): max(a, b) + log1p(exp(min(a, b) − max(a, b))),
/// in T (TE ≥ v2.4 computes it in fp32, commit 21ec6e04b; the oracle's fp64 runs in double).
/// Conventions: merge(−inf, −inf) = −inf (two empty rows stay empty, instead of TE's NaN from −inf − (−inf));
/// merge(x, −inf) = x; any NaN input gives the quiet NaN (so a read of an uninitialised value surfaces).
/// Source: TE context_parallel.py flash_attn_fwd_softmax_lse_correction (docs/algorithm.md §4.4).
template <typename T>
HCPSIM_HOST_DEVICE inline T lse_merge(T a, T b) {
  if (!(a == a) || !(b == b)) return static_cast<T>(NAN);
  const T hi = a < b ? b : a;  // std::max(a, b)
  const T lo = b < a ? b : a;  // std::min(a, b)
  if (hi == -static_cast<T>(INFINITY)) return hi;  // both empty: −inf − (−inf) would be NaN
  return hi + detail::c_log1p(detail::c_exp(lo - hi));
}

/// TE's merge as written, without lse_merge's empty-row guard: max(a, b) + log1p(exp(min(a, b) − max(a, b))), so
/// merge(−inf, −inf) = −inf + log1p(exp(NaN)) = NaN (fault injector unguarded_empty_merge: a padded THD row that
/// sees no key in two steps). Equal to lse_merge for every other input, NaN inputs included.
/// Source: TE context_parallel.py flash_attn_fwd_softmax_lse_correction; flash-attention #978, flashinfer #4051.
template <typename T>
HCPSIM_HOST_DEVICE inline T lse_merge_unguarded(T a, T b) {
  if (!(a == a) || !(b == b)) return static_cast<T>(NAN);
  const T hi = a < b ? b : a;  // std::max(a, b)
  const T lo = b < a ? b : a;  // std::min(a, b)
  return hi + detail::c_log1p(detail::c_exp(lo - hi));
}

/// The pre-#716 merge log(exp(a) + exp(b)) (fault injector naive_lse_merge, always run in fp32): exp overflows to
/// +inf for a, b ≳ 88.7, so adversarial logits (≈ ±110) give inf where lse_merge stays exact.
template <typename T>
HCPSIM_HOST_DEVICE inline T lse_merge_naive(T a, T b) {
  return detail::c_log(detail::c_exp(a) + detail::c_exp(b));
}

/// Whether a step's rows contribute to TE's output correction: a row whose step LSE is −inf saw no key and
/// contributes 0 (init writes 0, accumulate leaves the output), never exp(−inf − lse)·0 arithmetic.
template <typename T>
HCPSIM_HOST_DEVICE inline bool out_correction_contributes(T src_lse) {
  return !(src_lse == -static_cast<T>(INFINITY));
}

/// The weight of a step's output in TE's output correction: exp(src_lse − lse), lse the final merged one.
template <typename T>
HCPSIM_HOST_DEVICE inline T out_correction_weight(T src_lse, T lse) {
  return detail::c_exp(src_lse - lse);
}

/// One element of the output correction given the weight: round(src·w) (init) or round(dst + src·w)
/// (accumulate), rounded to `dtype` (the output buffer's format; fp64 leaves it).
template <typename T>
HCPSIM_HOST_DEVICE inline T out_correction_apply(T dst, T src, T weight, bool accumulate, Dtype dtype) {
  const T term = src * weight;
  return round_to_dtype(accumulate ? dst + term : term, dtype);
}

/// One element of TE's flash_attn_fwd_out_correction(_init): dst (= | +=) src · exp(src_lse − lse), in T and
/// rounded to `dtype`; a src_lse of −inf contributes 0 (init writes 0, accumulate returns dst).
/// Source: TE context_parallel.py flash_attn_fwd_out_correction (docs/algorithm.md §4.4).
template <typename T>
HCPSIM_HOST_DEVICE inline T out_correction(T dst, T src, T src_lse, T lse, bool accumulate, Dtype dtype) {
  if (!out_correction_contributes(src_lse)) return accumulate ? dst : static_cast<T>(0);
  return out_correction_apply(dst, src, out_correction_weight(src_lse, lse), accumulate, dtype);
}

}  // namespace semantics
}  // namespace hcpsim
