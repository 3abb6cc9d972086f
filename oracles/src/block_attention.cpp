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

namespace hcpsim {

namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRows = Eigen::Map<const RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutableRows = Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

/// Query rows per tile: bounds the score matrix to kTileRows × kv rows per (batch, head) (the reference runs with
/// kv rows = S). Tiling changes no result across thread counts: the tile loop is sequential inside one work item.
constexpr int64_t kTileRows = 128;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Rows [row0, row0 + count) of head h of batch b as a [count, width] matrix (row stride heads·width).
ConstRows head_rows(const HostTensor& t, int64_t b, int64_t row0, int64_t count, int64_t h) {
  return ConstRows(t.data() + t.index(b, row0, h, 0), count, t.width(), Eigen::OuterStride<>(t.heads() * t.width()));
}
MutableRows head_rows(HostTensor& t, int64_t b, int64_t row0, int64_t count, int64_t h) {
  return MutableRows(t.data() + t.index(b, row0, h, 0), count, t.width(), Eigen::OuterStride<>(t.heads() * t.width()));
}

/// Number of KV rows visible to block row r (0-based within the block) among the first nc of nk.
int64_t visible_columns(BlockMask mask, int64_t r, int64_t nc) {
  return mask == BlockMask::causal ? std::min(nc, r + 1) : nc;
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

}  // namespace

double lse_merge(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  const double hi = std::max(a, b);
  const double lo = std::min(a, b);
  if (hi == kNegInf) return kNegInf;  // both empty: −inf − (−inf) would be NaN
  return hi + std::log1p(std::exp(lo - hi));
}

void attention_block_forward(const HostTensor& q, RowRange q_rows, const HostTensor& k, const HostTensor& v,
                             RowRange kv_rows, BlockMask mask, double softmax_scale, HostTensor& out, HostTensor& lse,
                             int threads) {
  check_common(q, q_rows, k, v, kv_rows, threads);
  const int64_t batch = q.batch();
  const int64_t hq = q.heads();
  const int64_t group = hq / k.heads();
  const int64_t nq = q_rows.count;
  const int64_t nk = kv_rows.count;
  check_output(out, batch, nq, hq, v.width(), "out");
  check_output(lse, batch, nq, hq, 1, "lse");
  const int64_t items = batch * hq;

#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t b = item / hq;
    const int64_t h = item % hq;
    const int64_t g = h / group;
    const ConstRows k_all = head_rows(k, b, kv_rows.begin, nk, g);  // [nk, dk]
    const ConstRows v_all = head_rows(v, b, kv_rows.begin, nk, g);  // [nk, dv]
    for (int64_t t0 = 0; t0 < nq; t0 += kTileRows) {
      const int64_t tr = std::min(kTileRows, nq - t0);
      // Causal: no row of this tile sees a column ≥ t0 + tr.
      const int64_t nc = mask == BlockMask::causal ? std::min(nk, t0 + tr) : nk;
      const ConstRows q_tile = head_rows(q, b, q_rows.begin + t0, tr, h);  // [tr, dk]
      MutableRows out_tile = head_rows(out, b, t0, tr, h);                  // [tr, dv]
      if (nc == 0) {
        out_tile.setZero();
        for (int64_t r = 0; r < tr; ++r) lse(b, t0 + r, h, 0) = kNegInf;
        continue;
      }
      RowMatrix scores = (q_tile * k_all.topRows(nc).transpose()) * softmax_scale;  // [tr, nc]
      Eigen::VectorXd row_max(tr);
      for (int64_t r = 0; r < tr; ++r) {
        const int64_t vis = visible_columns(mask, t0 + r, nc);
        double m = kNegInf;  // a NaN score is skipped here but still reaches the sum through exp(NaN − m)
        for (int64_t c = 0; c < vis; ++c) m = std::max(m, scores(r, c));
        row_max(r) = m;
      }
      RowMatrix probs = (scores.colwise() - row_max).array().exp().matrix();  // [tr, nc]
      for (int64_t r = 0; r < tr; ++r) {
        const int64_t vis = visible_columns(mask, t0 + r, nc);
        for (int64_t c = vis; c < nc; ++c) probs(r, c) = 0.0;  // masked (exact zero, whatever exp gave)
        if (vis == 0) {
          lse(b, t0 + r, h, 0) = kNegInf;
          continue;
        }
        double sum = 0.0;
        for (int64_t c = 0; c < vis; ++c) sum += probs(r, c);
        lse(b, t0 + r, h, 0) = row_max(r) + std::log(sum);
        for (int64_t c = 0; c < vis; ++c) probs(r, c) /= sum;
      }
      out_tile.noalias() = probs * v_all.topRows(nc);
    }
  }
}

