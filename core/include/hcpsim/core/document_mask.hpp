#pragma once
/// The document mask of a packed-sequence (THD) attention block, defined once: which packed token every query and
/// key row of the block holds, and which pairs see each other. The oracle's kernels, the reference, the FLOP counts
/// and the cost model all use it (host only; the GPU backend rejects THD schedules).
///
/// Visibility: query row r (segment s_r, position x_r) sees key row c (s_c, x_c) iff s_r ≥ 0, s_r = s_c and, for a
/// causal block, x_c ≤ x_r. A row of segment −1 (padding) sees nothing and is seen by nothing. A query row that
/// sees no key is empty: out = 0, softmax_lse = −inf, and its gradients are 0 (semantics.hpp defines the merges
/// of empty states). This is TE's padding_causal (diagonal step) and padding (lower / upper steps) mask with
/// cu_seqlens per sequence (context_parallel.py cp_p2p_fwd_fused_attn).

#include <cstdint>
#include <memory>
#include <vector>

#include "hcpsim/core/semantics.hpp"
#include "hcpsim/core/thd_layout.hpp"

namespace hcpsim {

/// The token runs of a block's query rows and key rows (each list covers its rows exactly, in row order). Empty
/// q and kv = no document mask (bshd: the block's BlockMask alone decides).
struct DocumentMask {
  std::vector<TokenRun> q;
  std::vector<TokenRun> kv;
  [[nodiscard]] bool empty() const { return q.empty() && kv.empty(); }
  friend bool operator==(const DocumentMask& a, const DocumentMask& b);
};

/// A block op's DocumentMask (AttnFwdBlockOp::doc, AttnBwdBlockOp::doc), shared by the copies of the op and held
/// by one pointer: 16 bytes in the op instead of 48, and nothing at all when there is no document mask (bshd, every
/// op of a non-THD schedule). Immutable once built. Converts implicitly from and to a DocumentMask.
class SharedDocumentMask {
 public:
  SharedDocumentMask() = default;
  /// Holds `mask`; an empty mask is held as no mask.
  SharedDocumentMask(DocumentMask mask)  // NOLINT(google-explicit-constructor): builders pass a DocumentMask
      : ptr_(mask.empty() ? nullptr : std::make_shared<const DocumentMask>(std::move(mask))) {}
  /// The mask (an empty one when none is held).
  [[nodiscard]] const DocumentMask& get() const;
  operator const DocumentMask&() const { return get(); }  // NOLINT(google-explicit-constructor)
  [[nodiscard]] bool empty() const { return ptr_ == nullptr; }
  friend bool operator==(const SharedDocumentMask& a, const SharedDocumentMask& b) { return a.get() == b.get(); }

 private:
  std::shared_ptr<const DocumentMask> ptr_;
};

/// Whether block row r sees block column c under `mask` (the definition above; r, c inside the runs).
bool document_visible(const DocumentMask& mask, bool causal, int64_t r, int64_t c);

/// One piece of a document-masked block that a dense kernel runs: query rows [q_begin, q_begin + q_count) of the
/// block see the key rows `kv_ranges` (block rows, gathered in this order into kv_count columns, ascending in
/// position) through `desc` (a semantics::MaskDesc over the gathered columns: full, or causal with a diagonal).
struct DocumentMaskPiece {
  int64_t q_begin = 0;
  int64_t q_count = 0;
  std::vector<semantics::IndexRange> kv_ranges;
  int64_t kv_count = 0;
  semantics::MaskDesc desc;
};

/// The pieces of a document-masked block: every query row that sees at least one key is in exactly one piece,
/// with exactly the keys it sees (document_visible); rows in no piece are empty. Pieces are in row order.
std::vector<DocumentMaskPiece> document_mask_pieces(const DocumentMask& mask, bool causal);

/// Number of (query, key) pairs the block computes: Σ over pieces of semantics::block_pairs(desc, q_count,
/// kv_count), in closed form per (query run, key run) pair.
int64_t document_mask_pairs(const DocumentMask& mask, bool causal);

/// The per-sequence sub-blocks a varlen kernel (FlashAttention / cuDNN with cu_seqlens) runs: for every
/// segment, its query rows, key rows and visible pairs in the block. In segment order; segments with no pair
/// are left out.
struct DocumentSubBlock {
  int64_t segment = 0;
  int64_t q_rows = 0;
  int64_t kv_rows = 0;
  int64_t pairs = 0;
};
std::vector<DocumentSubBlock> document_sub_blocks(const DocumentMask& mask, bool causal);

}  // namespace hcpsim
