// The blockwise attention forward (online softmax over KV tiles); the backward is in block_attention_backward.cpp.

#include "hcpsim/oracles/block_attention.hpp"

#include "block_tiles.hpp"

namespace hcpsim {

using namespace block_tiles;  // NOLINT(google-build-using-namespace): this file's own internals

namespace {

/// What every part of one forward call shares.
template <typename T>
struct ForwardArgs {
  const HostTensor& q;
  const HostTensor& k;
  const HostTensor& v;
  HostTensor& out;
  HostTensor& lse;
  int64_t q_row0;  ///< q_rows.begin
  T scale;
  Dtype dtype;
  Dtype lse_dtype;
};

/// The kernels in compute type T (double for fp64; float for fp32, bf16 and fp16, like TE's kernels, which keep
/// scores, softmax statistics and the in-kernel dK/dV sums in fp32 whatever the input format). Inputs are widened
/// (exactly) to T; outputs are rounded to `dtype` (out, dq, dk, dv) or fp32 (lse) on the way out, the only
/// rounding points (docs/algorithm.md §4.4, §5.3). exp runs vectorised (Eigen's packet exp, within 1–2 ulp of
/// libm's) on contiguous rows of row-major tiles whose rows start 32-byte aligned, so which elements take the
/// packet path depends only on the tile shapes, never on the thread count.
/// forward_part: one part for (batch b, query head h, kv head g), writing its rows of out and lse.
template <typename T>
void forward_part(const ForwardArgs<T>& a, Workspace<T>& ws, int64_t b, int64_t h, int64_t g, const DensePart& part) {
  const int64_t nq = part.nq;
  const int64_t nk = part.nk;
  const int64_t dim_qk = a.q.width();
  const int64_t dim_v = a.v.width();
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const MaskDesc& desc = part.desc;
  // KV rows any query row sees.
  const int64_t nk_used = nq == 0 ? 0 : semantics::tile_columns(desc, 0, nq - 1, nk).end;
  auto k_all = top_rows(ws.k, nk_used, dim_qk);  // [nk_used, dk]
  auto v_all = top_rows(ws.v, nk_used, dim_v);   // [nk_used, dv]
  gather_rows(k_all, a.k, b, g, part.kv, nk_used);
  gather_rows(v_all, a.v, b, g, part.kv, nk_used);
  auto q_tile = top_rows(ws.q_tile, kTileRows, dim_qk);  // [tr, dk]
  auto probs = top_rows(ws.probs, kTileRows, kTileCols);  // [tr, kTileCols] scores, then exp(s − running max)
  auto acc = top_rows(ws.acc, kTileRows, dim_v);          // [tr, dv] Σ exp(s − running max)·v
  Vec<T>& row_max = ws.row_max;                           // running max of the visible scores
  Vec<T>& row_sum = ws.row_sum;                           // running Σ exp(s − running max)
  row_max.resize(kTileRows);
  row_sum.resize(kTileRows);
  for (int64_t t0 = 0; t0 < nq; t0 += kTileRows) {
    const int64_t tr = std::min(kTileRows, nq - t0);
    q_tile.topRows(tr) = head_rows(a.q, b, a.q_row0 + part.q_begin + t0, tr, h).template cast<T>();
    row_max.head(tr).setConstant(neg_inf);
    row_sum.head(tr).setZero();
    acc.topRows(tr).setZero();
    for_each_rect(desc, t0, tr, nk, [&](const Rect& rc) {
      auto s = probs.topLeftCorner(rc.rows, rc.cols);
      s.noalias() = (a.scale * q_tile.middleRows(rc.row0, rc.rows)) * k_all.middleRows(rc.col0, rc.cols).transpose();
      for (int64_t i = 0; i < rc.rows; ++i) {
        const int64_t r = rc.row0 + i;
        const int64_t vis = rect_visible(rc, desc, t0, r, nk);
        auto row = s.row(i);
        row.tail(rc.cols - vis).setZero();  // masked (exact zero)
        if (vis == 0) continue;
        // Online softmax: a NaN score leaves the max alone but still reaches the sum through exp(NaN − m).
        const T m_old = row_max(r);
        const T m_new = std::max(m_old, row.head(vis).maxCoeff());
        row.head(vis) = (row.head(vis).array() - m_new).exp().matrix();
        const T alpha = std::exp(m_old - m_new);  // 0 for the row's first visible tile
        row_sum(r) = row_sum(r) * alpha + row.head(vis).sum();
        if (alpha != T(1)) acc.row(r) *= alpha;
        row_max(r) = m_new;
      }
      acc.middleRows(rc.row0, rc.rows).noalias() += s * v_all.middleRows(rc.col0, rc.cols);
    });
    const int64_t row0 = part.q_begin + t0;                  // block row of the tile's first row
    MutableRows out_tile = head_rows(a.out, b, row0, tr, h);  // [tr, dv]
    for (int64_t r = 0; r < tr; ++r) {
      if (semantics::visible_columns(desc, t0 + r, nk).count() == 0) {  // no key seen: out = 0, lse = −inf, no NaN
        out_tile.row(r).setZero();
        a.lse(b, row0 + r, h, 0) = kNegInf;
        continue;
      }
      const T sum = row_sum(r);
      a.lse(b, row0 + r, h, 0) = round_to_dtype(static_cast<double>(row_max(r) + std::log(sum)), a.lse_dtype);
      for (int64_t w = 0; w < dim_v; ++w) {
        out_tile(r, w) = round_to_dtype(static_cast<double>(acc(r, w) / sum), a.dtype);
      }
    }
  }
}

template <typename T>
void forward_impl(const HostTensor& q, RowRange q_rows, const HostTensor& k, const HostTensor& v,
                  const BlockParts& bp, double softmax_scale, HostTensor& out, HostTensor& lse, int threads,
                  Dtype dtype) {
  const int64_t hq = q.heads();
  const int64_t group = hq / k.heads();
  const int64_t items = q.batch() * hq;
  const Dtype lse_dtype = dtype == Dtype::fp64 ? Dtype::fp64 : Dtype::fp32;
  const ForwardArgs<T> args{q, k, v, out, lse, q_rows.begin, static_cast<T>(softmax_scale), dtype, lse_dtype};

#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t b = item / hq;
    const int64_t h = item % hq;
    Workspace<T>& ws = thread_workspace<T>();
    for (const DensePart& part : bp.parts) forward_part(args, ws, b, h, h / group, part);
    for (const IndexRange& e : bp.empty_rows) {  // rows that see no key: out = 0, lse = −inf
      head_rows(out, b, e.begin, e.count(), h).setZero();
      for (int64_t r = e.begin; r < e.end; ++r) lse(b, r, h, 0) = kNegInf;
    }
  }
}

}  // namespace

void attention_block_forward(const HostTensor& q, RowRange q_rows, const HostTensor& k, const HostTensor& v,
                             RowRange kv_rows, BlockMask mask, double softmax_scale, HostTensor& out, HostTensor& lse,
                             int threads, Dtype dtype, const DocumentMask& doc) {
  check_common(q, q_rows, k, v, kv_rows, threads);
  check_output(out, q.batch(), q_rows.count, q.heads(), v.width(), "out");
  check_output(lse, q.batch(), q_rows.count, q.heads(), 1, "lse");
  const BlockParts bp = block_parts(q_rows, kv_rows, mask, doc);
  if (dtype == Dtype::fp64) {
    forward_impl<double>(q, q_rows, k, v, bp, softmax_scale, out, lse, threads, dtype);
  } else {
    forward_impl<float>(q, q_rows, k, v, bp, softmax_scale, out, lse, threads, dtype);
  }
}

}  // namespace hcpsim
