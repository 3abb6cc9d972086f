#include "hcpsim/oracles/block_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

// Eigen only in this translation unit. Eigen's own GEMM threading is disabled for the whole target
// (EIGEN_DONT_PARALLELIZE in oracles/CMakeLists.txt): its blocking sizes depend on the thread count, which would
// make results depend on it. Parallelism comes from the (batch, head) loops below only.
#include <Eigen/Dense>

#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/precision.hpp"

namespace hcpsim {

namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRows = Eigen::Map<const RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutableRows = Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

/// Query rows per tile: bounds the score matrix to kTileRows × kv rows per (batch, head) (the reference runs with
/// kv rows = S). Tiling changes no result across thread counts: the tile loop is sequential inside one work item.
constexpr int64_t kTileRows = 128;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

/// Rows [row0, row0 + count) of head h of batch b as a [count, width] matrix (row stride heads·width).
ConstRows head_rows(const HostTensor& t, int64_t b, int64_t row0, int64_t count, int64_t h) {
  return ConstRows(t.data() + t.index(b, row0, h, 0), count, t.width(), Eigen::OuterStride<>(t.heads() * t.width()));
}
MutableRows head_rows(HostTensor& t, int64_t b, int64_t row0, int64_t count, int64_t h) {
  return MutableRows(t.data() + t.index(b, row0, h, 0), count, t.width(), Eigen::OuterStride<>(t.heads() * t.width()));
}

/// Number of leading KV rows of the block (of nk) visible to block row r (0-based) of nq rows:
/// none all nk; causal (top-left) r + 1; causal_bottom_right r + 1 + nk − nq; clamped to [0, nk].
int64_t visible_columns(BlockMask mask, int64_t r, int64_t nq, int64_t nk) {
  switch (mask) {
    case BlockMask::none: return nk;
    case BlockMask::causal: return std::clamp<int64_t>(r + 1, 0, nk);
    case BlockMask::causal_bottom_right: return std::clamp<int64_t>(r + 1 + nk - nq, 0, nk);
  }
  return nk;
}

void check_range(const HostTensor& t, RowRange range, const char* what) {
  HCPSIM_ASSERT(range.begin >= 0, std::string("attention block: negative row begin of ") + what);
  HCPSIM_ASSERT(range.count >= 0, std::string("attention block: negative row count of ") + what);
  HCPSIM_ASSERT(range.end() <= t.rows(), std::string("attention block: row range outside ") + what);
}

void check_common(const HostTensor& q, RowRange q_rows, const HostTensor& k, const HostTensor& v, RowRange kv_rows,
                  int threads) {
  HCPSIM_ASSERT(threads >= 1, "attention block: threads must be >= 1");
  HCPSIM_ASSERT(k.batch() == q.batch(), "attention block: k batch != q batch");
  HCPSIM_ASSERT(v.batch() == q.batch(), "attention block: v batch != q batch");
  HCPSIM_ASSERT(k.heads() == v.heads(), "attention block: k heads != v heads");
  HCPSIM_ASSERT(k.heads() > 0, "attention block: no kv heads");
  HCPSIM_ASSERT(q.heads() % k.heads() == 0, "attention block: q heads not a multiple of kv heads");
  HCPSIM_ASSERT(k.width() == q.width(), "attention block: k width (dk) != q width");
  HCPSIM_ASSERT(k.rows() == v.rows(), "attention block: k rows != v rows");
  check_range(q, q_rows, "q");
  check_range(k, kv_rows, "k/v");
}

void check_output(const HostTensor& t, int64_t batch, int64_t rows, int64_t heads, int64_t width, const char* what) {
  HCPSIM_ASSERT(t.batch() == batch, std::string("attention block: wrong batch of ") + what);
  HCPSIM_ASSERT(t.rows() >= rows, std::string("attention block: too few rows in ") + what);
  HCPSIM_ASSERT(t.heads() == heads, std::string("attention block: wrong heads of ") + what);
  HCPSIM_ASSERT(t.width() == width, std::string("attention block: wrong width of ") + what);
}


/// The kernels in compute type T (double for fp64; float for fp32, bf16 and fp16, like TE's kernels, which keep
/// scores, softmax statistics and the in-kernel dK/dV sums in fp32 whatever the input format). Inputs are widened
/// (exactly) to T; outputs are rounded to `dtype` (out, dq, dk, dv) or fp32 (lse) on the way out.
template <typename T>
void forward_impl(const HostTensor& q, RowRange q_rows, const HostTensor& k, const HostTensor& v, RowRange kv_rows,
                  BlockMask mask, double softmax_scale, HostTensor& out, HostTensor& lse, int threads, Dtype dtype) {
  const int64_t batch = q.batch();
  const int64_t hq = q.heads();
  const int64_t group = hq / k.heads();
  const int64_t nq = q_rows.count;
  const int64_t nk = kv_rows.count;
  const int64_t items = batch * hq;
  const T scale = static_cast<T>(softmax_scale);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const Dtype lse_dtype = dtype == Dtype::fp64 ? Dtype::fp64 : Dtype::fp32;

#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t b = item / hq;
    const int64_t h = item % hq;
    const int64_t g = h / group;
    const Mat<T> k_all = head_rows(k, b, kv_rows.begin, nk, g).template cast<T>();  // [nk, dk]
    const Mat<T> v_all = head_rows(v, b, kv_rows.begin, nk, g).template cast<T>();  // [nk, dv]
    for (int64_t t0 = 0; t0 < nq; t0 += kTileRows) {
      const int64_t tr = std::min(kTileRows, nq - t0);
      // Masks are monotone in the row: no row of this tile sees a column ≥ the last row's visible count.
      const int64_t nc = visible_columns(mask, t0 + tr - 1, nq, nk);
      MutableRows out_tile = head_rows(out, b, t0, tr, h);  // [tr, dv]
      if (nc == 0) {
        out_tile.setZero();
        for (int64_t r = 0; r < tr; ++r) lse(b, t0 + r, h, 0) = kNegInf;
        continue;
      }
      const Mat<T> q_tile = head_rows(q, b, q_rows.begin + t0, tr, h).template cast<T>();  // [tr, dk]
      Mat<T> scores = (q_tile * k_all.topRows(nc).transpose()) * scale;                     // [tr, nc]
      Vec<T> row_max(tr);
      for (int64_t r = 0; r < tr; ++r) {
        const int64_t vis = std::min(nc, visible_columns(mask, t0 + r, nq, nk));
        T m = neg_inf;  // a NaN score is skipped here but still reaches the sum through exp(NaN − m)
        for (int64_t c = 0; c < vis; ++c) m = std::max(m, scores(r, c));
        row_max(r) = m;
      }
      Mat<T> probs = (scores.colwise() - row_max).array().exp().matrix();  // [tr, nc]
      Vec<T> row_sum(tr);
      for (int64_t r = 0; r < tr; ++r) {
        const int64_t vis = std::min(nc, visible_columns(mask, t0 + r, nq, nk));
        for (int64_t c = vis; c < nc; ++c) probs(r, c) = T(0);  // masked (exact zero, whatever exp gave)
        if (vis == 0) {
          row_sum(r) = T(0);
          lse(b, t0 + r, h, 0) = kNegInf;
          continue;
        }
        T sum = T(0);
        for (int64_t c = 0; c < vis; ++c) sum += probs(r, c);
        row_sum(r) = sum;
        lse(b, t0 + r, h, 0) = round_to_dtype(static_cast<double>(row_max(r) + std::log(sum)), lse_dtype);
        for (int64_t c = 0; c < vis; ++c) probs(r, c) /= sum;
      }
      const Mat<T> o = probs * v_all.topRows(nc);  // [tr, dv]
      for (int64_t r = 0; r < tr; ++r) {
        for (int64_t w = 0; w < o.cols(); ++w) {
          out_tile(r, w) = row_sum(r) == T(0) ? 0.0 : round_to_dtype(static_cast<double>(o(r, w)), dtype);
        }
      }
    }
  }
}

