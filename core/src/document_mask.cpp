// The document mask of a THD attention block (document_mask.hpp): visibility, the dense pieces a kernel runs, and
// the pair counts of the cost model.
#include "hcpsim/core/document_mask.hpp"

#include <algorithm>
#include <utility>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

namespace {

using semantics::IndexRange;
using semantics::MaskDesc;
using semantics::MaskKind;

/// A key run placed in the block: its first block row, rows and first position.
struct PlacedRun {
  int64_t row = 0;
  int64_t rows = 0;
  int64_t position = 0;
};

/// The key runs of every segment, each list ascending in position: (segment, runs) sorted by segment.
std::vector<std::pair<int64_t, std::vector<PlacedRun>>> kv_runs_by_segment(const std::vector<TokenRun>& kv) {
  std::vector<std::pair<int64_t, std::vector<PlacedRun>>> by_seg;
  std::vector<std::pair<int64_t, PlacedRun>> flat;
  int64_t row = 0;
  for (const TokenRun& r : kv) {
    if (r.segment >= 0 && r.rows > 0) flat.push_back({r.segment, PlacedRun{row, r.rows, r.position}});
    row += r.rows;
  }
  std::stable_sort(flat.begin(), flat.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second.position < b.second.position;
  });
  for (const auto& [seg, run] : flat) {
    if (by_seg.empty() || by_seg.back().first != seg) by_seg.push_back({seg, {}});
    by_seg.back().second.push_back(run);
  }
  return by_seg;
}

const std::vector<PlacedRun>* runs_of(const std::vector<std::pair<int64_t, std::vector<PlacedRun>>>& by_seg,
                                      int64_t segment) {
  auto it = std::lower_bound(by_seg.begin(), by_seg.end(), segment,
                             [](const auto& e, int64_t s) { return e.first < s; });
  return it != by_seg.end() && it->first == segment ? &it->second : nullptr;
}

/// Keys of `runs` (ascending, disjoint positions) that a query at position x sees.
int64_t visible_count(const std::vector<PlacedRun>& runs, bool causal, int64_t x) {
  int64_t n = 0;
  for (const PlacedRun& k : runs) n += causal ? std::clamp<int64_t>(x - k.position + 1, 0, k.rows) : k.rows;
  return n;
}

/// (Query run, key run) pairs in closed form: row i sees clamp(i + 1 + xq − xk, 0, nk) keys when causal.
int64_t run_pairs(int64_t nq, int64_t xq, const PlacedRun& k, bool causal) {
  if (!causal) return nq * k.rows;
  return semantics::block_pairs(MaskDesc{MaskKind::causal, xq - k.position}, nq, k.rows);
}

/// Appends the pieces of one query run (rows [row0, row0 + n), positions from x0) against its segment's keys.
void append_run_pieces(std::vector<DocumentMaskPiece>& out, int64_t row0, int64_t n, int64_t x0,
                       const std::vector<PlacedRun>& runs, bool causal) {
  std::vector<IndexRange> ranges;
  for (const PlacedRun& k : runs) ranges.push_back(IndexRange{k.row, k.row + k.rows});
  int64_t i = 0;
  while (i < n) {
    const int64_t v = visible_count(runs, causal, x0 + i);
    if (v == 0) {
      ++i;
      continue;
    }
    // Extend while the count grows by one per row (a causal diagonal) or stays (full), whichever the next row says.
    const int64_t step = i + 1 < n ? visible_count(runs, causal, x0 + i + 1) - v : 0;
    int64_t j = i + 1;
    int64_t last = v;
    if (step == 0 || step == 1) {
      while (j < n && visible_count(runs, causal, x0 + j) == last + step) {
        last += step;
        ++j;
      }
    }
    DocumentMaskPiece piece;
    piece.q_begin = row0 + i;
    piece.q_count = j - i;
    piece.kv_ranges = ranges;
    piece.kv_count = last;
    piece.desc = step == 1 ? MaskDesc{MaskKind::causal, v - 1} : MaskDesc{MaskKind::full, 0};
    if (step != 1) piece.kv_count = v;
    out.push_back(std::move(piece));
    i = j;
  }
}

/// Segment and position of block row r of `runs`.
std::pair<int64_t, int64_t> token_of(const std::vector<TokenRun>& runs, int64_t r) {
  int64_t row = 0;
  for (const TokenRun& t : runs) {
    if (r < row + t.rows) return {t.segment, t.position + (r - row)};
    row += t.rows;
  }
  HCPSIM_ASSERT(false, "document mask: row outside the runs");
}

}  // namespace

const DocumentMask& SharedDocumentMask::get() const {
  static const DocumentMask none;
  return ptr_ ? *ptr_ : none;
}

bool operator==(const DocumentMask& a, const DocumentMask& b) {
  auto same = [](const std::vector<TokenRun>& x, const std::vector<TokenRun>& y) {
    return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(), [](const TokenRun& l, const TokenRun& r) {
             return l.rows == r.rows && l.segment == r.segment && l.position == r.position;
           });
  };
  return same(a.q, b.q) && same(a.kv, b.kv);
}

bool document_visible(const DocumentMask& mask, bool causal, int64_t r, int64_t c) {
  const auto [sq, xq] = token_of(mask.q, r);
  const auto [sk, xk] = token_of(mask.kv, c);
  return sq >= 0 && sq == sk && (!causal || xk <= xq);
}

std::vector<DocumentMaskPiece> document_mask_pieces(const DocumentMask& mask, bool causal) {
  const auto by_seg = kv_runs_by_segment(mask.kv);
  std::vector<DocumentMaskPiece> pieces;
  int64_t row = 0;
  for (const TokenRun& q : mask.q) {
    const auto* runs = q.segment >= 0 ? runs_of(by_seg, q.segment) : nullptr;
    if (runs != nullptr) append_run_pieces(pieces, row, q.rows, q.position, *runs, causal);
    row += q.rows;
  }
  return pieces;
}

std::vector<DocumentSubBlock> document_sub_blocks(const DocumentMask& mask, bool causal) {
  const auto by_seg = kv_runs_by_segment(mask.kv);
  std::vector<DocumentSubBlock> subs;  // one per segment with keys, in segment order
  for (const auto& [seg, runs] : by_seg) {
    DocumentSubBlock b;
    b.segment = seg;
    for (const PlacedRun& k : runs) b.kv_rows += k.rows;
    subs.push_back(b);
  }
  for (const TokenRun& q : mask.q) {
    if (q.segment < 0) continue;
    const auto* runs = runs_of(by_seg, q.segment);
    if (runs == nullptr) continue;
    auto it = std::lower_bound(subs.begin(), subs.end(), q.segment,
                               [](const DocumentSubBlock& b, int64_t s) { return b.segment < s; });
    it->q_rows += q.rows;
    for (const PlacedRun& k : *runs) it->pairs += run_pairs(q.rows, q.position, k, causal);
  }
  std::vector<DocumentSubBlock> out;
  for (const DocumentSubBlock& b : subs) {
    if (b.pairs > 0) out.push_back(b);
  }
  return out;
}

int64_t document_mask_pairs(const DocumentMask& mask, bool causal) {
  int64_t pairs = 0;
  for (const DocumentSubBlock& b : document_sub_blocks(mask, causal)) pairs += b.pairs;
  return pairs;
}

}  // namespace hcpsim
