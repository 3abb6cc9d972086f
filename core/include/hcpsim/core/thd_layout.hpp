#pragma once
/// Packed sequences (qkv_format "thd") with context parallelism: the packing, TE's per-sequence dual-chunk split,
/// the valid (non-padding) tokens of every rank, and hcpsim's local row order.
///
/// A micro-batch of packed sequences holds sequences s = 0 … n−1 of actual lengths L_s, each padded to
/// Lp_s = ⌈L_s / (2·cp)⌉·2·cp tokens (Megatron's THD batch; TE requires cu_seqlens_padded with CP), so the
/// packed length T = Σ Lp_s. cu_seqlens = [0, L_0, L_0 + L_1, …] and cu_seqlens_padded = [0, Lp_0, …] are TE's
/// cumulative offsets. Every sequence is cut into 2·cp chunks of h_s = Lp_s/(2·cp) tokens and flat CP rank g
/// holds chunks g and 2cp−1−g of *every* sequence (TE thd_get_partitioned_indices / thd_partition_src_index,
/// transformer_engine/common/fused_attn/context_parallel.cu). Token x of sequence s (packed index
/// cu_seqlens_padded[s] + x) is valid iff x < L_s; the others are padding.
///
/// hcpsim's row order of a rank's buffers ("halves-major") is a permutation of TE's: first the first chunk of every
/// sequence in packing order, then the second chunk of every sequence, so the rows [0, s/2) are the first halves
/// and [s/2, s) the second halves exactly as in bshd and every ring section is one row range (docs/algorithm.md
/// "THD layout"). After the a2a of an [A, P] layout each sequence's super-chunks p and 2P−1−p (A·h_s tokens each)
/// take the places of the two chunks. TE's own order of a rank's tokens is thd_partitioned_indices.

#include <cstdint>
#include <vector>

namespace hcpsim {

/// The packing of one THD micro-batch. Empty seq_lengths = not THD (bshd/sbhd).
struct PackedSequences {
  std::vector<int64_t> seq_lengths;         ///< actual lengths L_s, packing order, each ≥ 1
  std::vector<int64_t> seq_lengths_padded;  ///< Lp_s, multiples of 2·cp, Lp_s ≥ L_s
  /// TE's pad_between_seqs as resolved for the run: true = per-step valid lengths from the padded offsets (TE
  /// get_cu_seqlens_on_cp_rank); false = per-step lengths cu_seqlens // cp_size, which is exact only when no
  /// sequence is padded. Source: TE context_parallel.py cp_p2p_fwd_prepare_qkv.
  bool pad_between_seqs = true;

