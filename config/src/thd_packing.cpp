#include "hcpsim/config/thd_packing.hpp"

#include "hcpsim/core/error.hpp"

namespace hcpsim {
namespace {

// Bounds that keep every padded total exact in int64 and a schedule's document masks small: at most 2^14
// sequences per micro-batch (a 1M-token micro-batch of 64-token sequences; every attention block carries a run per
// sequence and chunk, so 10^5 sequences took 7.6 GB in `simulate`), of at most 2^34 tokens (the packed total is
// then checked against the seq_length bound in validation_thd.cpp).
constexpr int64_t kMaxSequences = int64_t{1} << 14;
constexpr int64_t kMaxLength = int64_t{1} << 34;

/// SplitMix64's increment (2^64 / φ) and output function. Source: Steele, Lea, Flood 2014; Vigna's splitmix64.c.
constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;
uint64_t splitmix64_mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string str(int64_t v) { return std::to_string(v); }

std::optional<ThdKeyProblem> lengths_problem(const std::vector<int64_t>& lengths) {
  const std::string key = "model.packed_sequence_lengths";
  if (lengths.empty()) return ThdKeyProblem{key, "the list is empty", "give the actual length of every packed sequence"};
  if (static_cast<int64_t>(lengths.size()) > kMaxSequences)
    return ThdKeyProblem{key, str(static_cast<int64_t>(lengths.size())) + " sequences are more than hcpsim models (at most " +
                                  str(kMaxSequences) + ")",
                         "pack at most " + str(kMaxSequences) + " sequences per micro-batch"};
  for (size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 1 || lengths[i] > kMaxLength)
      return ThdKeyProblem{key,
                           "entry " + str(static_cast<int64_t>(i)) + " is " + str(lengths[i]) +
                               " (every actual length must be from 1 to " + str(kMaxLength) + ")",
                           lengths[i] < 1 ? "give actual sequence lengths of at least 1 token; padding is added by hcpsim"
                                          : "give the real length of the sequence, at most " + str(kMaxLength)};
  return std::nullopt;
}

std::optional<ThdKeyProblem> generator_problem(const PackingGenerator& g) {
  if (g.num_sequences < 1 || g.num_sequences > kMaxSequences)
    return ThdKeyProblem{"model.packing.num_sequences",
                         "must be from 1 to " + str(kMaxSequences) + ", got " + str(g.num_sequences),
                         "give the number of packed sequences of one micro-batch, from 1 to " + str(kMaxSequences)};
  if (g.min_length < 1 || g.min_length > kMaxLength)
    return ThdKeyProblem{"model.packing.min_length",
                         "must be from 1 to " + str(kMaxLength) + ", got " + str(g.min_length),
                         "give the shortest actual length, at least 1"};
  if (g.max_length < g.min_length || g.max_length > kMaxLength)
    return ThdKeyProblem{"model.packing.max_length",
                         "must be from min_length " + str(g.min_length) + " to " + str(kMaxLength) + ", got " +
                             str(g.max_length),
                         "give max_length >= min_length"};
  return std::nullopt;
}

}  // namespace

std::vector<int64_t> generate_packed_lengths(const PackingGenerator& g) {
  HCPSIM_ASSERT(!generator_problem(g), "generate_packed_lengths: invalid generator");
  const uint64_t span = static_cast<uint64_t>(g.max_length - g.min_length) + 1;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(g.num_sequences));
  for (int64_t i = 0; i < g.num_sequences; ++i) {
    // Unsigned arithmetic wraps mod 2^64 by definition: the same words everywhere.
    const uint64_t w = splitmix64_mix(g.seed + (static_cast<uint64_t>(i) + 1) * kGoldenGamma);
    out.push_back(g.min_length + static_cast<int64_t>(w % span));
  }
  return out;
}

std::optional<ThdKeyProblem> thd_key_problem(const ModelConfig& m) {
  if (m.packed_sequence_lengths)
    if (auto p = lengths_problem(*m.packed_sequence_lengths)) return p;
  if (m.packing)
    if (auto p = generator_problem(*m.packing)) return p;
  return std::nullopt;
}

std::vector<int64_t> packed_actual_lengths(const ModelConfig& m) {
  if (thd_key_problem(m)) return {};
  if (m.packed_sequence_lengths) return *m.packed_sequence_lengths;
  if (m.packing) return generate_packed_lengths(*m.packing);
  return {};
}

PackedSequences scenario_packing(const Scenario& s) {
  PackedSequences p;
  const int64_t cp = s.parallel.context_parallel_size;
  if (s.model.qkv_format != QkvFormat::thd || cp < 1) return p;
  p.seq_lengths = packed_actual_lengths(s.model);
  if (p.seq_lengths.empty()) return p;
  // Source: TE pad_thd_sequences_for_cp (divisibility_factor = 2·cp); Megatron pads each packed sequence so.
  p.seq_lengths_padded = pad_sequence_lengths(p.seq_lengths, 2 * cp);
  // Source: TE dot_product_attention.py: pad_between_seqs is detected when cu_seqlens_padded differs from
  // cu_seqlens, i.e. when some sequence is padded (hcpsim always supplies cu_seqlens_padded with CP).
  p.pad_between_seqs = s.model.pad_between_seqs.value_or(p.has_padding());
  return p;
}

int64_t thd_seq_length(const Scenario& s) {
  const PackedSequences p = scenario_packing(s);
  return p.thd() ? p.total_padded() : 0;
}

}  // namespace hcpsim
