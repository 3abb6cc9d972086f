#pragma once
/// The packed sequences (qkv_format thd) of a scenario: the actual lengths from `model.packed_sequence_lengths` or
/// the `model.packing` generator, their padding to multiples of 2·context_parallel_size (Megatron's THD batch, TE
/// pad_thd_sequences_for_cp) and TE's pad_between_seqs as resolved for the run. The rules between these keys are
/// validation's (validation.hpp); these functions only compute.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/core/thd_layout.hpp"

namespace hcpsim {

/// The `model.packing` generator's lengths: length i (i = 0 … n−1) = min_length + w_i mod (max_length − min_length
/// + 1), with w_i = splitmix64(seed + (i + 1)·0x9e3779b97f4a7c15) the i-th word of the SplitMix64 stream of `seed`
/// (Steele, Lea, Flood 2014; Vigna's splitmix64.c), the generator oracle inputs also use. Only unsigned 64-bit
/// arithmetic, so the lengths are the same on every platform and compiler (std::uniform_int_distribution's are
/// not). The modulo's bias (< (max − min + 1)/2^64) is immaterial for lengths.
/// @param g  num_sequences ≥ 1, 1 ≤ min_length ≤ max_length (HCPSIM_ASSERT; validation checks the keys first).
std::vector<int64_t> generate_packed_lengths(const PackingGenerator& g);

/// A rule that one of the THD keys of a model breaks on its own (a length < 1, an empty list, a generator range
/// that is empty or too large): the key, the problem and the fix.
struct ThdKeyProblem {
  std::string key, problem, fix;
};

/// The first form problem of the THD keys of `m` (whatever qkv_format says), or std::nullopt.
std::optional<ThdKeyProblem> thd_key_problem(const ModelConfig& m);

/// The actual lengths of `m`'s packed sequences: packed_sequence_lengths, else the generator's, else {} (also {}
/// when thd_key_problem(m) reports a problem).
std::vector<int64_t> packed_actual_lengths(const ModelConfig& m);

/// The packing of `scenario` as the schedule builders take it (AttentionShape::packing): the actual lengths, each
/// padded to a multiple of 2·context_parallel_size, and pad_between_seqs resolved (auto → true exactly when some
/// sequence is padded). Empty (not THD) when qkv_format is not thd, the lengths are missing or malformed, or
/// context_parallel_size < 1.
PackedSequences scenario_packing(const Scenario& scenario);

/// The packed length T the scenario's model.seq_length must equal: scenario_packing(scenario).total_padded()
/// (0 when it is empty).
int64_t thd_seq_length(const Scenario& scenario);

}  // namespace hcpsim