template <typename T>
void backward_impl(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& out,
                   const HostTensor& dout, const HostTensor& lse, RowRange q_rows, RowRange kv_rows, BlockMask mask,
                   double softmax_scale, HostTensor& dq, HostTensor& dk, HostTensor& dv, int threads, Dtype dtype) {
  const int64_t hq = q.heads();
  const int64_t hkv = k.heads();
  const int64_t group = hq / hkv;
  const int64_t nq = q_rows.count;
  const int64_t nk = kv_rows.count;
  const int64_t dim_qk = q.width();
  const int64_t dim_v = v.width();
  const int64_t items = q.batch() * hkv;
  const T scale = static_cast<T>(softmax_scale);
  auto store = [dtype](MutableRows dst, const Mat<T>& src) {
    for (int64_t r = 0; r < src.rows(); ++r) {
      for (int64_t w = 0; w < src.cols(); ++w) dst(r, w) = round_to_dtype(static_cast<double>(src(r, w)), dtype);
    }
  };

#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t b = item / hkv;
    const int64_t g = item % hkv;
    const Mat<T> k_all = head_rows(k, b, kv_rows.begin, nk, g).template cast<T>();  // [nk, dk]
    const Mat<T> v_all = head_rows(v, b, kv_rows.begin, nk, g).template cast<T>();  // [nk, dv]
    Mat<T> dk_sum = Mat<T>::Zero(nk, dim_qk);  // [nk, dk], summed over the query group
    Mat<T> dv_sum = Mat<T>::Zero(nk, dim_v);   // [nk, dv]
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {  // fixed order: byte-identical for any thread count
      for (int64_t t0 = 0; t0 < nq; t0 += kTileRows) {
        const int64_t tr = std::min(kTileRows, nq - t0);
        const int64_t nc = visible_columns(mask, t0 + tr - 1, nq, nk);
        const int64_t row0 = q_rows.begin + t0;
        MutableRows dq_tile = head_rows(dq, b, t0, tr, h);  // [tr, dk]
        if (nc == 0) {
          dq_tile.setZero();
          continue;
        }
        const Mat<T> q_tile = head_rows(q, b, row0, tr, h).template cast<T>();        // [tr, dk]
        const Mat<T> out_tile = head_rows(out, b, row0, tr, h).template cast<T>();    // [tr, dv]
        const Mat<T> dout_tile = head_rows(dout, b, row0, tr, h).template cast<T>();  // [tr, dv]
        const auto k_vis = k_all.topRows(nc);
        const auto v_vis = v_all.topRows(nc);
        Vec<T> row_lse(tr);
        Vec<T> row_delta(tr);  // D_r = Σ_d dout·out
        for (int64_t r = 0; r < tr; ++r) {
          row_lse(r) = static_cast<T>(lse(b, row0 + r, h, 0));
          T d = T(0);
          for (int64_t w = 0; w < dim_v; ++w) d += dout_tile(r, w) * out_tile(r, w);
          row_delta(r) = d;
        }
        Mat<T> probs = (((q_tile * k_vis.transpose()) * scale).colwise() - row_lse).array().exp().matrix();
        for (int64_t r = 0; r < tr; ++r) {
          for (int64_t c = std::min(nc, visible_columns(mask, t0 + r, nq, nk)); c < nc; ++c) probs(r, c) = T(0);
        }
        dv_sum.topRows(nc).noalias() += probs.transpose() * dout_tile;
        Mat<T> dscores = dout_tile * v_vis.transpose();  // dP [tr, nc]
        dscores = (probs.array() * (dscores.colwise() - row_delta).array()).matrix();  // dS = P∘(dP − D)
        const Mat<T> dq_val = (dscores * k_vis) * scale;
        store(dq_tile, dq_val);
        dk_sum.topRows(nc).noalias() += (dscores.transpose() * q_tile) * scale;
      }
    }
    store(head_rows(dk, b, 0, nk, g), dk_sum);
    store(head_rows(dv, b, 0, nk, g), dv_sum);
  }
}

}  // namespace

