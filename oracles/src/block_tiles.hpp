#pragma once
// Tiles, scratch and helpers shared by the blockwise attention kernels (block_attention.cpp: forward,
// block_attention_backward.cpp: backward). Private to oracles/.
//
// Eigen's own GEMM threading is disabled for the whole target (EIGEN_DONT_PARALLELIZE in oracles/CMakeLists.txt):
// its blocking sizes depend on the thread count, which would make results depend on it. Parallelism comes from the
// kernels' (batch, head) loops and the backward's tile tasks only, none of which changes a sum's order.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "hcpsim/core/document_mask.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/semantics.hpp"
#include "hcpsim/oracles/block_attention.hpp"
#include "hcpsim/oracles/precision.hpp"

/// Internals of the blockwise attention kernels (oracles/src only).
namespace hcpsim::block_tiles {

/// A head's rows of a HostTensor (row-major, double), read and written through Eigen maps.
using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRows = Eigen::Map<const RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutableRows = Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

/// Query rows per tile. Together with kTileCols this bounds every temporary to a few L2-resident tiles, and keeps
/// each Eigen GEMM at a shape it runs near its peak rate (M, N ≥ 128 with inner dimension 64, or N = d with inner
/// dimension 128); the whole-row tiles used before ran the P·V product with an inner dimension of S, well below it.
/// Tiling changes no result across thread counts: every sum adds its tiles in one fixed order.
/// Source: bench/RESULTS.md (## CPU oracle) for the rates.
inline constexpr int64_t kTileRows = 128;
/// KV rows (score columns) per tile: the forward runs the online softmax over these tiles (docs/algorithm.md §4.4's
/// merge, applied within the block), the backward accumulates dQ over them.
inline constexpr int64_t kTileCols = 128;
/// On a tile the mask cuts (a causal diagonal), rows are processed in chunks of this many, each only over the
/// columns its last row sees, so about kEdgeRows/(2·kTileRows) of a diagonal tile is masked work, not half of it.
inline constexpr int64_t kEdgeRows = 32;
/// −∞, the lse of a row that sees no key.
inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Row-major scratch matrices and vectors of compute type T.
template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

/// Rows [row0, row0 + count) of head h of batch b as a [count, width] matrix (row stride heads·width).
inline ConstRows head_rows(const HostTensor& t, int64_t b, int64_t row0, int64_t count, int64_t h) {
  return ConstRows(t.data() + t.index(b, row0, h, 0), count, t.width(), Eigen::OuterStride<>(t.heads() * t.width()));
}
/// As above, writable.
inline MutableRows head_rows(HostTensor& t, int64_t b, int64_t row0, int64_t count, int64_t h) {
  return MutableRows(t.data() + t.index(b, row0, h, 0), count, t.width(), Eigen::OuterStride<>(t.heads() * t.width()));
}

using semantics::IndexRange;
using semantics::MaskDesc;

/// HCPSIM_ASSERT that `range` lies in t's rows (`what` names the tensor).
inline void check_range(const HostTensor& t, RowRange range, const char* what) {
  HCPSIM_ASSERT(range.begin >= 0, std::string("attention block: negative row begin of ") + what);
  HCPSIM_ASSERT(range.count >= 0, std::string("attention block: negative row count of ") + what);
  HCPSIM_ASSERT(range.end() <= t.rows(), std::string("attention block: row range outside ") + what);
}

/// HCPSIM_ASSERT the shapes both kernels share: batch, heads (q heads a multiple of kv heads), widths, row ranges.
inline void check_common(const HostTensor& q, RowRange q_rows, const HostTensor& k, const HostTensor& v,
                         RowRange kv_rows, int threads) {
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

/// HCPSIM_ASSERT that output `t` is [batch, ≥ rows, heads, width] (`what` names it).
inline void check_output(const HostTensor& t, int64_t batch, int64_t rows, int64_t heads, int64_t width,
                         const char* what) {
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

/// The calling thread's Workspace (one per thread and compute type, for both kernels).
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

/// Calls fn(Rect) for the work of query tile rows [t0, t0 + tr) of the block inside the KV tile of columns
/// [c0, min(c0 + kTileCols, nc)), nc = the tile's tile_columns end: the whole tile as one rectangle when every row
/// sees all of it (`all_see`, the tile's tile_full_columns), else kEdgeRows-row chunks, each over the columns its
/// rows see (a chunk that sees none is skipped).
template <typename Fn>
void for_each_rect_in_tile(const MaskDesc& desc, int64_t t0, int64_t tr, int64_t nk, int64_t nc, IndexRange all_see,
                           int64_t c0, Fn&& fn) {
  const int64_t width = std::min(kTileCols, nc - c0);
  if (all_see.begin <= c0 && all_see.end >= c0 + width) {
    fn(Rect{0, tr, c0, width, true});
    return;
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

/// Calls fn(Rect) for the work of query tile rows [t0, t0 + tr) of the block: KV tiles of kTileCols columns in
/// ascending order up to the last column the tile sees, each as for_each_rect_in_tile. The tile and chunk column
/// ranges come from semantics::tile_columns / tile_full_columns (every IR mask's ranges start at column 0). Masked
/// pairs inside a rectangle are the caller's to zero (per-row ranges from semantics::visible_columns).
template <typename Fn>
void for_each_rect(const MaskDesc& desc, int64_t t0, int64_t tr, int64_t nk, Fn&& fn) {
  const int64_t nc = semantics::tile_columns(desc, t0, t0 + tr - 1, nk).end;
  const IndexRange all_see = semantics::tile_full_columns(desc, t0, t0 + tr - 1, nk);
  for (int64_t c0 = 0; c0 < nc; c0 += kTileCols) for_each_rect_in_tile(desc, t0, tr, nk, nc, all_see, c0, fn);
}

/// Visible columns of query-tile row r (0-based in the tile starting at t0) inside rectangle `rc`, in [0, rc.cols].
inline int64_t rect_visible(const Rect& rc, const MaskDesc& desc, int64_t t0, int64_t r, int64_t nk) {
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
inline BlockParts block_parts(RowRange q_rows, RowRange kv_rows, BlockMask mask, const DocumentMask& doc) {
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

}  // namespace hcpsim::block_tiles
