#pragma once
/// Closed-form memory and time of one CPU-oracle verification (`hcpsim verify --backend cpu`), computed from the
/// checked attention shape before any tensor is allocated (admission control, docs/robustness.md "Admission
/// control"). Doubles throughout, so that an absurd shape estimates without overflow.

#include "hcpsim/core/schedule.hpp"

namespace hcpsim {

/// Estimated cost of one verify_schedule_run on the CPU executor.
struct OracleCost {
  double elements = 0;  ///< float64 elements of one set of inputs plus one set of outputs (see estimate_oracle_cost)
  double bytes = 0;     ///< peak resident bytes
  double flops = 0;     ///< floating-point operations of the reference, the schedule and the baseline
  double seconds = 0;   ///< wall time on `threads` cores, order of magnitude
};

/// The oracle's buffers, all float64 (HostTensor), for the checked shape (B, S, Hq, Hkv, dk, dv):
///   inputs  I = q + k + v + dout           = B·S·(Hq·dk + Hkv·dk + Hkv·dv + Hq·dv)
///   outputs O = out + lse + dq + dk + dv   = B·S·(Hq·dv + Hq + Hq·dk + Hkv·dk + Hkv·dv)
/// live at the peak (the schedule's execution): the inputs, the fp64 reference, the executor's per-rank copies of
/// the inputs and outputs with its two in-flight KV ring buffers per rank, the gathered results, and (any dtype but
/// fp64) the same-precision baseline; under GQA the reference's per-q-head dK/dV partials B·S·Hq·(dk + dv):
///   bytes = 8·(2·I + 3·O + [not fp64] O + 2·B·S·Hkv·(dk + dv) + [GQA] B·S·Hq·(dk + dv) + (c − 1)·O) + 64 MiB
/// (the process), where c = min(threads, ranks) ranks run at once between communication batches (cpu_executor.hpp).
/// An upper bound of the measured peak RSS within 1.5x (docs/robustness.md "Admission control").
/// flops: 3 passes (reference, schedule, baseline; 2 in fp64) of 4·B·Hq·S²·(dk + dv)·(½ causal); seconds at
/// 20 GFLOP/s per thread (below the measured 25-26 of this count, bench/RESULTS.md).
/// `ranks`: the schedule's virtual CP ranks (context_parallel_size).
OracleCost estimate_oracle_cost(const AttentionShape& checked, Dtype dtype, int threads, int64_t ranks = 1);

}  // namespace hcpsim
