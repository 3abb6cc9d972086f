#include <cmath>
#include <cstring>
#include <numbers>

#include "catch_compat.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/host_tensor.hpp"
#include "hcpsim/oracles/inputs.hpp"

using namespace hcpsim;

TEST_CASE("oracles: HostTensor is row-major [b, rows, heads, width]", "[oracles]") {
  HostTensor t(2, 3, 4, 5, 7.0);
  REQUIRE(t.elements() == 120);
  REQUIRE(t.shape() == std::array<int64_t, 4>{2, 3, 4, 5});
  // flat index ((b·rows + r)·heads + h)·width + w
  REQUIRE(t.index(1, 2, 3, 4) == ((1 * 3 + 2) * 4 + 3) * 5 + 4);
  REQUIRE(t.index(1, 2, 3, 4) == 119);
  REQUIRE(t(0, 0, 0, 0) == 7.0);
  t.at(1, 0, 2, 1) = -3.0;
  REQUIRE(t.data()[t.index(1, 0, 2, 1)] == -3.0);
  REQUIRE(t(1, 0, 2, 1) == -3.0);
  t.fill(0.5);
  REQUIRE(t(1, 2, 3, 4) == 0.5);
  REQUIRE(t.same_shape(HostTensor(2, 3, 4, 5)));
  REQUIRE_FALSE(t.same_shape(HostTensor(2, 3, 5, 4)));
  REQUIRE(HostTensor().elements() == 0);
}

TEST_CASE("oracles: splitmix64 and FNV-1a match an independent implementation", "[oracles]") {
  // Values from a separate Python implementation of the same definitions (tests/oracles comment):
  // fnv1a64("q") = 0xaf63ec4c860207bc, input_stream(1234, "q") = 0x85a8c252ad8f89bc.
  REQUIRE(tag_hash("q") == 0xaf63ec4c860207bcULL);
  REQUIRE(input_stream(1234, "q") == 0x85a8c252ad8f89bcULL);
  // FNV-1a 64 of the empty string is the offset basis.
  REQUIRE(tag_hash("") == 0xcbf29ce484222325ULL);
  // SplitMix64 reference: the first output of a generator seeded with 0 is 0xe220a8397b1dcdaf
  // (Vigna's splitmix64.c: state += gamma, then the mixer).
  REQUIRE(splitmix64(0x9e3779b97f4a7c15ULL) == 0xe220a8397b1dcdafULL);
}

TEST_CASE("oracles: input generator golden values are pinned exactly", "[oracles]") {
  // uniform is exact integer→double arithmetic; the goldens were computed independently in Python (same formulas).
  REQUIRE(input_value(1234, "q", 0, InputDistribution::uniform) == -0x1.83aa4ee0e5360p-5);
  REQUIRE(input_value(1234, "q", 1, InputDistribution::uniform) == 0x1.2ef88fe875c50p-3);
  REQUIRE(input_value(1234, "q", 2, InputDistribution::uniform) == 0x1.9f31bd2ee1d50p-4);
  REQUIRE(input_value(1234, "q", 3, InputDistribution::uniform) == -0x1.367bbe2e6a488p-3);
  // normal uses our own log/cos, so these bits are the same on every IEEE-754 machine; pinned from this
  // implementation. Python's libm log/cos give the same values to within 1e-15:
  // -1.088710430696622, -0.9707661522134754, 0.8965400205009899, -2.596798810746643.
  const double n0 = input_value(1234, "q", 0, InputDistribution::normal);
  const double n1 = input_value(1234, "q", 1, InputDistribution::normal);
  const double n2 = input_value(1234, "q", 2, InputDistribution::normal);
  const double n3 = input_value(1234, "q", 3, InputDistribution::normal);
  REQUIRE(std::abs(n0 - -1.088710430696622) < 1e-15);
  REQUIRE(std::abs(n1 - -0.9707661522134754) < 1e-15);
  REQUIRE(std::abs(n2 - 0.8965400205009899) < 1e-15);
  REQUIRE(std::abs(n3 - -2.596798810746643) < 1e-14);
  REQUIRE(n0 == -0x1.16b5ba0ea7f3ep+0);
  REQUIRE(n1 == -0x1.f10842d7a42a5p-1);
  REQUIRE(n2 == 0x1.cb074b2736be6p-1);
  REQUIRE(n3 == -0x1.4c63e74739694p+1);
  // clamped_normal = clamp(normal, -1, 1)
  REQUIRE(input_value(1234, "q", 0, InputDistribution::clamped_normal) == -1.0);
  REQUIRE(input_value(1234, "q", 1, InputDistribution::clamped_normal) == n1);
  REQUIRE(input_value(1234, "q", 2, InputDistribution::clamped_normal) == n2);
  REQUIRE(input_value(1234, "q", 3, InputDistribution::clamped_normal) == -1.0);
}

TEST_CASE("oracles: inputs are a pure function of (seed, tag, index)", "[oracles]") {
  for (const char* dist : {"clamped_normal", "normal", "uniform"}) {
    INFO("distribution " << dist);
    const HostTensor a = make_input(7, "k", 2, 8, 3, 5, dist);
    const HostTensor b = make_input(7, "k", 2, 8, 3, 5, dist);
    REQUIRE(std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.elements())) == 0);
    // Element i depends only on the flat index: a differently shaped tensor with the same tag agrees elementwise.
    const HostTensor flat = make_input(7, "k", 1, 1, 1, a.elements(), dist);
    REQUIRE(std::memcmp(a.data(), flat.data(), sizeof(double) * static_cast<size_t>(a.elements())) == 0);
    // A subset regenerates the same bits without the rest.
    const auto d = *parse_input_distribution(dist);
    REQUIRE(input_value(7, "k", 37, d) == a.data()[37]);
    // Different tag or seed: different values (all 240 differ; an equal pair would be a 2^-53-chance event).
    const HostTensor other_tag = make_input(7, "v", 2, 8, 3, 5, dist);
    const HostTensor other_seed = make_input(8, "k", 2, 8, 3, 5, dist);
    int64_t same_tag = 0, same_seed = 0;
    for (int64_t i = 0; i < a.elements(); ++i) {
      // clamped values may both be exactly ±1; compare only unclamped ones
      if (std::abs(a.data()[i]) == 1.0) continue;
      same_tag += a.data()[i] == other_tag.data()[i];
      same_seed += a.data()[i] == other_seed.data()[i];
    }
    REQUIRE(same_tag == 0);
    REQUIRE(same_seed == 0);
  }
}

