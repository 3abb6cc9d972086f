#pragma once
/// Hierarchical context-parallel layout: flat CP ranks, a2a/p2p groups, zigzag chunks, post-a2a order,
/// and placement of global ranks on nodes. Source: docs/algorithm.md §2–§3 (Megatron
/// parallel_state.create_hierarchical_groups, get_batch_on_this_cp_rank; TE context_parallel.py L236-295).

#include <cstdint>
#include <string>
#include <vector>

namespace hcpsim {

/// CP ranks that are equivalent for timing, with one representative per class: the a2a groups {pA, …, pA+A−1}
/// of a layout, representative pA (a2a_rank 0), position a = a2a_rank. They are classes only where the variant
/// says its a2a groups are symmetric (CpVariant::symmetric_a2a_groups) and the cluster maps the positions of a
/// class onto equivalent GPUs (the simulator checks that; docs/simulator.md "Symmetry reduction").
struct CpSymmetryClasses {
  std::vector<std::vector<int64_t>> classes;  ///< each class's flat CP ranks in position order; [k][0] represents it
  std::vector<int64_t> class_of;              ///< class index of each flat CP rank
  std::vector<int64_t> position_of;           ///< position of each flat CP rank in its class

  /// The representative of `cp_rank`'s class.
  [[nodiscard]] int64_t representative(int64_t cp_rank) const {
    return classes[static_cast<size_t>(class_of[static_cast<size_t>(cp_rank)])][0];
  }
  /// Position of `cp_rank` in its class (0 = the representative).
  [[nodiscard]] int64_t position(int64_t cp_rank) const { return position_of[static_cast<size_t>(cp_rank)]; }
  /// The member at `position` of `cp_rank`'s class.
  [[nodiscard]] int64_t image(int64_t cp_rank, int64_t position) const {
    return classes[static_cast<size_t>(class_of[static_cast<size_t>(cp_rank)])][static_cast<size_t>(position)];
  }
  /// Every class's representative, in class order.
  [[nodiscard]] std::vector<int64_t> representatives() const;
  /// Ranks per class (every class has the same size).
  [[nodiscard]] int64_t class_size() const { return classes.empty() ? 1 : static_cast<int64_t>(classes[0].size()); }
};

/// The CP layout of one attention layer. A = a2a size (level 0), P = p2p size (level 1), cp = A·P.
/// Flat CP rank g = p·A + a, with a = a2a_rank ∈ [0,A), p = p2p_rank ∈ [0,P).
/// Chunks: the sequence of S tokens is cut into 2·cp chunks of c = S/(2cp) tokens; rank g holds chunks g and
/// 2cp−1−g (zigzag). After the a2a, every member of a2a group p holds super-chunks p and 2P−1−p
/// (C = A·c tokens each) for head group a.
class CpLayout {
 public:
  /// @param a2a_size  A ≥ 1;  @param p2p_size  P ≥ 1;  @param seq_length  S, divisible by 2·A·P.
  /// Preconditions are checked with HCPSIM_ASSERT (validation has already rejected bad input).
  CpLayout(int64_t a2a_size, int64_t p2p_size, int64_t seq_length);

  [[nodiscard]] int64_t a2a_size() const { return a2a_size_; }
  [[nodiscard]] int64_t p2p_size() const { return p2p_size_; }
  [[nodiscard]] int64_t cp_size() const { return a2a_size_ * p2p_size_; }
  [[nodiscard]] int64_t seq_length() const { return seq_length_; }
  /// c = S / (2·cp) tokens.
  [[nodiscard]] int64_t chunk_size() const { return seq_length_ / (2 * cp_size()); }
  /// C = A·c = S / (2P) tokens.
  [[nodiscard]] int64_t super_chunk_size() const { return a2a_size_ * chunk_size(); }

  [[nodiscard]] int64_t a2a_rank(int64_t cp_rank) const { return cp_rank % a2a_size_; }
  [[nodiscard]] int64_t p2p_rank(int64_t cp_rank) const { return cp_rank / a2a_size_; }
  [[nodiscard]] int64_t cp_rank(int64_t p2p_rank, int64_t a2a_rank) const { return p2p_rank * a2a_size_ + a2a_rank; }

  /// CP ranks of a2a group p: {pA, …, pA+A−1} (contiguous; Megatron level 0).
  [[nodiscard]] std::vector<int64_t> a2a_group(int64_t p2p_rank) const;
  /// CP ranks of p2p group (ring) a: {a, a+A, …, a+(P−1)A} (stride A; Megatron level 1).
  [[nodiscard]] std::vector<int64_t> p2p_group(int64_t a2a_rank) const;

