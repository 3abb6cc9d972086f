#pragma once
// The attention shape the simulator benchmarks share (bench/sim_bench.cpp, bench/simgrid/simgrid_bench.cpp).

#include <cmath>
#include <cstdint>

#include "hcpsim/core/schedule_builder.hpp"

namespace hcpsim::bench {

/// Llama-3-8B attention per TP rank (TP = 1): 32 q-heads, 8 KV groups, head dim 128, bf16, causal, one sequence of
/// `seq_per_rank` · `cp` tokens, softmax scale 128^-0.5. Source: Llama 3 (arXiv:2407.21783) Table 3.
inline AttentionShape llama3_8b_shape(int64_t cp, int64_t seq_per_rank) {
  AttentionShape shape;
  shape.batch = 1;
  shape.seq_length = seq_per_rank * cp;
  shape.heads_q = 32;
  shape.heads_kv = 8;
  shape.head_dim_qk = 128;
  shape.head_dim_v = 128;
  shape.causal = true;
  shape.softmax_scale = 1.0 / std::sqrt(128.0);
  shape.dtype = Dtype::bf16;
  return shape;
}

}  // namespace hcpsim::bench
