#include "hcpsim/oracles/inputs.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/fnv_hash.hpp"

namespace hcpsim {

namespace {

/// SplitMix64 increment ("golden gamma", 2^64/φ rounded to odd). Source: Steele, Lea, Flood (OOPSLA 2014).
constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;
/// 2^-53: one unit of a 53-bit fraction.
constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
/// ln 2 split so that e·kLn2Hi is exact for |e| < 2^21. Source: fdlibm e_log.c (ln2_hi, ln2_lo).
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
/// √½ and π/2 rounded to double.
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kHalfPi = 1.57079632679489661923;

/// Taylor coefficients (−1)^k / (2k+1)! (sin) and (−1)^k / (2k)! (cos), k = 0..9: on |x| ≤ π/4 the first omitted
/// terms are x^21/21! < 3e-22 and x^20/20! < 3e-21, far below one ulp of the result.
constexpr int kTaylorTerms = 10;
constexpr std::array<double, kTaylorTerms> taylor_coefficients(int offset) {
  std::array<double, kTaylorTerms> c{};
  double factorial = 1.0;
  int n = 0;
  for (int k = 0; k < kTaylorTerms; ++k) {
    const int target = 2 * k + offset;
    while (n < target) {
      ++n;
      factorial *= static_cast<double>(n);
    }
    c[static_cast<size_t>(k)] = ((k % 2 == 0) ? 1.0 : -1.0) / factorial;
  }
  return c;
}
constexpr std::array<double, kTaylorTerms> kSinCoefficients = taylor_coefficients(1);
constexpr std::array<double, kTaylorTerms> kCosCoefficients = taylor_coefficients(0);

double taylor(const std::array<double, kTaylorTerms>& c, double x2) {
  double sum = 0.0;
  for (size_t k = c.size(); k-- > 0;) sum = c[k] + x2 * sum;
  return sum;
}

double unit_open_below(uint64_t word) {  // (0, 1]
  return static_cast<double>((word >> 11) + 1) * kTwoPowMinus53;
}
double unit_open_above(uint64_t word) {  // [0, 1)
  return static_cast<double>(word >> 11) * kTwoPowMinus53;
}

}  // namespace

std::string to_string(InputDistribution d) {
  switch (d) {
    case InputDistribution::clamped_normal: return "clamped_normal";
    case InputDistribution::normal: return "normal";
    case InputDistribution::uniform: return "uniform";
    case InputDistribution::adversarial: return "adversarial";
  }
  HCPSIM_ASSERT(false, "unknown InputDistribution");
  return {};
}

std::optional<InputDistribution> parse_input_distribution(std::string_view name) {
  for (InputDistribution d : {InputDistribution::clamped_normal, InputDistribution::normal, InputDistribution::uniform,
                              InputDistribution::adversarial}) {
    if (name == to_string(d)) return d;
  }
  return std::nullopt;
}

InputDistribution input_distribution_or_throw(const std::string& name) {
  if (auto d = parse_input_distribution(name)) return *d;
  throw InputError(SourceLoc{}, "oracle.input_distribution", "unknown input distribution '" + name + "'",
                   "use one of clamped_normal, normal, uniform, adversarial");
}

uint64_t splitmix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t tag_hash(std::string_view tag) { return fnv1a64(tag); }

uint64_t input_stream(uint64_t seed, std::string_view tag) { return splitmix64(seed ^ splitmix64(tag_hash(tag))); }

uint64_t stream_word(uint64_t stream, uint64_t counter) {
  return splitmix64(stream + (counter + 1) * kGoldenGamma);  // unsigned arithmetic wraps mod 2^64 by definition
}

double portable_log(double x) {
  HCPSIM_ASSERT(x > 0.0, "portable_log: argument must be positive");
  HCPSIM_ASSERT(std::isfinite(x), "portable_log: argument must be finite");
  int e = 0;
  double m = std::frexp(x, &e);  // x = m·2^e, m ∈ [½, 1): exact bit manipulation
  if (m < kSqrtHalf) {
    m *= 2.0;  // exact
    e -= 1;
  }
  // log m = 2·atanh(s) = 2·(s + s³/3 + s⁵/5 + …), s = (m−1)/(m+1), |s| ≤ 0.1716 (s² ≤ 0.0295): the terms up to
  // s²⁵/25 leave a remainder below 1e-21.
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double tail = 0.0;
  for (int k = 25; k >= 3; k -= 2) tail = 1.0 / static_cast<double>(k) + s2 * tail;
  const double log_m = 2.0 * s + 2.0 * s * (s2 * tail);
  const double ed = static_cast<double>(e);
  return ed * kLn2Hi + (ed * kLn2Lo + log_m);
}

double portable_cos_2pi(double u) {
  HCPSIM_ASSERT(u >= 0.0, "portable_cos_2pi: u must be in [0, 1)");
  HCPSIM_ASSERT(u < 1.0, "portable_cos_2pi: u must be in [0, 1)");
  const double t = 4.0 * u;                                  // quarter periods, exact
  const auto quadrant = static_cast<int64_t>(t + 0.5);      // nearest integer, 0..4
  const double f = t - static_cast<double>(quadrant);        // exact, ∈ [−½, ½]
  const double x = f * kHalfPi;                              // ∈ [−π/4, π/4]
  const double x2 = x * x;
  const double sin_x = x * taylor(kSinCoefficients, x2);
  const double cos_x = taylor(kCosCoefficients, x2);
  switch (quadrant % 4) {  // cos(q·π/2 + x)
    case 0: return cos_x;
    case 1: return -sin_x;
    case 2: return -cos_x;
    default: return sin_x;
  }
}

namespace {
double value_from_stream(uint64_t stream, int64_t index, InputDistribution distribution) {
  HCPSIM_ASSERT(index >= 0, "input_value: negative element index");
  const auto i = static_cast<uint64_t>(index);
  if (distribution == InputDistribution::uniform) return 2.0 * unit_open_above(stream_word(stream, i)) - 1.0;
  const double u1 = unit_open_below(stream_word(stream, 2 * i));
  const double u2 = unit_open_above(stream_word(stream, 2 * i + 1));
  const double z = std::sqrt(-2.0 * portable_log(u1)) * portable_cos_2pi(u2);  // sqrt is correctly rounded (IEEE)
  if (distribution == InputDistribution::clamped_normal) return std::clamp(z, -1.0, 1.0);
  return z;
}
}  // namespace

namespace {
/// Target |logit| of adversarial inputs: between 100 and 120, above fp32 exp's overflow (88.7).
constexpr double kAdversarialLogit = 110.0;
/// Relative per-element jitter of adversarial magnitudes: logits spread over ≈ 110·(1 ± 0.1).
constexpr double kAdversarialJitter = 0.05;

double adversarial_from_streams(uint64_t stream, uint64_t sign_stream, int64_t index, int64_t width) {
  HCPSIM_ASSERT(width > 0, "input_value: adversarial q/k values need the row width (dk)");
  const auto i = static_cast<uint64_t>(index);
  const uint64_t row = i / static_cast<uint64_t>(width);
  const double sign = (stream_word(sign_stream, row) >> 63) != 0 ? -1.0 : 1.0;
  // |q|·|k|·dk·scale = a²·√dk = kAdversarialLogit with scale = dk^-1/2 (TE's default).
  const double a = std::sqrt(kAdversarialLogit / std::sqrt(static_cast<double>(width)));
  const double u = 2.0 * unit_open_above(stream_word(stream, i)) - 1.0;
  return sign * a * (1.0 + kAdversarialJitter * u);
}

bool adversarial_tag(std::string_view tag) { return tag == "q" || tag == "k"; }
}  // namespace

double input_value(uint64_t seed, std::string_view tag, int64_t index, InputDistribution distribution,
                   int64_t width) {
  if (distribution == InputDistribution::adversarial) {
    if (!adversarial_tag(tag)) return value_from_stream(input_stream(seed, tag), index, InputDistribution::clamped_normal);
    return adversarial_from_streams(input_stream(seed, tag), input_stream(seed, std::string(tag) + ".sign"), index,
                                    width);
  }
  return value_from_stream(input_stream(seed, tag), index, distribution);
}

HostTensor make_input(uint64_t seed, const std::string& tag, int64_t batch, int64_t rows, int64_t heads,
                      int64_t width, const std::string& distribution, int threads) {
  const InputDistribution d = input_distribution_or_throw(distribution);
  HCPSIM_ASSERT(threads >= 1, "make_input: threads must be >= 1");
  HostTensor t(batch, rows, heads, width);
  double* data = t.data();
  const int64_t n = t.elements();
  const uint64_t stream = input_stream(seed, tag);
  // Every element is a function of its index alone, so the split over threads changes no value.
  if (d == InputDistribution::adversarial) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) data[i] = input_value(seed, tag, i, d, width);
    return t;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) data[i] = value_from_stream(stream, i, d);
  return t;
}

