// The blockwise attention backward: (query tile, KV tile) units in a fixed accumulation order, on one thread per
// (batch, kv head) item or spread over the threads as tasks.

#include "hcpsim/oracles/block_attention.hpp"

#include <utility>

#include "block_tiles.hpp"

namespace hcpsim {

using namespace block_tiles;  // NOLINT(google-build-using-namespace): this file's own internals

namespace {

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

/// A backward part's data shared by its units: K, V of the gathered columns and their dK, dV sums (rows
/// [0, part.nk) of each; the units of KV tile c alone touch rows [c·kTileCols, (c + 1)·kTileCols) of the sums).
template <typename T>
struct PartData {
  Mat<T>& k;
  Mat<T>& v;
  Mat<T>& dk_sum;
  Mat<T>& dv_sum;
};

/// Gathers the part's K, V into `pd` and zeroes its sums.
template <typename T>
void prepare_part(const BackwardArgs& a, const PartData<T>& pd, int64_t b, int64_t g, const DensePart& part) {
  auto k_all = top_rows(pd.k, part.nk, a.q.width());  // [nk, dk]
  auto v_all = top_rows(pd.v, part.nk, a.v.width());  // [nk, dv]
  gather_rows(k_all, a.k, b, g, part.kv, part.nk);
  gather_rows(v_all, a.v, b, g, part.kv, part.nk);
  top_rows(pd.dk_sum, part.nk, a.q.width()).setZero();  // [nk, dk], summed over the query group
  top_rows(pd.dv_sum, part.nk, a.v.width()).setZero();  // [nk, dv]
}

/// A block of rows of a scratch matrix (the type of Mat<T>::middleRows and of top_rows).
template <typename T>
using Rows = decltype(std::declval<Mat<T>&>().middleRows(int64_t{0}, int64_t{0}));

/// A loaded query tile, as the units of one (query head, query tile) read it: q and dout in T ([kTileRows, d],
/// rows [0, tr) filled), lse and D_r = Σ_d dout·out ([kTileRows]), and its dQ sum ([kTileRows, dk]).
template <typename T>
struct QueryTile {
  Rows<T> q, dout, dq;
  T* lse;
  T* delta;
};

/// Fills rows [0, tr) of `qt`'s q, dout, lse and D for query tile rows [t0, t0 + tr) of head h (the same values on
/// every fill).
template <typename T>
void load_query_tile(const BackwardArgs& a, const DensePart& part, int64_t b, int64_t h, int64_t t0,
                     const QueryTile<T>& qt) {
  const int64_t tr = std::min(kTileRows, part.nq - t0);
  const int64_t row0 = a.q_row0 + part.q_begin + t0;
  const int64_t dim_v = a.v.width();
  auto q_tile = qt.q;
  auto dout_tile = qt.dout;
  q_tile.topRows(tr) = head_rows(a.q, b, row0, tr, h).template cast<T>();
  dout_tile.topRows(tr) = head_rows(a.dout, b, row0, tr, h).template cast<T>();
  const ConstRows out_rows = head_rows(a.out, b, row0, tr, h);  // [tr, dv]
  for (int64_t r = 0; r < tr; ++r) {
    qt.lse[r] = static_cast<T>(a.lse(b, row0 + r, h, 0));
    T d = T(0);
    for (int64_t w = 0; w < dim_v; ++w) d += dout_tile(r, w) * static_cast<T>(out_rows(r, w));
    qt.delta[r] = d;
  }
}

/// One unit of a backward part: query tile rows [t0, t0 + kTileRows) (loaded in `qt`) against the KV tile of
/// columns [c0, c0 + kTileCols). Its rectangles (for_each_rect_in_tile's, in that order) add into rows [0, tr) of
/// the tile's dQ sum and into the KV tile's rows of pd's dK, dV sums; ws holds the unit's P and dS. A dQ sum thus
/// adds its KV tiles in ascending order and a dK, dV row its (query head, query tile) pairs in ascending order,
/// however the units are spread over threads (backward_part_split).
template <typename T>
void backward_unit(const DensePart& part, const PartData<T>& pd, Workspace<T>& ws, T scale, int64_t t0, int64_t c0,
                   const QueryTile<T>& qt) {
  const int64_t nk = part.nk;
  const int64_t dim_qk = pd.k.cols();
  const int64_t dim_v = pd.v.cols();
  const MaskDesc& desc = part.desc;
  const int64_t tr = std::min(kTileRows, part.nq - t0);
  auto k_all = top_rows(pd.k, nk, dim_qk);
  auto v_all = top_rows(pd.v, nk, dim_v);
  auto dk_sum = top_rows(pd.dk_sum, nk, dim_qk);
  auto dv_sum = top_rows(pd.dv_sum, nk, dim_v);
  const auto& q_tile = qt.q;        // [tr, dk]
  const auto& dout_tile = qt.dout;  // [tr, dv]
  auto dq_tile = qt.dq;             // [tr, dk], summed over the KV tiles
  auto probs = top_rows(ws.probs, kTileRows, kTileCols);      // P [tr, kTileCols]
  auto dscores = top_rows(ws.dscores, kTileRows, kTileCols);  // dP, then dS [tr, kTileCols]
  const int64_t nc = semantics::tile_columns(desc, t0, t0 + tr - 1, nk).end;
  const IndexRange all_see = semantics::tile_full_columns(desc, t0, t0 + tr - 1, nk);
  for_each_rect_in_tile(desc, t0, tr, nk, nc, all_see, c0, [&](const Rect& rc) {
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
      p_row.head(vis) = (p_row.head(vis).array() - qt.lse[r]).exp().matrix();
      // dS = P∘(dP − D)
      ds_row.head(vis) = (p_row.head(vis).array() * (ds_row.head(vis).array() - qt.delta[r])).matrix();
    }
    dv_sum.middleRows(rc.col0, rc.cols).noalias() += p.transpose() * dout_rc;
    dq_tile.middleRows(rc.row0, rc.rows).noalias() += (scale * ds) * k_rc;
    dk_sum.middleRows(rc.col0, rc.cols).noalias() += (scale * ds.transpose()) * q_rc;
  });
}

/// KV tiles that query tile rows [t0, t0 + tr) of a part reach (0: the tile sees no key).
int64_t reached_kv_tiles(const DensePart& part, int64_t t0, int64_t tr) {
  const IndexRange cols = semantics::tile_columns(part.desc, t0, t0 + tr - 1, part.nk);
  return cols.count() == 0 ? 0 : (cols.end + kTileCols - 1) / kTileCols;
}

/// One part for (batch b, kv head g) and the query heads of its group on one thread: the units of each (query
/// head, query tile) in ascending head, tile and KV-tile order. Writes the part's dq rows and leaves its dK, dV
/// sums in pd (unrounded).
template <typename T>
void backward_part(const BackwardArgs& a, Workspace<T>& ws, const PartData<T>& pd, int64_t b, int64_t g,
                   const DensePart& part) {
  const int64_t group = a.q.heads() / a.k.heads();
  prepare_part(a, pd, b, g, part);
  ws.row_max.resize(kTileRows);
  ws.row_sum.resize(kTileRows);
  const QueryTile<T> qt{top_rows(ws.q_tile, kTileRows, a.q.width()), top_rows(ws.dout_tile, kTileRows, a.v.width()),
                        top_rows(ws.dq_tile, kTileRows, a.q.width()), ws.row_max.data(), ws.row_sum.data()};
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t t0 = 0; t0 < part.nq; t0 += kTileRows) {
      const int64_t tr = std::min(kTileRows, part.nq - t0);
      MutableRows dq_out = head_rows(a.dq, b, part.q_begin + t0, tr, h);  // [tr, dk]
      const int64_t tiles = reached_kv_tiles(part, t0, tr);
      if (tiles == 0) {
        dq_out.setZero();
        continue;
      }
      load_query_tile(a, part, b, h, t0, qt);
      auto dq_tile = qt.dq;
      dq_tile.topRows(tr).setZero();
      for (int64_t c = 0; c < tiles; ++c) backward_unit(part, pd, ws, static_cast<T>(a.scale), t0, c * kTileCols, qt);
      store_rounded(dq_out, dq_tile.topRows(tr), a.dtype);
    }
  }
}