  /// The two zigzag chunk ids of flat rank g: {g, 2cp−1−g}.
  [[nodiscard]] std::vector<int64_t> zigzag_chunks(int64_t cp_rank) const;
  /// Global token positions held by flat rank g before the a2a (2c tokens, chunk g then chunk 2cp−1−g).
  [[nodiscard]] std::vector<int64_t> tokens_before_a2a(int64_t cp_rank) const;
  /// Chunk ids held by every member of a2a group p after the forward a2a, in local order: the members' chunks
  /// (2A of them, index 2j+half) permuted by chunk_ids_before_attn(A). Derived from the table, not assumed.
  [[nodiscard]] std::vector<int64_t> post_a2a_chunks(int64_t p2p_rank) const;
  /// Global token positions of post_a2a_chunks(p) (S/P tokens).
  [[nodiscard]] std::vector<int64_t> post_a2a_tokens(int64_t p2p_rank) const;

  /// The layout's timing-symmetry classes: its a2a groups (a2a_group_classes(A, P)).
  [[nodiscard]] CpSymmetryClasses symmetry_classes() const { return a2a_group_classes(a2a_size_, p2p_size_); }
  /// The a2a groups of any [A, P] layout as symmetry classes (they do not depend on the sequence length).
  static CpSymmetryClasses a2a_group_classes(int64_t a2a_size, int64_t p2p_size);

  /// TE get_seq_chunk_ids_for_reordering_before_attn(n): before[r] = 2r, before[r+n] = 2n−2r−1.
  static std::vector<int64_t> chunk_ids_before_attn(int64_t n);
  /// TE get_seq_chunk_ids_for_reordering_after_attn(n): after[2r] = r, after[2r+1] = 2n−r−1.
  static std::vector<int64_t> chunk_ids_after_attn(int64_t n);

 private:
  int64_t a2a_size_;
  int64_t p2p_size_;
  int64_t seq_length_;
};

/// Megatron rank order, e.g. "tp-cp-ep-dp-pp": the first dimension varies fastest in the global rank.
/// Source: megatron/core/parallel_state.py RankGenerator (order default "tp-cp-ep-dp-pp").
struct ParallelSizes {
  int64_t tp = 1, cp = 1, ep = 1, dp = 1, pp = 1;
};

/// Global rank of the GPU holding (tp, cp, dp, pp) coordinates under `order`; ep coordinate 0. A dimension the order
/// leaves out must have size 1 (Megatron's RankGenerator appends it; a size-1 dimension moves no rank).
/// @throws InputError is not raised here: `order` must already be validated (see is_valid_parallel_order).
int64_t global_rank(const std::string& order, const ParallelSizes& sizes, int64_t tp_rank, int64_t cp_rank,
                    int64_t dp_rank, int64_t pp_rank);

/// True when `order` is '-'-separated names of tp, cp, ep, dp, pp, each at most once, in any case (Megatron's
/// RankGenerator lower-cases it and appends a left-out dimension of size 1; a left-out dimension of another size is
/// the caller's check, with parallel_order_names). Source: megatron/core/parallel_state.py RankGenerator.__init__.
bool is_valid_parallel_order(const std::string& order);

/// Whether a valid `order` names `dimension` ("tp", "cp", "ep", "dp" or "pp").
bool parallel_order_names(const std::string& order, const std::string& dimension);

/// Megatron's RankGenerator rule "The ep and dp must be adjacent in order": true when the order has no ep, or ep
/// stands next to dp.
bool parallel_order_ep_next_to_dp(const std::string& order);

/// Where one CP rank of a CP group runs.
struct CpRankPlacement {
  int64_t cp_rank = 0;
  int64_t global_rank = 0;
  int64_t node = 0;       ///< global_rank / gpus_per_node
  int64_t local_gpu = 0;  ///< global_rank % gpus_per_node
};

/// Placement of the first CP group, coordinates (tp_rank, dp_rank, pp_rank) = (0, 0, 0), on nodes of
/// `gpus_per_node` GPUs, by Megatron's rank order. Other CP groups are shifted copies; when TP·CP does not align
/// with node boundaries they may cross nodes differently (validation warns about such a2a groups).
/// Source: docs/algorithm.md §2.2 "Node mapping" (G = t + TP·g + TP·CP·d + … for tp-cp-ep-dp-pp).
std::vector<CpRankPlacement> place_cp_group(const std::string& order, const ParallelSizes& sizes,
                                            int64_t gpus_per_node);

}  // namespace hcpsim
