#include "hcpsim/oracles/block_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

// Eigen only in this translation unit. Eigen's own GEMM threading is disabled for the whole target
// (EIGEN_DONT_PARALLELIZE in oracles/CMakeLists.txt): its blocking sizes depend on the thread count, which would
// make results depend on it. Parallelism comes from the (batch, head) loops below only.
#include <Eigen/Dense>

#include "hcpsim/core/document_mask.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/semantics.hpp"
#include "hcpsim/oracles/precision.hpp"

namespace hcpsim {

namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRows = Eigen::Map<const RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutableRows = Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

/// Query rows per tile. Together with kTileCols this bounds every temporary to a few L2-resident tiles, and keeps
/// each Eigen GEMM at a shape it runs near its peak rate (M, N ≥ 128 with inner dimension 64, or N = d with inner
/// dimension 128); the whole-row tiles used before ran the P·V product with an inner dimension of S, well below it.
/// Tiling changes no result across thread counts: the tile loops are sequential inside one work item.
/// Source: bench/RESULTS.md (## CPU oracle) for the rates.
constexpr int64_t kTileRows = 128;
/// KV rows (score columns) per tile: the forward runs the online softmax over these tiles (docs/algorithm.md §4.4's
/// merge, applied within the block), the backward accumulates dQ over them.
constexpr int64_t kTileCols = 128;
/// On a tile the mask cuts (a causal diagonal), rows are processed in chunks of this many, each only over the
/// columns its last row sees, so about kEdgeRows/(2·kTileRows) of a diagonal tile is masked work, not half of it.
constexpr int64_t kEdgeRows = 32;
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

using semantics::IndexRange;
using semantics::MaskDesc;

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


/// Per-thread scratch of the kernels, kept across calls: on the bench host a fresh page costs ~15 µs on first touch,
/// so allocating the KV copies and sums per call cost more than the arithmetic of small blocks. Every element is
/// written before it is read, so the reuse changes no value. Holds at most (2·dk + 2·dv)·nk elements per thread
/// (twice that for a document-masked backward, whose per-piece sums are added into the block's).
template <typename T>
struct Workspace {
  Mat<T> k, v, dk_sum, dv_sum;                           // [nk, d] per work item (or per document piece)
  Mat<T> block_dk, block_dv;                             // [nk, d]: a document-masked block's dK, dV sums
  Mat<T> q_tile, dout_tile, acc, dq_tile, probs, dscores;  // [kTileRows, ·] per query tile
  Vec<T> row_max, row_sum;                                // [kTileRows]
};

template <typename T>
Workspace<T>& thread_workspace() {
  thread_local Workspace<T> ws;
  return ws;
}

/// The top `rows` rows of `m` after growing it (never shrinking) to at least rows × cols; contents unspecified.
template <typename T>
auto top_rows(Mat<T>& m, int64_t rows, int64_t cols) {
  if (m.cols() != cols) m.resize(rows, cols);
  if (m.rows() < rows) m.resize(rows, cols);
  return m.topRows(rows);
}

/// One rectangle of a (query tile, KV tile) pair: query-tile rows [row0, row0 + rows), tile columns [0, cols)
/// (KV rows col0 + [0, cols) of the block), and whether every row sees every one of those columns.
struct Rect {
  int64_t row0;
  int64_t rows;
  int64_t col0;
  int64_t cols;
  bool full;
};

/// Calls fn(Rect) for the work of query tile rows [t0, t0 + tr) of the block: KV tiles of kTileCols columns in
/// ascending order up to the last column the tile sees; a KV tile the mask cuts is split into kEdgeRows-row chunks,
/// each over the columns its rows see (a chunk that sees none is skipped). The tile and chunk column ranges come
/// from semantics::tile_columns / tile_full_columns (every IR mask's ranges start at column 0). Masked pairs
/// inside a rectangle are the caller's to zero (per-row ranges from semantics::visible_columns).
template <typename Fn>
void for_each_rect(const MaskDesc& desc, int64_t t0, int64_t tr, int64_t nk, Fn&& fn) {
  const int64_t nc = semantics::tile_columns(desc, t0, t0 + tr - 1, nk).end;
  const IndexRange all_see = semantics::tile_full_columns(desc, t0, t0 + tr - 1, nk);
  for (int64_t c0 = 0; c0 < nc; c0 += kTileCols) {
    const int64_t width = std::min(kTileCols, nc - c0);
    if (all_see.begin <= c0 && all_see.end >= c0 + width) {
      fn(Rect{0, tr, c0, width, true});
      continue;
    }
    for (int64_t r0 = 0; r0 < tr; r0 += kEdgeRows) {
      const int64_t rows = std::min(kEdgeRows, tr - r0);
      const int64_t r_last = t0 + r0 + rows - 1;
      const int64_t cols = std::min(width, semantics::tile_columns(desc, t0 + r0, r_last, nk).end - c0);
      if (cols <= 0) continue;
      const IndexRange chunk_sees = semantics::tile_full_columns(desc, t0 + r0, r_last, nk);
      fn(Rect{r0, rows, c0, cols, chunk_sees.begin <= c0 && chunk_sees.end >= c0 + cols});
    }
  }
}

/// Visible columns of query-tile row r (0-based in the tile starting at t0) inside rectangle `rc`, in [0, rc.cols].
int64_t rect_visible(const Rect& rc, const MaskDesc& desc, int64_t t0, int64_t r, int64_t nk) {
  if (rc.full) return rc.cols;
  return std::clamp<int64_t>(semantics::visible_columns(desc, t0 + r, nk).end - rc.col0, 0, rc.cols);
}

/// One dense part of a block that the tiled kernels run: query rows [q_begin, q_begin + nq) of the block (read at
/// q_rows.begin + q_begin, written at rows q_begin of out, lse and dq) against nk KV columns gathered from the
/// absolute rows `kv` of k and v (concatenated in order, the first nk of them), masked by `desc` over the gathered
/// columns. A block without a document mask is one part: all its rows against the contiguous kv rows.
struct DensePart {
  int64_t q_begin = 0;
  int64_t nq = 0;
  std::vector<IndexRange> kv;
  int64_t nk = 0;
  MaskDesc desc;
};

/// The parts of a block and its rows in no part (document mask only: rows that see no key).
struct BlockParts {
  std::vector<DensePart> parts;
  std::vector<IndexRange> empty_rows;  ///< block rows
  bool document = false;
};

/// The one part of a dense block, or the document_mask_pieces of a document-masked one (kv ranges made absolute).
BlockParts block_parts(RowRange q_rows, RowRange kv_rows, BlockMask mask, const DocumentMask& doc) {
  BlockParts bp;
  const int64_t nq = q_rows.count, nk = kv_rows.count;
  if (doc.empty()) {
    bp.parts.push_back(DensePart{0, nq, {IndexRange{kv_rows.begin, kv_rows.end()}}, nk,
                                 semantics::block_mask_desc(mask, nq, nk)});
    return bp;
  }
  HCPSIM_ASSERT(runs_rows(doc.q) == nq, "attention block: document mask q runs != q rows");
  HCPSIM_ASSERT(runs_rows(doc.kv) == nk, "attention block: document mask kv runs != kv rows");
  bp.document = true;
  int64_t next = 0;  // first block row not yet covered
  for (DocumentMaskPiece& piece : document_mask_pieces(doc, mask != BlockMask::none)) {
    if (piece.q_begin > next) bp.empty_rows.push_back(IndexRange{next, piece.q_begin});
    next = piece.q_begin + piece.q_count;
    for (IndexRange& r : piece.kv_ranges) r = IndexRange{kv_rows.begin + r.begin, kv_rows.begin + r.end};
    bp.parts.push_back(DensePart{piece.q_begin, piece.q_count, std::move(piece.kv_ranges), piece.kv_count,
                                 piece.desc});
  }
  if (next < nq) bp.empty_rows.push_back(IndexRange{next, nq});
  return bp;
}

/// Rows [0, count) of `dst` ← head h of batch b of `t` at the rows `ranges` list (concatenated, cut at count),
/// widened to dst's scalar type (exact).
template <typename Dst>
void gather_rows(Dst& dst, const HostTensor& t, int64_t b, int64_t h, const std::vector<IndexRange>& ranges,
                 int64_t count) {
  using T = typename Dst::Scalar;
  int64_t row = 0;
  for (const IndexRange& r : ranges) {
    if (row >= count) break;
    const int64_t n = std::min(r.count(), count - row);
    dst.middleRows(row, n) = head_rows(t, b, r.begin, n, h).template cast<T>();
    row += n;
  }
}

/// The inverse of gather_rows for sums: rows (ranges − base) of `dst` += rows [0, count) of `src`, in order.
template <typename Dst, typename Src>
void scatter_add_rows(Dst& dst, const Src& src, const std::vector<IndexRange>& ranges, int64_t base,
                      int64_t count) {
  int64_t row = 0;
  for (const IndexRange& r : ranges) {
    if (row >= count) break;
    const int64_t n = std::min(r.count(), count - row);
    dst.middleRows(r.begin - base, n) += src.middleRows(row, n);
    row += n;
  }
}

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

/// What every part of one backward call shares.
struct BackwardArgs {
  const HostTensor& q;
  const HostTensor& k;
  const HostTensor& v;
  const HostTensor& out;
  const HostTensor& dout;
  const HostTensor& lse;
  HostTensor& dq;
  int64_t q_row0;  ///< q_rows.begin
  double scale;
  Dtype dtype;
};

/// Rows of `src` rounded to `dtype` into `dst` (the kernels' only rounding of dq, dk, dv).
template <typename Src>
void store_rounded(MutableRows dst, const Src& src, Dtype dtype) {
  for (int64_t r = 0; r < src.rows(); ++r) {
    for (int64_t w = 0; w < src.cols(); ++w) dst(r, w) = round_to_dtype(static_cast<double>(src(r, w)), dtype);
  }
}

/// One part for (batch b, kv head g) and the query heads of its group, in ascending order (byte-identical for any
/// thread count): writes the part's dq rows and leaves its dK, dV over the gathered columns in ws.dk_sum,
/// ws.dv_sum (rows [0, part.nk), unrounded).
template <typename T>
void backward_part(const BackwardArgs& a, Workspace<T>& ws, int64_t b, int64_t g, const DensePart& part) {
  const int64_t group = a.q.heads() / a.k.heads();
  const int64_t nq = part.nq;
  const int64_t nk = part.nk;
  const int64_t dim_qk = a.q.width();
  const int64_t dim_v = a.v.width();
  const MaskDesc& desc = part.desc;
  const T scale = static_cast<T>(a.scale);
  auto k_all = top_rows(ws.k, nk, dim_qk);  // [nk, dk]
  auto v_all = top_rows(ws.v, nk, dim_v);   // [nk, dv]
  gather_rows(k_all, a.k, b, g, part.kv, nk);
  gather_rows(v_all, a.v, b, g, part.kv, nk);
  auto dk_sum = top_rows(ws.dk_sum, nk, dim_qk);  // [nk, dk], summed over the query group
  auto dv_sum = top_rows(ws.dv_sum, nk, dim_v);   // [nk, dv]
  dk_sum.setZero();
  dv_sum.setZero();
  auto q_tile = top_rows(ws.q_tile, kTileRows, dim_qk);     // [tr, dk]
  auto dout_tile = top_rows(ws.dout_tile, kTileRows, dim_v);  // [tr, dv]
  auto dq_tile = top_rows(ws.dq_tile, kTileRows, dim_qk);   // [tr, dk], summed over the KV tiles
  auto probs = top_rows(ws.probs, kTileRows, kTileCols);     // P [tr, kTileCols]
  auto dscores = top_rows(ws.dscores, kTileRows, kTileCols);  // dP, then dS [tr, kTileCols]
  Vec<T>& row_lse = ws.row_max;
  Vec<T>& row_delta = ws.row_sum;  // D_r = Σ_d dout·out
  row_lse.resize(kTileRows);
  row_delta.resize(kTileRows);
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t t0 = 0; t0 < nq; t0 += kTileRows) {
      const int64_t tr = std::min(kTileRows, nq - t0);
      const int64_t row0 = a.q_row0 + part.q_begin + t0;
      MutableRows dq_out = head_rows(a.dq, b, part.q_begin + t0, tr, h);  // [tr, dk]
      if (semantics::tile_columns(desc, t0, t0 + tr - 1, nk).count() == 0) {
        dq_out.setZero();
        continue;
      }
      q_tile.topRows(tr) = head_rows(a.q, b, row0, tr, h).template cast<T>();
      dout_tile.topRows(tr) = head_rows(a.dout, b, row0, tr, h).template cast<T>();
      const ConstRows out_rows = head_rows(a.out, b, row0, tr, h);  // [tr, dv]
      for (int64_t r = 0; r < tr; ++r) {
        row_lse(r) = static_cast<T>(a.lse(b, row0 + r, h, 0));
        T d = T(0);
        for (int64_t w = 0; w < dim_v; ++w) d += dout_tile(r, w) * static_cast<T>(out_rows(r, w));
        row_delta(r) = d;
      }
      dq_tile.topRows(tr).setZero();
      for_each_rect(desc, t0, tr, nk, [&](const Rect& rc) {
        const auto q_rc = q_tile.middleRows(rc.row0, rc.rows);
        const auto dout_rc = dout_tile.middleRows(rc.row0, rc.rows);
        const auto k_rc = k_all.middleRows(rc.col0, rc.cols);
        const auto v_rc = v_all.middleRows(rc.col0, rc.cols);
        auto p = probs.topLeftCorner(rc.rows, rc.cols);
        auto ds = dscores.topLeftCorner(rc.rows, rc.cols);
        p.noalias() = (scale * q_rc) * k_rc.transpose();
        ds.noalias() = dout_rc * v_rc.transpose();  // dP
        for (int64_t i = 0; i < rc.rows; ++i) {
          const int64_t r = rc.row0 + i;
          const int64_t vis = rect_visible(rc, desc, t0, r, nk);
          auto p_row = p.row(i);
          auto ds_row = ds.row(i);
          p_row.tail(rc.cols - vis).setZero();  // masked (exact zero)
          ds_row.tail(rc.cols - vis).setZero();
          p_row.head(vis) = (p_row.head(vis).array() - row_lse(r)).exp().matrix();
          // dS = P∘(dP − D)
          ds_row.head(vis) = (p_row.head(vis).array() * (ds_row.head(vis).array() - row_delta(r))).matrix();
        }
        dv_sum.middleRows(rc.col0, rc.cols).noalias() += p.transpose() * dout_rc;
        dq_tile.middleRows(rc.row0, rc.rows).noalias() += (scale * ds) * k_rc;
        dk_sum.middleRows(rc.col0, rc.cols).noalias() += (scale * ds.transpose()) * q_rc;
      });
      store_rounded(dq_out, dq_tile.topRows(tr), a.dtype);
    }
  }
}

