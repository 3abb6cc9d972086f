#include "hcpsim/oracles/oracle_cost.hpp"

#include <algorithm>

namespace hcpsim {

namespace {
constexpr double kProcessBytes = 64.0 * 1024 * 1024;
/// Counted FLOPs (below) per second per thread, measured (bench/RESULTS.md, `hcpsim verify` re-measured): the
/// default verify counts 412 GFLOP and took 8.08 s on 2 threads (25.5 GFLOP/s per thread), oracle.heads=all 1650 GFLOP
/// in 31.3 s (26.4); 20 is below both, so the printed time is an upper estimate on a quiet 2-core host.
constexpr double kFlopsPerSecondPerThread = 20e9;
}  // namespace

OracleCost estimate_oracle_cost(const AttentionShape& checked, Dtype dtype, int threads, int64_t ranks) {
  const double rows = static_cast<double>(checked.batch) * static_cast<double>(checked.seq_length);
  const double hq = static_cast<double>(checked.heads_q), hkv = static_cast<double>(checked.heads_kv);
  const double dk = static_cast<double>(checked.head_dim_qk), dv = static_cast<double>(checked.head_dim_v);
  const double inputs = rows * (hq * dk + hkv * dk + hkv * dv + hq * dv);
  const double outputs = rows * (hq * dv + hq + hq * dk + hkv * dk + hkv * dv);
  const double ring = 2 * rows * hkv * (dk + dv);
  const double gqa = checked.heads_q > checked.heads_kv ? rows * hq * (dk + dv) : 0;
  const double baseline = dtype == Dtype::fp64 ? 0 : outputs;
  OracleCost c;
  c.elements = inputs + outputs;
  // Ranks run concurrently between communication batches: each one beyond the first holds its step buffers at the
  // same time instead of reusing the previous rank's (measured: one more set of outputs for 2 threads on 4 ranks).
  const double concurrent = static_cast<double>(std::max<int64_t>(1, std::min<int64_t>(threads, ranks)));
  c.bytes = 8 * (2 * inputs + 3 * outputs + baseline + ring + gqa + (concurrent - 1) * outputs) + kProcessBytes;
  const double s = static_cast<double>(checked.seq_length);
  const double passes = dtype == Dtype::fp64 ? 2 : 3;
  c.flops = passes * 4 * static_cast<double>(checked.batch) * hq * s * s * (dk + dv) * (checked.causal ? 0.5 : 1.0);
  c.seconds = c.flops / (kFlopsPerSecondPerThread * std::max(threads, 1));
  return c;
}

}  // namespace hcpsim
