#include "hcpsim/oracles/precision.hpp"

#include <cmath>
#include <limits>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

namespace {

/// Rounds finite nonzero x to `bits` significant bits with exponent floor `min_exp` (frexp convention: the smallest
/// normal is 0.5·2^min_exp) and overflow threshold `max_finite`.
double round_bits(double x, int bits, int min_exp, double max_finite) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int e = 0;
  (void)std::frexp(x, &e);  // x = m·2^e, |m| ∈ [0.5, 1)
  // Below the normal range the spacing stays that of the smallest binade (gradual underflow).
  const int eff = e < min_exp ? min_exp : e;
  // nearbyint uses the default rounding mode, round-to-nearest-even (no code here changes the mode).
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, bits - eff)), eff - bits);
  if (std::abs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

}  // namespace

double round_to_dtype(double x, Dtype dtype) {
  switch (dtype) {
    case Dtype::fp64: return x;
    case Dtype::fp32: return static_cast<double>(static_cast<float>(x));
    case Dtype::bf16:
      // 8 significant bits, fp32 exponent range: smallest normal 2^-126 = 0.5·2^-125; largest (2 − 2^-7)·2^127.
      return round_bits(x, 8, -125, 0x1.fep127);
    case Dtype::fp16:
      // 11 significant bits; smallest normal 2^-14 = 0.5·2^-13; largest 65504.
      return round_bits(x, 11, -13, 65504.0);
  }
  HCPSIM_ASSERT(false, "round_to_dtype: unknown dtype");
}

void round_tensor(HostTensor& t, Dtype dtype) {
  if (dtype == Dtype::fp64) return;
  for (double& x : t.values()) x = round_to_dtype(x, dtype);
}

double unit_roundoff(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp64: return 0x1p-53;
    case Dtype::fp32: return 0x1p-24;
    case Dtype::bf16: return 0x1p-8;
    case Dtype::fp16: return 0x1p-11;
  }
  HCPSIM_ASSERT(false, "unit_roundoff: unknown dtype");
}

}  // namespace hcpsim