void attention_block_backward(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& out,
                              const HostTensor& dout, const HostTensor& lse, RowRange q_rows, RowRange kv_rows,
                              BlockMask mask, double softmax_scale, HostTensor& dq, HostTensor& dk, HostTensor& dv,
                              int threads) {
  check_common(q, q_rows, k, v, kv_rows, threads);
  const int64_t batch = q.batch();
  const int64_t hq = q.heads();
  const int64_t hkv = k.heads();
  const int64_t group = hq / hkv;
  const int64_t nq = q_rows.count;
  const int64_t nk = kv_rows.count;
  const int64_t dim_qk = q.width();
  const int64_t dim_v = v.width();
  check_output(out, batch, q_rows.end(), hq, dim_v, "out (global)");
  check_output(dout, batch, q_rows.end(), hq, dim_v, "dout");
  check_output(lse, batch, q_rows.end(), hq, 1, "lse (global)");
  check_output(dq, batch, nq, hq, dim_qk, "dq");
  check_output(dk, batch, nk, hkv, dim_qk, "dk");
  check_output(dv, batch, nk, hkv, dim_v, "dv");
  const int64_t items = batch * hkv;

#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t b = item / hkv;
    const int64_t g = item % hkv;
    const ConstRows k_all = head_rows(k, b, kv_rows.begin, nk, g);  // [nk, dk]
    const ConstRows v_all = head_rows(v, b, kv_rows.begin, nk, g);  // [nk, dv]
    RowMatrix dk_sum = RowMatrix::Zero(nk, dim_qk);                  // [nk, dk], summed over the query group
    RowMatrix dv_sum = RowMatrix::Zero(nk, dim_v);                   // [nk, dv]
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {  // fixed order: byte-identical for any thread count
      for (int64_t t0 = 0; t0 < nq; t0 += kTileRows) {
        const int64_t tr = std::min(kTileRows, nq - t0);
        const int64_t nc = mask == BlockMask::causal ? std::min(nk, t0 + tr) : nk;
        const int64_t row0 = q_rows.begin + t0;
        const ConstRows q_tile = head_rows(q, b, row0, tr, h);        // [tr, dk]
        const ConstRows out_tile = head_rows(out, b, row0, tr, h);    // [tr, dv]
        const ConstRows dout_tile = head_rows(dout, b, row0, tr, h);  // [tr, dv]
        MutableRows dq_tile = head_rows(dq, b, t0, tr, h);            // [tr, dk]
        if (nc == 0) {
          dq_tile.setZero();
          continue;
        }
        const auto k_vis = k_all.topRows(nc);
        const auto v_vis = v_all.topRows(nc);
        Eigen::VectorXd row_lse(tr);
        Eigen::VectorXd row_delta(tr);  // D_r = Σ_d dout·out
        for (int64_t r = 0; r < tr; ++r) {
          row_lse(r) = lse(b, row0 + r, h, 0);
          double d = 0.0;
          for (int64_t w = 0; w < dim_v; ++w) d += dout_tile(r, w) * out_tile(r, w);
          row_delta(r) = d;
        }
        RowMatrix probs = (((q_tile * k_vis.transpose()) * softmax_scale).colwise() - row_lse).array().exp().matrix();
        for (int64_t r = 0; r < tr; ++r) {
          for (int64_t c = visible_columns(mask, t0 + r, nc); c < nc; ++c) probs(r, c) = 0.0;
        }
        dv_sum.topRows(nc).noalias() += probs.transpose() * dout_tile;
        RowMatrix dscores = dout_tile * v_vis.transpose();  // dP [tr, nc]
        dscores = (probs.array() * (dscores.colwise() - row_delta).array()).matrix();  // dS = P∘(dP − D)
        dq_tile.noalias() = (dscores * k_vis) * softmax_scale;
        dk_sum.topRows(nc).noalias() += (dscores.transpose() * q_tile) * softmax_scale;
      }
    }
    head_rows(dk, b, 0, nk, g) = dk_sum;
    head_rows(dv, b, 0, nk, g) = dv_sum;
  }
}

}  // namespace hcpsim
