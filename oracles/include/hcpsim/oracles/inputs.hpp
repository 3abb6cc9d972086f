#pragma once
/// Deterministic oracle inputs: every value is a pure function of (seed, tensor tag, flat element index), so any
/// backend, rank or subset regenerates exactly the same bits without communication (docs/architecture.md "Conventions").
/// Floats are made from hash bits by our own code, including our own log and cos, so the values do not depend on
/// the C library either.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/oracles/host_tensor.hpp"

namespace hcpsim {

/// How input values are distributed.
/// clamped_normal: Box-Muller standard normal clamped to [−1, 1] (TE's tests use `clamp(randn, −1, 1)` for q, k, v
///   and dout, tests/pytorch/attention/run_attention_with_cp.py L335-340, docs/algorithm.md §10);
/// normal: Box-Muller standard normal, unclamped; uniform: uniform on [−1, 1) with 53-bit granularity;
/// adversarial: q and k rows of constant sign with magnitude √(110/√dk)·(1 ± 0.05), so that logits scale·q·k
///   (scale = dk^-1/2) lie near ±(100–120): an fp32 log(exp(a)+exp(b)) merge overflows (exp > FLT_MAX beyond
///   88.7) while the max-shifted merge stays exact; v and dout are clamped_normal.
enum class InputDistribution { clamped_normal, normal, uniform, adversarial };

/// Field spelling: "clamped_normal", "normal", "uniform", "adversarial".
std::string to_string(InputDistribution d);
/// Parses the field spelling; std::nullopt if unknown.
std::optional<InputDistribution> parse_input_distribution(std::string_view name);
/// Parses the field spelling.
/// @throws InputError (key "oracle.input_distribution", fix listing the valid names) if `name` is unknown.
InputDistribution input_distribution_or_throw(const std::string& name);

/// SplitMix64 output function (Steele, Lea, Flood 2014, "Fast splittable pseudorandom number generators"):
/// a bijective 64-bit mixer; `splitmix64(state + n·0x9e3779b97f4a7c15)` for n = 1, 2, … is the SplitMix64 stream.
uint64_t splitmix64(uint64_t x);
/// 64-bit FNV-1a hash of a tag string (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t tag_hash(std::string_view tag);
/// Start state of the stream of (seed, tag): splitmix64(seed ^ splitmix64(tag_hash(tag))).
uint64_t input_stream(uint64_t seed, std::string_view tag);
/// The `counter`-th 64-bit word of a stream: splitmix64(stream + (counter + 1)·0x9e3779b97f4a7c15).
uint64_t stream_word(uint64_t stream, uint64_t counter);

/// Natural logarithm of x ∈ (0, ∞) using only IEEE +, −, ×, ÷ (frexp reduction to [√½, √2), then the atanh
/// series); within a few ulp of std::log, identical on every IEEE-754 machine. x ≤ 0 or non-finite: HCPSIM_ASSERT.
double portable_log(double x);
/// cos(2π·u) for u ∈ [0, 1) using only IEEE arithmetic (exact quarter-period reduction of the dyadic u, then
/// Taylor series on [−π/4, π/4]); absolute error below 1e-15.
double portable_cos_2pi(double u);

/// The value of element `index` of tensor `tag`:
/// uniform: 2·u − 1 with u = (word(index) >> 11)·2⁻⁵³ (exact);
/// normal: z = sqrt(−2·log u1)·cos(2π·u2) with u1 = ((word(2·index) >> 11) + 1)·2⁻⁵³ ∈ (0, 1] and
///   u2 = (word(2·index+1) >> 11)·2⁻⁵³ ∈ [0, 1) (Box-Muller, first output only);
/// clamped_normal: clamp(z, −1, 1);
/// adversarial: for tags "q" and "k", sign(row)·√(110/√width)·(1 + 0.05·(2·u − 1)) with u as for uniform and
///   sign(row) the top bit of word(row = index / width) of the stream of tag + ".sign" (needs width > 0,
///   HCPSIM_ASSERT); other tags: clamped_normal.
/// @param width  row width of the tensor (dk for q and k); used by adversarial only.
double input_value(uint64_t seed, std::string_view tag, int64_t index, InputDistribution distribution,
                   int64_t width = 0);

/// A tensor [batch, rows, heads, width] whose element at flat row-major index i is input_value(seed, tag, i, d).
/// @param threads  OpenMP threads over the elements (≥ 1, HCPSIM_ASSERT); the values do not depend on it.
/// @throws InputError (key "oracle.input_distribution") for an unknown distribution name.
HostTensor make_input(uint64_t seed, const std::string& tag, int64_t batch, int64_t rows, int64_t heads,
                      int64_t width, const std::string& distribution, int threads = 1);

/// The four global inputs of one attention layer (per TP rank), bshd:
/// q [B, S, H, dk], k [B, S, Hkv, dk], v [B, S, Hkv, dv], dout [B, S, H, dv] (the upstream gradient of out).
struct AttentionInputs {
  HostTensor q;
  HostTensor k;
  HostTensor v;
  HostTensor dout;
};

/// A [batch, rows, heads.size(), width] subset of the full [batch, rows, full_heads, width] tensor `tag`: element
/// (b, r, hh, w) is input_value at the flat index of (b, r, heads[hh], w) in the full tensor (oracle.heads).
/// @param threads  OpenMP threads over the (batch, row) pairs (≥ 1, HCPSIM_ASSERT); the values do not depend on it.
/// @throws InputError (key "oracle.input_distribution") for an unknown distribution name.
HostTensor make_input_heads(uint64_t seed, const std::string& tag, int64_t batch, int64_t rows, int64_t full_heads,
                            const std::vector<int64_t>& heads, int64_t width, const std::string& distribution,
                            int threads = 1);

/// Generates q, k, v, dout for `shape` with tags "q", "k", "v", "dout" (make_input, on `threads` threads).
/// @throws InputError (key "oracle.input_distribution") for an unknown distribution name.
AttentionInputs make_attention_inputs(uint64_t seed, const AttentionShape& shape, const std::string& distribution,
                                      int threads = 1);

/// The inputs of a head subset: schedule head hh of q (of k, v) is full-model head q_heads[hh] (kv_heads[hh]) of
/// full_heads_q (full_heads_kv); both maps empty = the overload above.
AttentionInputs make_attention_inputs(uint64_t seed, const AttentionShape& shape, const std::string& distribution,
                                      const std::vector<int64_t>& q_heads, const std::vector<int64_t>& kv_heads,
                                      int64_t full_heads_q, int64_t full_heads_kv, int threads = 1);

}  // namespace hcpsim
