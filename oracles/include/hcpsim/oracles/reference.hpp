#pragma once
/// Float64 full-attention reference (forward, softmax_lse, backward; GQA; causal, no mask or a sliding window):
/// the ground truth the CPU and GPU schedule executors are compared against (docs/algorithm.md §6).
///
/// Independence: the reference shares no code with the blockwise kernels of block_attention.hpp (tiles, online
/// softmax, mask rule, rounding points), as CUTLASS keeps its reference library apart from its kernels, so a bug in
/// those kernels cannot cancel out in the verdict. It materialises each query row's scores explicitly and applies
/// the textbook formulas, with its own mask rule. Source: FlashAttention-2 (Dao 2023, arXiv:2307.08691) §2.2, the
/// standard attention forward and backward (also Dao et al. 2022, arXiv:2205.14135, Algorithm 0 and Appendix B.2).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/oracles/host_tensor.hpp"
#include "hcpsim/oracles/inputs.hpp"

namespace hcpsim {

/// Progress of the reference: (heads done, heads in all) — see reference_attention's `progress`.
using HeadProgress = std::function<void(size_t done, size_t total)>;

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

/// Zero-filled outputs shaped for `in`: out and dq like q and dout ([B, S, H, dv], [B, S, H, dk]), softmax_lse
/// [B, S, H, 1], dk and dv like k and v ([B, S, Hkv, ·]).
AttentionOutputs zero_outputs_like(const AttentionInputs& in);

/// The softmax scale of a schedule's problem: shape.softmax_scale if > 0, else dk^-0.5
/// (TE default, context_parallel.py L1427-1428).
double effective_softmax_scale(const AttentionShape& shape);

/// The keys one query row sees: global key positions [begin, end); empty when begin ≥ end.
struct KeyRange {
  int64_t begin = 0;
  int64_t end = 0;
};

/// The visible keys of every query row i ∈ [0, s) (global positions, self-attention: s queries and s keys), from the
/// mask definitions: no mask: all keys; causal: key j visible iff j ≤ i; sliding window [left, right] (TE's and
/// FlashAttention's window_size, −1 = unbounded on that side): key j visible iff i − left ≤ j ≤ i + right, and with
/// causal also j ≤ i (TE sets right = 0 for causal masks). The result is clipped to [0, s).
/// window_left, window_right < −1: HCPSIM_ASSERT.
std::vector<KeyRange> reference_key_ranges(int64_t s, bool causal, int64_t window_left = -1,
                                           int64_t window_right = -1);

/// The visible keys of every row of a packed (THD) sequence in natural order [0, T): a row of segment s ≥ 0 sees
/// the keys of its own segment (every one, or with `causal` those at positions ≤ its own); a padding row
/// (segment −1) sees none and no row sees it. `runs` cover [0, T) in row order with position = row
/// (ThdLayout::global_runs()); each segment's rows must form one contiguous range (HCPSIM_ASSERT), as a sequence's
/// valid tokens do (a prefix of its padded length). Source: TE's padding_causal / padding mask with cu_seqlens.
std::vector<KeyRange> reference_document_key_ranges(const std::vector<TokenRun>& runs, bool causal);

/// Full attention over the whole sequence in float64, per (batch b, query head h) with kv head g = h / (H/Hkv):
///   S_ij = scale·q_i·k_jᵀ for the visible keys j of row i (masked scores take no part);
///   m_i = max_j S_ij,  l_i = Σ_j exp(S_ij − m_i),  P_ij = exp(S_ij − m_i) / l_i (0 for a masked key),
///   out_i = Σ_j P_ij·v_j,  softmax_lse_i = m_i + log l_i   (natural log);
/// and the gradients of the loss Σ dout∘out:
///   dP_ij = dout_i·v_jᵀ,  D_i = Σ_j P_ij·dP_ij (= rowsum(dout∘out)),  dS_ij = P_ij·(dP_ij − D_i),
///   dq_i = scale·Σ_j dS_ij·k_j,  dk_j = scale·Σ_i dS_ij·q_i,  dv_j = Σ_i P_ij·dout_i,
/// dk and dv summed over the H/Hkv query heads of each kv head. A row that sees no key gets softmax_lse = −inf,
/// out = 0 and dq = 0 and adds nothing to dk, dv (the executor's convention, block_attention.hpp), never NaN.
/// Scores are held for a chunk of 32-256 query rows at a time (≤ 2²³ per thread up to S = 256K), never S² at once.
/// @param in    q [B, S, H, dk], k [B, S, Hkv, dk], v [B, S, Hkv, dv], dout [B, S, H, dv]
/// @param keys  S entries: the visible keys of each query row (reference_key_ranges), the same for every batch and head
/// @param threads  OpenMP threads (≥ 1); results are byte-identical for any thread count. Under GQA with at least
///   `threads` (batch, kv head) pairs, one work item per pair runs its query heads in order and adds each head's
///   dK/dV to the kv head's in head order; otherwise one item per (batch, query head) writes a partial per head and
///   the same sums in the same order run after the parallel loop. Every sum runs in a fixed order inside one item.
///   exp is Eigen's vectorised exp (within 2 ulp of the C library's; std::exp where the result is subnormal, 0 or
///   NaN) and the row sums l_i, D_i run as 8 interleaved partial sums, so no result depends on an address or a
///   thread count.
/// Shape mismatches, a key range outside [0, S) or threads < 1: HCPSIM_ASSERT.
/// @param progress  optional, for a progress display: called with (heads done, B·H) after each (batch, head), from
///   any thread of the OpenMP team, possibly concurrently (the callee synchronises); results never depend on it.
AttentionOutputs reference_attention(const AttentionInputs& in, const std::vector<KeyRange>& keys,
                                     double softmax_scale, int threads, const HeadProgress& progress = nullptr);

/// The reference or the tolerance model's baseline for a causal or unmasked problem.
/// dtype fp64: the independent reference above with reference_key_ranges(S, causal).
/// Another dtype: the same-precision non-CP baseline of the tolerance model (non_cp_baseline_attention).
/// `progress` as above (fp64 only; the baseline does not report).
AttentionOutputs reference_attention(const AttentionInputs& in, bool causal, double softmax_scale, int threads,
                                     Dtype dtype = Dtype::fp64, const HeadProgress& progress = nullptr);

/// The reference (dtype fp64) or the baseline (another dtype) of a schedule's problem `shape`. Packed sequences
/// (shape.packing.thd()): full attention over the packed [1, T] tensors with the mask of
/// ThdLayout(1, 1, packing, padded).global_runs() (reference_document_key_ranges; the baseline runs the same runs
/// as a document mask): per-sequence causal or unmasked, padding rows empty (out 0, softmax_lse −inf, dq 0) and
/// padding keys unseen (dk, dv 0), so the inputs at padding rows never reach a valid output. Otherwise
/// reference_attention(in, shape.causal, softmax_scale, threads, dtype).
AttentionOutputs reference_attention(const AttentionInputs& in, const AttentionShape& shape, double softmax_scale,
                                     int threads, Dtype dtype = Dtype::fp64, const HeadProgress& progress = nullptr);

/// The same-precision non-CP baseline (docs/algorithm.md §6 item 5): the whole sequence as one block through
/// attention_block_forward/backward at dtype (out, dq, dk, dv rounded to dtype, softmax_lse to fp32 unless fp64),
/// as TE's DotProductAttention without CP would compute it; at fp64 it is what a one-rank schedule executes.
/// Deliberately the executor's kernels, and so not a reference.
/// @param doc  packed sequences: the document mask of the whole sequence (q and kv runs in natural order); empty
///   for bshd.
/// Shapes and threads as reference_attention; shape mismatches: HCPSIM_ASSERT.
AttentionOutputs non_cp_baseline_attention(const AttentionInputs& in, bool causal, double softmax_scale,
                                           int threads, Dtype dtype, const DocumentMask& doc = DocumentMask{});

}  // namespace hcpsim