HostTensor make_input_heads(uint64_t seed, const std::string& tag, int64_t batch, int64_t rows, int64_t full_heads,
                            const std::vector<int64_t>& heads, int64_t width, const std::string& distribution,
                            int threads) {
  const InputDistribution d = input_distribution_or_throw(distribution);
  HCPSIM_ASSERT(threads >= 1, "make_input_heads: threads must be >= 1");
  const auto nh = static_cast<int64_t>(heads.size());
  HostTensor t(batch, rows, nh, width);
  for (int64_t h : heads) HCPSIM_ASSERT(h >= 0 && h < full_heads, "make_input_heads: head outside the full tensor");
  const uint64_t stream = input_stream(seed, tag);  // input_value's stream, computed once
  const bool adversarial = d == InputDistribution::adversarial;
  // Every element is a function of its index alone, so the split over (batch, row) pairs changes no value.
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t br = 0; br < batch * rows; ++br) {
    const int64_t b = br / rows;
    const int64_t r = br % rows;
    for (int64_t hh = 0; hh < nh; ++hh) {
      const int64_t base = ((b * rows + r) * full_heads + heads[static_cast<size_t>(hh)]) * width;
      for (int64_t w = 0; w < width; ++w) {
        const int64_t i = base + w;
        t(b, r, hh, w) = adversarial ? input_value(seed, tag, i, d, width) : value_from_stream(stream, i, d);
      }
    }
  }
  return t;
}

