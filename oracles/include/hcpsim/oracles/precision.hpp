#pragma once
/// Rounding to the storage formats the oracle emulates (fp32, bf16, fp16), so that an fp64 host value holds exactly
/// what a TE kernel or buffer of that dtype would hold (docs/algorithm.md §4.4 and §5.3 list where TE rounds).

#include "hcpsim/core/types.hpp"
#include "hcpsim/oracles/host_tensor.hpp"

namespace hcpsim {

/// Rounds x to the nearest value of format `dtype` (IEEE round-to-nearest-even), returned widened exactly to double.
/// fp64: x unchanged; fp32: (float)x; bf16: 8 significant bits, fp32's exponent range; fp16: 11 significant bits,
/// exponents down to 2⁻²⁴ (subnormals), values beyond the largest finite (65504) round to ±inf as IEEE does.
/// NaN and ±inf pass through. bf16 and fp16 round x directly (a single rounding); for an fp32 x this equals the
/// float → bf16/fp16 conversion PyTorch performs. Source: IEEE 754-2008 §4.3.1; bf16 = the top 16 bits of fp32.
double round_to_dtype(double x, Dtype dtype);

/// Applies round_to_dtype to every element of `t`.
void round_tensor(HostTensor& t, Dtype dtype);

/// Unit roundoff u = 2^-p of a format with p significant bits: fp64 2⁻⁵³, fp32 2⁻²⁴, bf16 2⁻⁸, fp16 2⁻¹¹.
double unit_roundoff(Dtype dtype);

}  // namespace hcpsim
