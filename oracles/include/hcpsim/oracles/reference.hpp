#pragma once
/// Float64 full-attention reference (forward, softmax_lse, backward; GQA; causal or no mask): the ground truth the
/// CPU and GPU schedule executors are compared against (docs/algorithm.md §6).

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/oracles/host_tensor.hpp"
#include "hcpsim/oracles/inputs.hpp"

namespace hcpsim {

/// Global results of one attention layer (per TP rank), bshd, float64:
/// out [B, S, H, dv], softmax_lse [B, S, H, 1] (natural log), dq [B, S, H, dk], dk [B, S, Hkv, dk],
/// dv [B, S, Hkv, dv].
struct AttentionOutputs {
  HostTensor out;
  HostTensor softmax_lse;
  HostTensor dq;
  HostTensor dk;
  HostTensor dv;
};

/// The softmax scale of a schedule's problem: shape.softmax_scale if > 0, else dk^-0.5
/// (TE default, context_parallel.py L1427-1428).
double effective_softmax_scale(const AttentionShape& shape);

/// Full attention over the whole sequence in float64 with Eigen GEMMs per (batch, head):
///   out = softmax(scale·q kᵀ + mask) v, softmax_lse = log Σ exp(scale·q kᵀ) over visible keys,
///   and the gradients dq, dk, dv of Σ dout·out (dk, dv summed over each GQA query group: q head h uses kv head
///   h / (H/Hkv)). causal = query i sees keys j ≤ i (global positions). A row with no visible key would get
///   lse = −inf and out = 0 (never NaN); with S > 0 full attention has none.
/// @param in  q [B, S, H, dk], k [B, S, Hkv, dk], v [B, S, Hkv, dv], dout [B, S, H, dv]
/// @param threads  OpenMP threads over (batch, head) (≥ 1); results are byte-identical for any thread count.
/// Shape mismatches: HCPSIM_ASSERT.
/// @param dtype  fp64 (the reference); another dtype gives the same-precision non-CP baseline of the tolerance
///   model: the whole sequence as one block through attention_block_forward/backward at dtype (out, dq, dk, dv
///   rounded to dtype, softmax_lse to fp32), as TE's DotProductAttention without CP would compute it.
AttentionOutputs reference_attention(const AttentionInputs& in, bool causal, double softmax_scale, int threads,
                                     Dtype dtype = Dtype::fp64);

}  // namespace hcpsim
