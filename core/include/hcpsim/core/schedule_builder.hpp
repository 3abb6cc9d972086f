#pragma once
/// Schedule builders: TE's a2a+p2p attention (A = 1 gives p2p, P = 1 gives a2a), forward and backward.

#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule.hpp"

namespace hcpsim {

/// FLOPs of one attention forward (query, key) pair: 2·(dk + dv) (QKᵀ and PV GEMMs).
/// Source: docs/architecture.md "Numbers we stand on"; FlashAttention papers count 4·d per pair for dk = dv = d.
double attn_fwd_flops_per_pair(int64_t head_dim_qk, int64_t head_dim_v);
/// FLOPs of one attention backward pair: 2·(3·dk + 2·dv) (recompute QKᵀ, dV, dP, dQ, dK GEMMs) = 2.5× forward
/// when dk = dv. Source: docs/architecture.md "Numbers we stand on"; FlashAttention-2 paper §3.2.
double attn_bwd_flops_per_pair(int64_t head_dim_qk, int64_t head_dim_v);

// The number of (query, key) pairs a block computes is semantics::block_pairs (semantics.hpp).

/// Builds the forward + backward schedule of one attention layer for every CP rank.
/// @param cp_comm_type  p2p, a2a, a2a_p2p, or all_gather (layout [1, cp]: K/V all-gathered into natural order
///   with before(cp), two per-chunk kernels per rank with bottom-right causal masks against the visible KV prefix,
///   full-length dK/dV reduce-scattered with after(cp); TE AttnFuncWithCPAndKVAllGather, docs/algorithm.md §9.5).
/// @param layout  A = layout.a2a_size(), P = layout.p2p_size(); p2p requires A == 1, a2a requires P == 1.
/// @param shape   per-TP-rank heads; heads_q and heads_kv divisible by A, S divisible by 2·cp.
/// @return per-rank programs. Messages per rank (docs/algorithm.md §7): forward P−1 KV sends of
///   [b, S/P, Hkv/A, dk+dv]; backward 1×KV, (P−2)×(KV + dKV), 1×dKV; a2a of q, k, v before and out after the
///   forward, of dout before and dq, dk, dv after the backward (A > 1 only).
/// Source: TE context_parallel.py AttnFuncWithCPAndKVP2P forward/backward and flash_attn_a2a_communicate
///   (docs/algorithm.md §3–§5, including the §5.3 copy/add rules).
/// @param threads  rank programs built and checked (check_invariants) at once (core/parallel_for.hpp); the
///   schedule is the same for any count.
Schedule build_schedule(CpCommType cp_comm_type, const CpLayout& layout, const AttentionShape& shape,
                        int threads = 1);

/// build_schedule for the listed CP ranks only (e.g. the representatives of the simulator's symmetry reduction):
/// their programs are exactly build_schedule's; every other rank keeps only its cp_rank (no buffers, ops or
/// bindings). A partial schedule fails Schedule::check_invariants by design (its messages have missing peers), so
/// it is not run here; build_schedule checks the same programs. p2p, a2a and a2a+p2p only.
/// @param cp_ranks  distinct flat CP ranks < layout.cp_size() (HCPSIM_ASSERT).
/// @param threads  rank programs built at once, as build_schedule's.
Schedule build_schedule_ranks(CpCommType cp_comm_type, const CpLayout& layout, const AttentionShape& shape,
                              const std::vector<int64_t>& cp_ranks, int threads = 1);

/// Deliberate deviations from TE, used only by the fault injectors (fault_injection.hpp); all false = TE.
struct BuilderFaults {
  /// Forward ring steps use the lower-triangle section where TE uses the upper one and vice versa (the
  /// `i <= p` test inverted); the backward is left correct, so it runs on a wrong O and LSE.
  bool swapped_causal_sections = false;
  /// Every backward ring step's kernel reads the KV of backward step 0 (a separate copy kept for the whole
  /// backward) instead of the KV that travels around the ring; P = 1 is unaffected.
  bool stale_kv_backward = false;
  /// THD: per-step valid lengths cu_seqlens // P for every sequence, as when cu_seqlens_padded is not honoured
  /// (TE #1930, Megatron #1669): the last valid tokens of a padded sequence are dropped and padding is attended.
  bool floor_cu_seqlens = false;
  /// THD: TE's old pad_between_seqs auto-detection, which compared cu_seqlens_padded[:-1] with cu_seqlens[:-1]
  /// and so missed padding of the last sequence only (TE #3331): then the floor rule above applies. No effect
  /// unless only the last sequence is padded.
  bool tail_padding_blind = false;
  /// Every softmax_lse merge is TE's unguarded formula: merging two empty rows (−inf, −inf) gives NaN
  /// (flash-attention #978, flashinfer #4051), which a padded THD row hits.
  bool unguarded_empty_merge = false;
};

/// build_schedule with `faults` applied (p2p, a2a and a2a+p2p only).
Schedule build_schedule(CpCommType cp_comm_type, const CpLayout& layout, const AttentionShape& shape,
                        const BuilderFaults& faults);

}  // namespace hcpsim