TEST_CASE("oracles: input distributions have the right range and moments", "[oracles]") {
  const int64_t n = 200000;
  const HostTensor c = make_input(99, "q", 1, n, 1, 1, "clamped_normal");
  const HostTensor z = make_input(99, "q", 1, n, 1, 1, "normal");
  const HostTensor u = make_input(99, "q", 1, n, 1, 1, "uniform");
  double zsum = 0, zsq = 0, usum = 0;
  int64_t clamped = 0, out_of_range = 0, nonfinite = 0;
  for (int64_t i = 0; i < n; ++i) {
    out_of_range += c.data()[i] < -1.0 || c.data()[i] > 1.0;
    out_of_range += u.data()[i] < -1.0 || u.data()[i] >= 1.0;
    nonfinite += !std::isfinite(z.data()[i]);
    clamped += std::abs(c.data()[i]) == 1.0;
    zsum += z.data()[i];
    zsq += z.data()[i] * z.data()[i];
    usum += u.data()[i];
  }
  REQUIRE(out_of_range == 0);
  REQUIRE(nonfinite == 0);
  // Standard errors with n = 2e5: mean of N(0,1) 1/sqrt(n) = 2.2e-3, variance sqrt(2/n) = 3.2e-3, mean of
  // U[-1,1) sqrt(1/3n) = 1.3e-3, clamped fraction P(|z|>1) = 0.3173 with sqrt(p(1-p)/n) = 1.0e-3. Bounds are
  // 5 standard errors (a fixed seed, so this is a regression check, not a flaky statistical test).
  REQUIRE(std::abs(zsum / n) < 5 * 2.3e-3);
  REQUIRE(std::abs(zsq / n - 1.0) < 5 * 3.2e-3);
  REQUIRE(std::abs(usum / n) < 5 * 1.3e-3);
  REQUIRE(std::abs(static_cast<double>(clamped) / n - 0.3173) < 5 * 1.05e-3);
}

TEST_CASE("oracles: portable log and cos agree with libm", "[oracles]") {
  // Bounds: a few ulp. portable_log: |rel err| <= 4 ulp = 8.9e-16 (series remainder < 1e-21, the rest rounding);
  // portable_cos_2pi: |abs err| <= 1e-15 (|x| <= pi/4 after exact reduction; libm's cos(2*pi*u) itself carries
  // ~4e-16 from rounding 2*pi*u, included in the bound).
  int64_t log_bad = 0, cos_bad = 0;
  for (int64_t i = 0; i < 20000; ++i) {
    const double u1 = (static_cast<double>(stream_word(5, static_cast<uint64_t>(i)) >> 11) + 1.0) * 0x1p-53;
    const double u2 = static_cast<double>(stream_word(6, static_cast<uint64_t>(i)) >> 11) * 0x1p-53;
    log_bad += std::abs(portable_log(u1) - std::log(u1)) > 8.9e-16 * std::abs(std::log(u1)) + 1e-300;
    cos_bad += std::abs(portable_cos_2pi(u2) - std::cos(2.0 * std::numbers::pi * u2)) > 1e-15;
  }
  REQUIRE(log_bad == 0);
  REQUIRE(cos_bad == 0);
  REQUIRE(portable_log(1.0) == 0.0);
  REQUIRE(std::abs(portable_log(0x1p-53) - std::log(0x1p-53)) < 1e-14);
  REQUIRE(std::abs(portable_log(1e300) - std::log(1e300)) < 1e-12);
  REQUIRE(portable_cos_2pi(0.0) == 1.0);
  REQUIRE(portable_cos_2pi(0.5) == -1.0);
  REQUIRE(portable_cos_2pi(0.25) == 0.0);  // exact: quarter-period reduction leaves x = 0, -sin(0) = -0.0 == 0.0
}

TEST_CASE("oracles: unknown input distribution is an InputError with key and fix", "[oracles]") {
  REQUIRE(parse_input_distribution("clamped_normal") == InputDistribution::clamped_normal);
  REQUIRE(to_string(InputDistribution::uniform) == "uniform");
  REQUIRE_FALSE(parse_input_distribution("gaussian").has_value());
  try {
    (void)make_input(1, "q", 1, 2, 1, 1, "gaussian");
    FAIL("expected InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "oracle.input_distribution");
    REQUIRE(e.problem().find("gaussian") != std::string::npos);
    REQUIRE(e.fix().find("clamped_normal") != std::string::npos);
    REQUIRE(e.fix().find("normal") != std::string::npos);
    REQUIRE(e.fix().find("uniform") != std::string::npos);
    REQUIRE(std::string(e.what()).find("oracle.input_distribution") != std::string::npos);
  }
  AttentionShape shape;
  shape.batch = 1;
  shape.seq_length = 4;
  shape.heads_q = shape.heads_kv = 1;
  shape.head_dim_qk = shape.head_dim_v = 2;
  REQUIRE_THROWS_AS(make_attention_inputs(1, shape, "Normal"), InputError);
}
