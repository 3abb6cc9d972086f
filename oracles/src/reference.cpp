#include "hcpsim/oracles/reference.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <atomic>
#include <cmath>
#include <limits>

// Eigen for the dense products only. Its own GEMM threading is disabled for the whole target
// (EIGEN_DONT_PARALLELIZE, oracles/CMakeLists.txt), so a product's result depends on its shape alone.
#include <Eigen/Dense>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/thd_layout.hpp"

// This file must not include block_attention.hpp: the reference shares no code with the executor's kernels.

namespace hcpsim {

namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstBlock = Eigen::Map<const Matrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutableBlock = Eigen::Map<Matrix, Eigen::Unaligned, Eigen::OuterStride<>>;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Score elements held per chunk of query rows (64 MiB of doubles, twice: P and dP/dS), so that a long sequence
/// never holds S² scores; the row count is clamped so that the products keep a useful shape.
constexpr int64_t kScoreBudget = int64_t{1} << 23;
constexpr int64_t kMinChunkRows = 32;
constexpr int64_t kMaxChunkRows = 256;

/// Query rows per chunk: a function of S only, so the products' shapes (and results) never depend on threads.
int64_t chunk_rows(int64_t s) {
  return std::clamp<int64_t>(kScoreBudget / std::max<int64_t>(s, 1), kMinChunkRows, kMaxChunkRows);
}

/// Rows [row0, row0 + rows) of head h of batch b as a [rows, width] matrix (row stride heads·width).
ConstBlock head_block(const HostTensor& t, int64_t b, int64_t h, int64_t row0, int64_t rows) {
  return ConstBlock(t.data() + t.index(b, row0, h, 0), rows, t.width(), Eigen::OuterStride<>(t.heads() * t.width()));
}
MutableBlock head_block(HostTensor& t, int64_t b, int64_t h, int64_t row0, int64_t rows) {
  return MutableBlock(t.data() + t.index(b, row0, h, 0), rows, t.width(),
                      Eigen::OuterStride<>(t.heads() * t.width()));
}

/// The chunk columns [lo, hi) ⊆ [0, w) that row keys `keys` sees when the chunk's column 0 is key c0: the mask rule
/// (key j visible iff keys.begin ≤ j < keys.end) as one contiguous range, so that the loops below run over it
/// without a test per element (each visible element still sees the same operations, in the same order).
struct ColumnRange {
  int64_t lo;
  int64_t hi;
};
ColumnRange chunk_columns(const KeyRange& keys, int64_t c0, int64_t w) {
  const int64_t lo = std::clamp<int64_t>(keys.begin - c0, 0, w);
  return ColumnRange{lo, std::clamp<int64_t>(keys.end - c0, lo, w)};
}

void check_inputs(const AttentionInputs& in, const std::vector<KeyRange>& keys, int threads) {
  const HostTensor& q = in.q;
  const int64_t s = q.rows();
  HCPSIM_ASSERT(threads >= 1, "reference_attention: threads must be >= 1");
  HCPSIM_ASSERT(in.k.batch() == q.batch() && in.v.batch() == q.batch(), "reference_attention: k/v batch != q batch");
  HCPSIM_ASSERT(in.k.rows() == s && in.v.rows() == s, "reference_attention: k/v sequence length != q sequence length");
  HCPSIM_ASSERT(in.k.heads() == in.v.heads(), "reference_attention: k heads != v heads");
  HCPSIM_ASSERT(in.k.heads() > 0 && q.heads() % in.k.heads() == 0,
                "reference_attention: q heads not a positive multiple of kv heads");
  HCPSIM_ASSERT(in.k.width() == q.width(), "reference_attention: k width (dk) != q width");
  HCPSIM_ASSERT(in.dout.batch() == q.batch(), "reference_attention: dout batch != q batch");
  HCPSIM_ASSERT(in.dout.rows() == s, "reference_attention: dout rows != S");
  HCPSIM_ASSERT(in.dout.heads() == q.heads(), "reference_attention: dout heads != q heads");
  HCPSIM_ASSERT(in.dout.width() == in.v.width(), "reference_attention: dout width != dv");
  HCPSIM_ASSERT(static_cast<int64_t>(keys.size()) == s, "reference_attention: need one key range per query row");
  for (const KeyRange& r : keys) {
    HCPSIM_ASSERT(r.begin >= r.end || (r.begin >= 0 && r.end <= s), "reference_attention: key range outside [0, S)");
  }
}

/// Where one (batch, query head) work item writes its dK and dV: head `head` of `dk`, `dv` (the kv head itself for
/// MHA, the query head's own partial under GQA).
struct GradTargets {
  HostTensor* dk;
  HostTensor* dv;
  int64_t head;
  int64_t batch = -1;  ///< batch index in dk/dv; −1: the item's own batch (a per-item partial holds batch 0 only)
};

/// Lanes of the row kernels below: every row reduction runs as this many interleaved partial results, element j of
/// a run going to partial (j − first) mod kSumLanes, combined pairwise at the end. The grouping depends on the
/// run's length only (never on an address or a thread count), and the loops vectorise without reassociation.
constexpr int64_t kSumLanes = 8;

/// op(…op(init, term(lo)), …, term(hi − 1)) over j in [lo, hi), in the fixed grouping of kSumLanes partials.
template <typename Term, typename Op>
double lane_reduce(int64_t lo, int64_t hi, double init, Term term, Op op) {
  std::array<double, kSumLanes> part;
  part.fill(init);
  int64_t j = lo;
  for (; j + kSumLanes <= hi; j += kSumLanes)
    for (int64_t k = 0; k < kSumLanes; ++k) part[static_cast<size_t>(k)] = op(part[static_cast<size_t>(k)], term(j + k));
  for (size_t k = 0; j < hi; ++j, ++k) part[k] = op(part[k], term(j));
  return op(op(op(part[0], part[1]), op(part[2], part[3])), op(op(part[4], part[5]), op(part[6], part[7])));
}

/// Σ x[j]·y[j] over j in [lo, hi) (y == nullptr: Σ x[j]), in lane_reduce's grouping.
double lane_sum(const double* x, const double* y, int64_t lo, int64_t hi) {
  const auto plus = [](double a, double b) { return a + b; };
  if (y == nullptr) return lane_reduce(lo, hi, 0.0, [x](int64_t j) { return x[j]; }, plus);
  return lane_reduce(lo, hi, 0.0, [x, y](int64_t j) { return x[j] * y[j]; }, plus);
}

/// max(−inf, x[lo], …, x[hi − 1]) with a NaN element skipped (std::max keeps its first argument against NaN), in
/// lanes: the same value as one ascending pass (max is exact), in vectorisable loops.
double lane_max(const double* x, int64_t lo, int64_t hi) {
  return lane_reduce(lo, hi, kNegInf, [x](int64_t j) { return x[j]; }, [](double a, double b) { return std::max(a, b); });
}

/// Below this argument exp's result is subnormal or 0; Eigen's packet exp clamps its argument at −709.78 and returns
/// ~5.56e-309 for anything below (−inf included), where the C library's goes on to 0. Such elements (and NaN) take
/// std::exp. Source: ln(DBL_MIN) = −708.396…; IEEE 754 binary64.
constexpr double kVectorExpFloor = -708.0;

/// x[j] = exp(x[j] − shift) for j in [0, n): Eigen's vectorised exp (its packet exp, within 2 ulp of the C library's)
/// on every element, the last partial packet padded, so an element's result depends on its value alone; an
/// argument below kVectorExpFloor or NaN takes std::exp (in a row holding one, every packet is padded and checked).
void exp_shifted(double* x, int64_t n, double shift) {
  namespace ei = Eigen::internal;
  using Packet = ei::packet_traits<double>::type;
  constexpr auto lanes = static_cast<int64_t>(sizeof(Packet) / sizeof(double));
  const Packet s = ei::pset1<Packet>(shift);
  const Packet floor = ei::pset1<Packet>(kVectorExpFloor);
  Packet outside = ei::pzero(s);  // lanes that saw an argument below the floor, or NaN
  int64_t j = 0;
  for (; j + lanes <= n; j += lanes)
    outside = ei::por(outside, ei::pcmp_lt_or_nan(ei::psub(ei::ploadu<Packet>(x + j), s), floor));
  std::array<double, lanes> pad{};
  std::array<double, lanes> out{};
  ei::pstoreu(out.data(), outside);
  j = 0;
  if (std::all_of(out.begin(), out.end(), [](double lane) { return std::bit_cast<uint64_t>(lane) == 0; })) {
    for (; j + lanes <= n; j += lanes) ei::pstoreu(x + j, ei::pexp(ei::psub(ei::ploadu<Packet>(x + j), s)));
  }
  for (; j < n; j += lanes) {  // the tail, or every packet of a row with an argument outside
    const int64_t m = std::min(lanes, n - j);
    for (int64_t k = 0; k < lanes; ++k) pad[static_cast<size_t>(k)] = k < m ? x[j + k] - shift : 0.0;
    ei::pstoreu(out.data(), ei::pexp(ei::ploadu<Packet>(pad.data())));
    for (int64_t k = 0; k < m; ++k) {
      const double a = pad[static_cast<size_t>(k)];
      x[j + k] = a >= kVectorExpFloor ? out[static_cast<size_t>(k)] : std::exp(a);
    }
  }
}

/// Turns the raw products q·kᵀ of chunk rows [r0, r0 + n) over keys [c0, c0 + p.cols()) into probabilities in
/// place (P_ij = exp(S_ij − m_i)/l_i with S_ij = scale·(q_i·k_j), 0 for a masked key) and writes softmax_lse.
/// l_i is summed in the fixed lane grouping (lane_sum); exp is exp_shifted's.
void softmax_rows(Matrix& p, const std::vector<KeyRange>& keys, int64_t r0, int64_t c0, double scale, HostTensor& lse,
                  int64_t b, int64_t h) {
  const int64_t w = p.cols();
  for (int64_t i = 0; i < p.rows(); ++i) {
    const KeyRange& kr = keys[static_cast<size_t>(r0 + i)];
    const ColumnRange vis = chunk_columns(kr, c0, w);
    double* row = p.data() + i * w;  // row-major: the row's w elements are contiguous
    for (int64_t j = vis.lo; j < vis.hi; ++j) row[j] *= scale;
    const double m = lane_max(row, vis.lo, vis.hi);  // a NaN score leaves m alone and reaches l through exp(NaN − m)
    for (int64_t j = 0; j < vis.lo; ++j) row[j] = 0;
    exp_shifted(row + vis.lo, vis.hi - vis.lo, m);
    const double l = lane_sum(row, nullptr, vis.lo, vis.hi);
    for (int64_t j = vis.hi; j < w; ++j) row[j] = 0;
    if (kr.begin >= kr.end) {  // no visible key: P = 0 (so out = 0, dS = 0), lse = −inf
      lse(b, r0 + i, h, 0) = kNegInf;
      continue;
    }
    for (int64_t j = 0; j < w; ++j) row[j] /= l;
    lse(b, r0 + i, h, 0) = m + std::log(l);
  }
}

/// Forward and backward of one (batch b, query head h, kv head g), a chunk of query rows at a time over the keys
/// that chunk sees; every sum runs in a fixed order (Eigen's products by shape, the row sums by lane_sum).
void reference_head(const AttentionInputs& in, const std::vector<KeyRange>& keys, double scale, int64_t b, int64_t h,
                    int64_t g, AttentionOutputs& r, const GradTargets& grads) {
  const int64_t s = in.q.rows();
  const int64_t rows_per_chunk = chunk_rows(s);
  Matrix p;   // [n, w] scores, then P
  Matrix ds;  // [n, w] dP, then dS
  for (int64_t r0 = 0; r0 < s; r0 += rows_per_chunk) {
    const int64_t n = std::min(rows_per_chunk, s - r0);
    int64_t c0 = s, c1 = 0;  // keys [c0, c1) seen by some row of the chunk
    for (int64_t i = r0; i < r0 + n; ++i) {
      const KeyRange& kr = keys[static_cast<size_t>(i)];
      if (kr.begin >= kr.end) continue;
      c0 = std::min(c0, kr.begin);
      c1 = std::max(c1, kr.end);
    }
    MutableBlock out_c = head_block(r.out, b, h, r0, n);
    MutableBlock dq_c = head_block(r.dq, b, h, r0, n);
    if (c1 <= c0) {  // no row of the chunk sees a key
      out_c.setZero();
      dq_c.setZero();
      for (int64_t i = r0; i < r0 + n; ++i) r.softmax_lse(b, i, h, 0) = kNegInf;
      continue;
    }
    const int64_t w = c1 - c0;
    const ConstBlock q_c = head_block(in.q, b, h, r0, n);
    const ConstBlock do_c = head_block(in.dout, b, h, r0, n);
    const ConstBlock k_c = head_block(in.k, b, g, c0, w);
    const ConstBlock v_c = head_block(in.v, b, g, c0, w);
    p.resize(n, w);
    p.noalias() = q_c * k_c.transpose();
    softmax_rows(p, keys, r0, c0, scale, r.softmax_lse, b, h);
    out_c.noalias() = p * v_c;
    ds.resize(n, w);
    ds.noalias() = do_c * v_c.transpose();  // dP = dO·Vᵀ
    for (int64_t i = 0; i < n; ++i) {
      const ColumnRange vis = chunk_columns(keys[static_cast<size_t>(r0 + i)], c0, w);
      const double* p_row = p.data() + i * w;
      double* ds_row = ds.data() + i * w;
      const double d = lane_sum(p_row, ds_row, vis.lo, vis.hi);  // D_i = Σ_j P_ij·dP_ij
      for (int64_t j = 0; j < vis.lo; ++j) ds_row[j] = 0.0;
      for (int64_t j = vis.lo; j < vis.hi; ++j) ds_row[j] = p_row[j] * (ds_row[j] - d);
      for (int64_t j = vis.hi; j < w; ++j) ds_row[j] = 0.0;
    }
    dq_c.noalias() = scale * (ds * k_c);
    const int64_t gb = grads.batch < 0 ? b : grads.batch;
    head_block(*grads.dk, gb, grads.head, c0, w).noalias() += scale * (ds.transpose() * q_c);
    head_block(*grads.dv, gb, grads.head, c0, w).noalias() += p.transpose() * do_c;
  }
}

/// dst(b, j, g, :) = Σ over the query heads h of kv head g, ascending, of part(b, j, h, :) (GQA group sums).
void sum_group_heads(const HostTensor& part, HostTensor& dst, int threads) {
  const int64_t hq = part.heads();
  const int64_t hkv = dst.heads();
  const int64_t group = hq / hkv;
  const int64_t rows = dst.batch() * dst.rows();
  const int64_t width = dst.width();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t br = 0; br < rows; ++br) {
    const int64_t b = br / dst.rows();
    const int64_t j = br % dst.rows();
    for (int64_t g = 0; g < hkv; ++g) {
      for (int64_t w = 0; w < width; ++w) {
        double sum = part(b, j, g * group, w);
        for (int64_t h = g * group + 1; h < (g + 1) * group; ++h) sum += part(b, j, h, w);
        dst(b, j, g, w) = sum;
      }
    }
  }
}

}  // namespace

