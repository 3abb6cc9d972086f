#pragma once
/// Which heads the oracle checks (a scenario's `oracle.heads`): every head, or the first N q-heads of each a2a
/// member with their KV heads, so that a long sequence can be verified at a fraction of the cost while every
/// a2a member, every ring step and every GQA group shape is still exercised.

#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/oracles/verify.hpp"

namespace hcpsim {

/// The checked heads of one comm type: the schedule's shape and the full-model head of each schedule head.
struct HeadSelection {
  AttentionShape shape;                    ///< `full` with heads_q / heads_kv reduced to the checked heads
  std::vector<int64_t> q_heads, kv_heads;  ///< full-model head indices in schedule order; empty = all heads
};

/// Selects the heads to check.
/// @param full      the per-TP-rank attention problem (heads_q = H, heads_kv = Hkv; H/Hkv an integer).
/// @param a2a_size  A of the comm type (1 for p2p and all_gather); A divides H and Hkv (validation).
/// @param heads     "all", or a decimal count N ≥ 1 (the loader validated it): the first N q-heads of each a2a
///   member, capped at H/A and rounded up to whole KV groups (H/Hkv heads), and their KV heads. When that covers
///   every head of a member the selection is "all" (empty index lists).
/// Head h of a2a member a is full-model head a·(H/A) + h; KV head j of member a is a·(Hkv/A) + j, which is how the
/// a2a scatters heads over its members (docs/algorithm.md §3.2).
HeadSelection select_heads(const AttentionShape& full, int64_t a2a_size, const std::string& heads);

/// The oracle's options: seed and input distribution (`oracle.seed`, `oracle.input_distribution`), the head
/// subset of `selection` within the full problem `full`, and the executor's dtype and thread count.
VerifyOptions verify_options(const HeadSelection& selection, const AttentionShape& full, uint64_t seed,
                             const std::string& input_distribution, Dtype dtype, int threads);

}  // namespace hcpsim
