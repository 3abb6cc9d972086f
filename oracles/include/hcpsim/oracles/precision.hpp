#pragma once
/// Rounding to the storage formats the oracle emulates (fp32, bf16, fp16), so that an fp64 host value holds exactly
/// what a TE kernel or buffer of that dtype would hold (docs/algorithm.md §4.4 and §5.3 list where TE rounds).

#include "hcpsim/core/semantics.hpp"
#include "hcpsim/core/types.hpp"
#include "hcpsim/oracles/host_tensor.hpp"

namespace hcpsim {

/// Rounding of a double to `dtype` (round-to-nearest-even, widened back exactly): semantics::round_to_dtype, the
/// one definition the GPU kernels share (core/semantics.hpp); named here for the oracle's callers.
using semantics::round_to_dtype;

/// Applies round_to_dtype to every element of `t`.
void round_tensor(HostTensor& t, Dtype dtype);

/// Unit roundoff u = 2^-p of a format with p significant bits: fp64 2⁻⁵³, fp32 2⁻²⁴, bf16 2⁻⁸, fp16 2⁻¹¹.
double unit_roundoff(Dtype dtype);

}  // namespace hcpsim