AttentionOutputs zero_outputs_like(const AttentionInputs& in) {
  const HostTensor& q = in.q;
  AttentionOutputs r;
  r.out = HostTensor(q.batch(), q.rows(), q.heads(), in.v.width());
  r.softmax_lse = HostTensor(q.batch(), q.rows(), q.heads(), 1);
  r.dq = HostTensor(q.batch(), q.rows(), q.heads(), q.width());
  r.dk = HostTensor(in.k.batch(), in.k.rows(), in.k.heads(), in.k.width());
  r.dv = HostTensor(in.v.batch(), in.v.rows(), in.v.heads(), in.v.width());
  return r;
}

double effective_softmax_scale(const AttentionShape& shape) {
  if (shape.softmax_scale > 0) return shape.softmax_scale;
  HCPSIM_ASSERT(shape.head_dim_qk > 0, "effective_softmax_scale: head_dim_qk must be positive");
  return 1.0 / std::sqrt(static_cast<double>(shape.head_dim_qk));
}

std::vector<KeyRange> reference_key_ranges(int64_t s, bool causal, int64_t window_left, int64_t window_right) {
  HCPSIM_ASSERT(s >= 0, "reference_key_ranges: negative sequence length");
  HCPSIM_ASSERT(window_left >= -1 && window_right >= -1, "reference_key_ranges: window sides must be >= -1");
  std::vector<KeyRange> keys(static_cast<size_t>(s));
  for (int64_t i = 0; i < s; ++i) {
    int64_t first = 0;  // smallest visible j
    int64_t last = s - 1;  // largest visible j
    if (window_left >= 0) first = std::max<int64_t>(first, i - window_left);
    if (window_right >= 0) last = std::min<int64_t>(last, i + window_right);
    if (causal) last = std::min<int64_t>(last, i);
    keys[static_cast<size_t>(i)] = KeyRange{first, last + 1};
  }
  return keys;
}

