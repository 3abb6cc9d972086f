#pragma once
/// Blockwise float64 attention kernels (forward with LSE, backward given the global out and LSE), the numerical
/// building blocks of the CPU schedule executor and of the full-attention reference.
/// Source: docs/algorithm.md §4.4 (block output normalised within the block, merge) and §5.2 (block gradients).

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/core/semantics.hpp"
#include "hcpsim/oracles/host_tensor.hpp"

namespace hcpsim {

/// The log-sum-exp merge of the executor's LseMergeOp, in double (fp64 runs) or float (TE's fp32 merge):
/// semantics::lse_merge, with its naive fault variant semantics::lse_merge_naive (core/semantics.hpp).
using semantics::lse_merge;

/// Forward attention of one (Q rows × KV rows) block, per batch b and query head h (kv head g = h / (hq / hkv)):
///   s_rc = softmax_scale · q[b, q_rows.begin + r, h, :] · k[b, kv_rows.begin + c, g, :]
///   lse[b, r, h, 0] = log Σ_{c visible} exp(s_rc)   (natural log; −inf if row r sees no key)
///   out[b, r, h, :] = Σ_{c visible} exp(s_rc − lse) · v[b, kv_rows.begin + c, g, :]   (0 if row r sees no key)
/// for r ∈ [0, q_rows.count), c ∈ [0, kv_rows.count); "visible" is semantics::is_visible of the mask's descriptor
/// (causal = top-left, c ≤ r; causal_bottom_right, c ≤ r + kv_rows.count − q_rows.count; none = all).
/// Numerically stable (row maximum subtracted before exp).
/// @param q    [b, ≥ q_rows.end(), hq, dk];  @param k [b, ≥ kv_rows.end(), hkv, dk];  @param v [b, ·, hkv, dv]
/// @param out  [b, ≥ q_rows.count, hq, dv], rows [0, q_rows.count) overwritten
/// @param lse  [b, ≥ q_rows.count, hq, 1], rows [0, q_rows.count) overwritten
/// @param threads  OpenMP threads over (batch, head) pairs (≥ 1); results are byte-identical for any count.
/// @param dtype  precision: fp64 computes in double; fp32, bf16 and fp16 compute in float (inputs widened exactly,
///   as TE's kernels do) and round `out` to dtype and `lse` to fp32 (docs/algorithm.md §4.4: O_i is rounded by the
///   kernel, LSE is fp32).
/// @param doc  packed sequences (AttnFwdBlockOp::doc): empty = `mask` alone. Otherwise (runs covering q_rows.count
///   and kv_rows.count, HCPSIM_ASSERT) the block runs as document_mask_pieces(doc, mask != none): each piece's kv
///   rows are gathered into the kernel's KV copy and the dense kernel runs over them with the piece's MaskDesc;
///   rows in no piece see no key (out 0, lse −inf). Visibility is document_visible (core/document_mask.hpp).
/// Shape mismatches: HCPSIM_ASSERT.
void attention_block_forward(const HostTensor& q, RowRange q_rows, const HostTensor& k, const HostTensor& v,
                             RowRange kv_rows, BlockMask mask, double softmax_scale, HostTensor& out, HostTensor& lse,
                             int threads, Dtype dtype = Dtype::fp64, const DocumentMask& doc = DocumentMask{});

/// Backward of one block given the *global* (fully merged) out and lse (docs/algorithm.md §5.2). For every visible
/// pair (r, c), with D_r = Σ_d dout_r·out_r and P_rc = exp(s_rc − lse_r):
///   dV_c += P_rc·dout_r;  dS_rc = P_rc·(dout_r·v_c − D_r);  dQ_r += scale·dS_rc·k_c;  dK_c += scale·dS_rc·q_r.
/// q, out, dout, lse are read at q_rows; k, v at kv_rows (same layouts as attention_block_forward).
/// @param dq  [b, ≥ q_rows.count, hq, dk]: rows [0, q_rows.count) overwritten
/// @param dk  [b, ≥ kv_rows.count, hkv, dk], @param dv [b, ≥ kv_rows.count, hkv, dv]: rows [0, kv_rows.count)
///            overwritten; GQA: summed over the hq/hkv query heads of each kv head, in ascending head order.
/// @param threads  OpenMP threads over (batch, kv head) pairs; the pairs left over when they do not fill every
///   thread (e.g. one kv head on 2 threads) run one at a time with their (query tile, KV tile) units spread over
///   all threads, each dQ sum adding its KV tiles and each dK, dV sum its (query head, query tile) pairs in one
///   fixed ascending order. Results are byte-identical for any count (no document mask: tiles split; with one:
///   pairs only).
/// @param dtype  fp64 computes in double; otherwise float with fp32 in-kernel dK/dV sums, and dq, dk, dv rounded
///   to dtype (the kernel's output format, docs/algorithm.md §5.3).
/// @param doc  as attention_block_forward: per piece the gathered columns' dK, dV (in T) are added into the block's
///   kv rows in piece order, and rounded to dtype once at the end; kv rows no piece reads get 0, q rows in no
///   piece get dq = 0.
/// A visible pair whose lse is −inf (impossible for a consistent global lse) yields inf/NaN on purpose.
void attention_block_backward(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& out,
                              const HostTensor& dout, const HostTensor& lse, RowRange q_rows, RowRange kv_rows,
                              BlockMask mask, double softmax_scale, HostTensor& dq, HostTensor& dk, HostTensor& dv,
                              int threads, Dtype dtype = Dtype::fp64, const DocumentMask& doc = DocumentMask{});

}  // namespace hcpsim
