#include "hcpsim/oracles/precision.hpp"

#include "hcpsim/core/error.hpp"

namespace hcpsim {

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