std::vector<KeyRange> reference_document_key_ranges(const std::vector<TokenRun>& runs, bool causal) {
  // Each segment's key range: the hull of its rows, which must be exactly its rows (checked below).
  std::vector<KeyRange> seg;
  int64_t row = 0;
  for (const TokenRun& r : runs) {
    HCPSIM_ASSERT(r.rows >= 0 && r.position == row, "reference_document_key_ranges: runs not in natural order");
    if (r.segment >= 0 && r.rows > 0) {
      if (static_cast<int64_t>(seg.size()) <= r.segment) seg.resize(static_cast<size_t>(r.segment) + 1, KeyRange{0, 0});
      KeyRange& k = seg[static_cast<size_t>(r.segment)];
      HCPSIM_ASSERT(k.begin >= k.end || k.end == row, "reference_document_key_ranges: a segment is not contiguous");
      if (k.begin >= k.end) k.begin = row;
      k.end = row + r.rows;
    }
    row += r.rows;
  }
  std::vector<KeyRange> keys(static_cast<size_t>(row), KeyRange{0, 0});
  row = 0;
  for (const TokenRun& r : runs) {
    for (int64_t i = row; i < row + r.rows && r.segment >= 0; ++i) {
      const KeyRange& k = seg[static_cast<size_t>(r.segment)];
      keys[static_cast<size_t>(i)] = KeyRange{k.begin, causal ? i + 1 : k.end};
    }
    row += r.rows;
  }
  return keys;
}