double lse_merge(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  const double hi = std::max(a, b);
  const double lo = std::min(a, b);
  if (hi == kNegInf) return kNegInf;  // both empty: −inf − (−inf) would be NaN
  return hi + std::log1p(std::exp(lo - hi));
}

float lse_merge_fp32(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  const float hi = std::max(a, b);
  const float lo = std::min(a, b);
  if (hi == -std::numeric_limits<float>::infinity()) return hi;
  return hi + std::log1p(std::exp(lo - hi));
}

float lse_merge_naive_fp32(float a, float b) { return std::log(std::exp(a) + std::exp(b)); }

void attention_block_forward(const HostTensor& q, RowRange q_rows, const HostTensor& k, const HostTensor& v,
                             RowRange kv_rows, BlockMask mask, double softmax_scale, HostTensor& out, HostTensor& lse,
                             int threads, Dtype dtype) {
  check_common(q, q_rows, k, v, kv_rows, threads);
  check_output(out, q.batch(), q_rows.count, q.heads(), v.width(), "out");
  check_output(lse, q.batch(), q_rows.count, q.heads(), 1, "lse");
  if (dtype == Dtype::fp64) {
    forward_impl<double>(q, q_rows, k, v, kv_rows, mask, softmax_scale, out, lse, threads, dtype);
  } else {
    forward_impl<float>(q, q_rows, k, v, kv_rows, mask, softmax_scale, out, lse, threads, dtype);
  }
}

void attention_block_backward(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& out,
                              const HostTensor& dout, const HostTensor& lse, RowRange q_rows, RowRange kv_rows,
                              BlockMask mask, double softmax_scale, HostTensor& dq, HostTensor& dk, HostTensor& dv,
                              int threads, Dtype dtype) {
  check_common(q, q_rows, k, v, kv_rows, threads);
  const int64_t batch = q.batch();
  const int64_t hq = q.heads();
  const int64_t hkv = k.heads();
  check_output(out, batch, q_rows.end(), hq, v.width(), "out (global)");
  check_output(dout, batch, q_rows.end(), hq, v.width(), "dout");
  check_output(lse, batch, q_rows.end(), hq, 1, "lse (global)");
  check_output(dq, batch, q_rows.count, hq, q.width(), "dq");
  check_output(dk, batch, kv_rows.count, hkv, q.width(), "dk");
  check_output(dv, batch, kv_rows.count, hkv, v.width(), "dv");
  if (dtype == Dtype::fp64) {
    backward_impl<double>(q, k, v, out, dout, lse, q_rows, kv_rows, mask, softmax_scale, dq, dk, dv, threads, dtype);
  } else {
    backward_impl<float>(q, k, v, out, dout, lse, q_rows, kv_rows, mask, softmax_scale, dq, dk, dv, threads, dtype);
  }
}

}  // namespace hcpsim