/// Per-call state of backward_part_split, kept by the calling thread across calls (as Workspace is). Query tile
/// (h − g·group)·tiles + t owns row block [that·kTileRows, +kTileRows) of q, dout, dq_sum, lse and delta.
template <typename T>
struct SplitState {
  Mat<T> k, v, dk_sum, dv_sum;
  Mat<T> q, dout, dq_sum;
  Vec<T> lse, delta;
};

/// The calling thread's SplitState (grown, never shrunk: at most (2·dk + 2·dv)·nk + group·nq·(2·dk + dv + 2)
/// elements for the largest split block so far).
template <typename T>
SplitState<T>& caller_split_state() {
  thread_local SplitState<T> st;
  return st;
}

/// backward_part with its units spread over `threads` as OpenMP tasks (the order of the accumulation is fixed, so
/// the bits are backward_part's for any thread count). The query tiles are loaded first (in parallel). A unit
/// depends on the one before it in its (query head, query tile) row and on the one before it in its KV-tile
/// column, in backward_part's order; the tasks are created in that order with those two dependences, so every dQ,
/// dK and dV sum adds its terms as backward_part does.
template <typename T>
void backward_part_split(const BackwardArgs& a, SplitState<T>& st, int64_t b, int64_t g, const DensePart& part,
                         int threads) {
  const int64_t group = a.q.heads() / a.k.heads();
  const int64_t q_tiles = (part.nq + kTileRows - 1) / kTileRows;
  const int64_t n_rows = group * q_tiles;  // (query head, query tile) pairs
  const PartData<T> pd{st.k, st.v, st.dk_sum, st.dv_sum};
  prepare_part(a, pd, b, g, part);
  top_rows(st.q, n_rows * kTileRows, a.q.width());
  top_rows(st.dout, n_rows * kTileRows, a.v.width());
  top_rows(st.dq_sum, n_rows * kTileRows, a.q.width()).setZero();
  st.lse.resize(n_rows * kTileRows);
  st.delta.resize(n_rows * kTileRows);
  auto tile = [&](int64_t row) {
    return QueryTile<T>{st.q.middleRows(row * kTileRows, kTileRows), st.dout.middleRows(row * kTileRows, kTileRows),
                        st.dq_sum.middleRows(row * kTileRows, kTileRows), st.lse.data() + row * kTileRows,
                        st.delta.data() + row * kTileRows};
  };
  auto reached = [&](int64_t row) {
    const int64_t t0 = (row % q_tiles) * kTileRows;
    return reached_kv_tiles(part, t0, std::min(kTileRows, part.nq - t0));
  };
  std::vector<char> row_token(static_cast<size_t>(n_rows));  // dependence tokens only
  std::vector<char> col_token(static_cast<size_t>((part.nk + kTileCols - 1) / kTileCols));
  const T scale = static_cast<T>(a.scale);
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int64_t row = 0; row < n_rows; ++row) {
      if (reached(row) == 0) continue;
      load_query_tile(a, part, b, g * group + row / q_tiles, (row % q_tiles) * kTileRows, tile(row));
    }