AttentionOutputs reference_attention(const AttentionInputs& in, const std::vector<KeyRange>& keys,
                                     double softmax_scale, int threads, const HeadProgress& progress) {
  check_inputs(in, keys, threads);
  const HostTensor& q = in.q;
  const int64_t b = q.batch();
  const int64_t s = q.rows();
  const int64_t hq = q.heads();
  const int64_t hkv = in.k.heads();
  const int64_t group = hq / hkv;
  AttentionOutputs r = zero_outputs_like(in);
  std::atomic<size_t> heads_done{0};  // for `progress` only
  if (group > 1 && b * hkv >= threads) {
    // GQA with a (batch, kv head) item per thread or more: each item runs its query heads in order, each into one
    // reused partial [s, d], added to dK/dV in head order: the sums of sum_group_heads below, element for element
    // (the first head's partial, then += each next one), without a partial per query head (2·b·s·hq·d values).
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t item = 0; item < b * hkv; ++item) {
      const int64_t bb = item / hkv;
      const int64_t g = item % hkv;
      HostTensor dk_head(1, s, 1, in.k.width()), dv_head(1, s, 1, in.v.width());
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        dk_head.fill(0.0);
        dv_head.fill(0.0);
        reference_head(in, keys, softmax_scale, bb, h, g, r, GradTargets{&dk_head, &dv_head, 0, 0});
        const bool first = h == g * group;
        for (int64_t j = 0; j < s; ++j)
          for (int64_t x = 0; x < in.k.width(); ++x)
            r.dk(bb, j, g, x) = first ? dk_head(0, j, 0, x) : r.dk(bb, j, g, x) + dk_head(0, j, 0, x);
        for (int64_t j = 0; j < s; ++j)
          for (int64_t x = 0; x < in.v.width(); ++x)
            r.dv(bb, j, g, x) = first ? dv_head(0, j, 0, x) : r.dv(bb, j, g, x) + dv_head(0, j, 0, x);
        if (progress) progress(++heads_done, static_cast<size_t>(b * hq));
      }
    }
    return r;
  }
  // Under GQA every query head accumulates into its own partial, summed over the group afterwards in head order:
  // no sum's order depends on which thread ran which head.
  HostTensor dk_part, dv_part;
  if (group > 1) {
    dk_part = HostTensor(b, s, hq, in.k.width());
    dv_part = HostTensor(b, s, hq, in.v.width());
  }
  const int64_t items = b * hq;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t bb = item / hq;
    const int64_t h = item % hq;
    const GradTargets grads = group > 1 ? GradTargets{&dk_part, &dv_part, h} : GradTargets{&r.dk, &r.dv, h};
    reference_head(in, keys, softmax_scale, bb, h, h / group, r, grads);
    if (progress) progress(++heads_done, static_cast<size_t>(items));
  }
  if (group > 1) {
    sum_group_heads(dk_part, r.dk, threads);
    sum_group_heads(dv_part, r.dv, threads);
  }
  return r;
}

AttentionOutputs reference_attention(const AttentionInputs& in, bool causal, double softmax_scale, int threads,
                                     Dtype dtype, const HeadProgress& progress) {
  if (dtype != Dtype::fp64) return non_cp_baseline_attention(in, causal, softmax_scale, threads, dtype);
  return reference_attention(in, reference_key_ranges(in.q.rows(), causal), softmax_scale, threads, progress);
}

AttentionOutputs reference_attention(const AttentionInputs& in, const AttentionShape& shape, double softmax_scale,
                                     int threads, Dtype dtype, const HeadProgress& progress) {
  if (!shape.packing.thd()) return reference_attention(in, shape.causal, softmax_scale, threads, dtype, progress);
  const std::vector<TokenRun> runs = ThdLayout(1, 1, shape.packing, ThdLayout::ValidRule::padded).global_runs();
  if (dtype != Dtype::fp64)
    return non_cp_baseline_attention(in, shape.causal, softmax_scale, threads, dtype, DocumentMask{runs, runs});
  return reference_attention(in, reference_document_key_ranges(runs, shape.causal), softmax_scale, threads, progress);
}

}  // namespace hcpsim