AttentionInputs make_attention_inputs(uint64_t seed, const AttentionShape& shape, const std::string& distribution,
                                      int threads) {
  input_distribution_or_throw(distribution);  // validate before any work
  const int64_t b = shape.batch;
  const int64_t s = shape.seq_length;
  AttentionInputs in;
  in.q = make_input(seed, "q", b, s, shape.heads_q, shape.head_dim_qk, distribution, threads);
  in.k = make_input(seed, "k", b, s, shape.heads_kv, shape.head_dim_qk, distribution, threads);
  in.v = make_input(seed, "v", b, s, shape.heads_kv, shape.head_dim_v, distribution, threads);
  in.dout = make_input(seed, "dout", b, s, shape.heads_q, shape.head_dim_v, distribution, threads);
  return in;
}

AttentionInputs make_attention_inputs(uint64_t seed, const AttentionShape& shape, const std::string& distribution,
                                      const std::vector<int64_t>& q_heads, const std::vector<int64_t>& kv_heads,
                                      int64_t full_heads_q, int64_t full_heads_kv, int threads) {
  if (q_heads.empty() && kv_heads.empty()) return make_attention_inputs(seed, shape, distribution, threads);
  input_distribution_or_throw(distribution);
  HCPSIM_ASSERT(static_cast<int64_t>(q_heads.size()) == shape.heads_q, "make_attention_inputs: q head map size");
  HCPSIM_ASSERT(static_cast<int64_t>(kv_heads.size()) == shape.heads_kv, "make_attention_inputs: kv head map size");
  const int64_t b = shape.batch;
  const int64_t s = shape.seq_length;
  AttentionInputs in;
  in.q = make_input_heads(seed, "q", b, s, full_heads_q, q_heads, shape.head_dim_qk, distribution, threads);
  in.k = make_input_heads(seed, "k", b, s, full_heads_kv, kv_heads, shape.head_dim_qk, distribution, threads);
  in.v = make_input_heads(seed, "v", b, s, full_heads_kv, kv_heads, shape.head_dim_v, distribution, threads);
  in.dout = make_input_heads(seed, "dout", b, s, full_heads_q, q_heads, shape.head_dim_v, distribution, threads);
  return in;
}

}  // namespace hcpsim