  [[nodiscard]] bool thd() const { return !seq_lengths.empty(); }
  [[nodiscard]] int64_t num_sequences() const { return static_cast<int64_t>(seq_lengths.size()); }
  /// TE cu_seqlens: n + 1 cumulative actual lengths.
  [[nodiscard]] std::vector<int64_t> cu_seqlens() const;
  /// TE cu_seqlens_padded: n + 1 cumulative padded lengths.
  [[nodiscard]] std::vector<int64_t> cu_seqlens_padded() const;
  /// T = Σ Lp_s, the packed (and model.seq_length) length.
  [[nodiscard]] int64_t total_padded() const;
  /// True when some sequence is padded (Lp_s > L_s).
  [[nodiscard]] bool has_padding() const;
  /// True when only the last sequence is padded: the case TE's old pad_between_seqs auto-detection
  /// (cu_seqlens_padded[:-1] vs cu_seqlens[:-1], TE #3331) missed.
  [[nodiscard]] bool only_tail_padded() const;
};

/// Each length rounded up to a multiple of `multiple` (≥ 1): Megatron pads every packed sequence to a multiple of
/// 2·cp (TE pad_thd_sequences_for_cp, divisibility_factor = 2·cp).
std::vector<int64_t> pad_sequence_lengths(const std::vector<int64_t>& seq_lengths, int64_t multiple);

/// TE thd_get_partitioned_indices(cu_seqlens_padded, T, cp, rank): the packed indices flat CP rank `cp_rank`
/// holds, in TE's order (per sequence: its chunk cp_rank, then its chunk 2cp−1−cp_rank). TE's docstring example
/// (context_parallel.py): cu_seqlens_padded = [0, 8, 16, 24, 40], cp = 4, rank 0 → 0 7 8 15 16 23 24 25 38 39.
/// @param cu_seqlens_padded  n + 1 offsets, every difference a multiple of 2·cp (HCPSIM_ASSERT).
std::vector<int64_t> thd_partitioned_indices(const std::vector<int64_t>& cu_seqlens_padded, int64_t cp_size,
                                             int64_t cp_rank);

/// Valid tokens of the two chunks of one sequence on one rank.
struct ThdHalfValid {
  int64_t first = 0;   ///< valid tokens of chunk rank (a prefix of it)
  int64_t second = 0;  ///< valid tokens of chunk 2cp−1−rank (a prefix of it)
};

/// TE get_cu_seqlens_on_cp_rank (context_parallel.py) per sequence, with half = Lp_s/(2·cp):
/// first = clamp(L_s − rank·half, 0, half), second = clamp(L_s − (2cp−rank−1)·half, 0, half).
std::vector<ThdHalfValid> thd_valid_on_cp_rank(const PackedSequences& packing, int64_t cp_size, int64_t cp_rank);

/// The valid tokens under per-step lengths cu_seqlens // cp_size (pad_between_seqs false, or TE #1930 when
/// cu_seqlens_padded is not honoured): the first ⌊L_s / cp⌋ tokens of the rank's local sequence (its chunk rank,
/// then its chunk 2cp−1−rank) count as valid, whatever their position.
std::vector<ThdHalfValid> thd_floor_valid_on_cp_rank(const PackedSequences& packing, int64_t cp_size);

/// Rows of a buffer holding consecutive packed tokens of one sequence: rows [.., + rows) hold packed indices
/// position, position + 1, …; segment = the sequence index, or −1 for padding (never attends or is attended).
struct TokenRun {
  int64_t rows = 0;
  int64_t segment = -1;
  int64_t position = 0;
};

/// The THD layout of one CP group: an [A, P] layout over a packing. Ring-level ranks are p2p ranks p ∈ [0, P);
/// the valid-token rule is applied at the ring level, as TE's p2p ring sees it after the a2a (it divides
/// cu_seqlens_padded by P and uses cp_size = P, context_parallel.py AttnFuncWithCPAndKVP2P.forward).
class ThdLayout {
 public:
  /// Which valid-token rule the ring's kernels use.
  enum class ValidRule {
    padded,  ///< exact: token x of sequence s is valid iff x < L_s (pad_between_seqs true)
    floor,   ///< per-step lengths cu_seqlens // P (thd_floor_valid_on_cp_rank at the ring level)
  };

  /// @param packing  THD packing whose padded lengths are multiples of 2·A·P (HCPSIM_ASSERT).
  ThdLayout(int64_t a2a_size, int64_t p2p_size, PackedSequences packing, ValidRule rule);

  [[nodiscard]] const PackedSequences& packing() const { return packing_; }
  [[nodiscard]] ValidRule rule() const { return rule_; }
  /// h_s = Lp_s / (2·A·P): rows of one chunk of every sequence on one rank before the a2a (AllToAllOp
  /// seq_half_rows).
  [[nodiscard]] const std::vector<int64_t>& seq_half_rows() const { return half_rows_; }
  /// Packed indices of flat rank g's rows before the a2a, halves-major (T/cp rows).
  [[nodiscard]] std::vector<int64_t> tokens_before_a2a(int64_t cp_rank) const;
  /// Packed indices of the rows every member of a2a group p holds after the a2a, halves-major (T/P rows).
  [[nodiscard]] std::vector<int64_t> post_a2a_tokens(int64_t p2p_rank) const;
  /// The runs of post_a2a_tokens(p): every row's sequence and position, padding (by `rule`) as segment −1.
  [[nodiscard]] std::vector<TokenRun> post_a2a_runs(int64_t p2p_rank) const;
  /// Runs of the packed sequence in natural order [0, T) with the exact rule (the reference's mask).
  [[nodiscard]] std::vector<TokenRun> global_runs() const;

 private:
  int64_t a2a_size_;
  int64_t p2p_size_;
  PackedSequences packing_;
  ValidRule rule_;
  std::vector<int64_t> half_rows_;
  std::vector<int64_t> cu_padded_;
};

/// The runs covering rows [begin, begin + count) of a buffer whose rows are described by `runs` (cut at the range's
/// ends; positions advance with the cut). HCPSIM_ASSERT if the range leaves the runs.
std::vector<TokenRun> slice_runs(const std::vector<TokenRun>& runs, int64_t begin, int64_t count);

/// Total rows of `runs`.
int64_t runs_rows(const std::vector<TokenRun>& runs);

}  // namespace hcpsim