template <typename T>
void backward_impl(const BackwardArgs& a, RowRange kv_rows, const BlockParts& bp, HostTensor& dk, HostTensor& dv,
                   int threads) {
  const int64_t hkv = a.k.heads();
  const int64_t group = a.q.heads() / hkv;
  const int64_t nk = kv_rows.count;
  const int64_t items = a.q.batch() * hkv;

#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t b = item / hkv;
    const int64_t g = item % hkv;
    Workspace<T>& ws = thread_workspace<T>();
    if (!bp.document) {  // one part over the whole block: its sums are the block's
      backward_part(a, ws, b, g, bp.parts.front());
      store_rounded(head_rows(dk, b, 0, nk, g), ws.dk_sum.topRows(nk), a.dtype);
      store_rounded(head_rows(dv, b, 0, nk, g), ws.dv_sum.topRows(nk), a.dtype);
      continue;
    }
    auto block_dk = top_rows(ws.block_dk, nk, a.q.width());  // [nk, dk], every piece's sum added in
    auto block_dv = top_rows(ws.block_dv, nk, a.v.width());  // [nk, dv]
    block_dk.setZero();  // kv rows that no piece reads keep 0
    block_dv.setZero();
    for (const DensePart& part : bp.parts) {
      backward_part(a, ws, b, g, part);
      scatter_add_rows(block_dk, ws.dk_sum.topRows(part.nk), part.kv, kv_rows.begin, part.nk);
      scatter_add_rows(block_dv, ws.dv_sum.topRows(part.nk), part.kv, kv_rows.begin, part.nk);
    }
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (const IndexRange& e : bp.empty_rows) head_rows(a.dq, b, e.begin, e.count(), h).setZero();
    }
    store_rounded(head_rows(dk, b, 0, nk, g), block_dk, a.dtype);
    store_rounded(head_rows(dv, b, 0, nk, g), block_dv, a.dtype);
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

void attention_block_backward(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& out,
                              const HostTensor& dout, const HostTensor& lse, RowRange q_rows, RowRange kv_rows,
                              BlockMask mask, double softmax_scale, HostTensor& dq, HostTensor& dk, HostTensor& dv,
                              int threads, Dtype dtype, const DocumentMask& doc) {
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
  const BlockParts bp = block_parts(q_rows, kv_rows, mask, doc);
  const BackwardArgs args{q, k, v, out, dout, lse, dq, q_rows.begin, softmax_scale, dtype};
  if (dtype == Dtype::fp64) {
    backward_impl<double>(args, kv_rows, bp, dk, dv, threads);
  } else {
    backward_impl<float>(args, kv_rows, bp, dk, dv, threads);
  }
}

}  // namespace hcpsim