#pragma omp single
    for (int64_t row = 0; row < n_rows; ++row) {
      const int64_t tiles = reached(row);
      for (int64_t c = 0; c < tiles; ++c) {
        char* row_dep = row_token.data() + row;
        char* col_dep = col_token.data() + c;
#pragma omp task default(none) firstprivate(row, c) shared(part, pd, scale, q_tiles, tile) \
    depend(inout : row_dep[0]) depend(inout : col_dep[0])
        backward_unit(part, pd, thread_workspace<T>(), scale, (row % q_tiles) * kTileRows, c * kTileCols, tile(row));
      }
    }
  }
  for (int64_t row = 0; row < n_rows; ++row) {
    const int64_t t0 = (row % q_tiles) * kTileRows;
    const int64_t tr = std::min(kTileRows, part.nq - t0);
    MutableRows dq_out = head_rows(a.dq, b, part.q_begin + t0, tr, g * group + row / q_tiles);  // [tr, dk]
    if (reached(row) == 0) {
      dq_out.setZero();
    } else {
      store_rounded(dq_out, st.dq_sum.middleRows(row * kTileRows, tr), a.dtype);
    }
  }
}

/// Items (batch, kv head) of a block without a document mask: as many whole items as fill every thread run one per
/// thread (backward_part); the rest, fewer than the threads, run one after the other with their units over all
/// threads (backward_part_split). Both compute the same bits, so the split never shows in the results.
template <typename T>
void backward_dense(const BackwardArgs& a, const DensePart& part, HostTensor& dk, HostTensor& dv, int threads) {
  const int64_t hkv = a.k.heads();
  const int64_t nk = part.nk;
  const int64_t items = a.q.batch() * hkv;
  const int64_t whole = threads <= 1 ? items : items - items % threads;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < whole; ++item) {
    Workspace<T>& ws = thread_workspace<T>();
    const PartData<T> pd{ws.k, ws.v, ws.dk_sum, ws.dv_sum};
    backward_part(a, ws, pd, item / hkv, item % hkv, part);
    store_rounded(head_rows(dk, item / hkv, 0, nk, item % hkv), ws.dk_sum.topRows(nk), a.dtype);
    store_rounded(head_rows(dv, item / hkv, 0, nk, item % hkv), ws.dv_sum.topRows(nk), a.dtype);
  }
  SplitState<T>& st = caller_split_state<T>();
  for (int64_t item = whole; item < items; ++item) {
    backward_part_split(a, st, item / hkv, item % hkv, part, threads);
    store_rounded(head_rows(dk, item / hkv, 0, nk, item % hkv), st.dk_sum.topRows(nk), a.dtype);
    store_rounded(head_rows(dv, item / hkv, 0, nk, item % hkv), st.dv_sum.topRows(nk), a.dtype);
  }
}

template <typename T>
void backward_impl(const BackwardArgs& a, RowRange kv_rows, const BlockParts& bp, HostTensor& dk, HostTensor& dv,
                   int threads) {
  if (!bp.document) {  // one part over the whole block: its sums are the block's
    backward_dense<T>(a, bp.parts.front(), dk, dv, threads);
    return;
  }
  const int64_t hkv = a.k.heads();
  const int64_t group = a.q.heads() / hkv;
  const int64_t nk = kv_rows.count;
  const int64_t items = a.q.batch() * hkv;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t b = item / hkv;
    const int64_t g = item % hkv;
    Workspace<T>& ws = thread_workspace<T>();
    const PartData<T> pd{ws.k, ws.v, ws.dk_sum, ws.dv_sum};
    auto block_dk = top_rows(ws.block_dk, nk, a.q.width());  // [nk, dk], every piece's sum added in
    auto block_dv = top_rows(ws.block_dv, nk, a.v.width());  // [nk, dv]
    block_dk.setZero();  // kv rows that no piece reads keep 0
    block_dv.setZero();
    for (const DensePart& part : bp.parts) {
      backward_part(a, ws, pd, b, g, part);
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
