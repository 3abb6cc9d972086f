#pragma once
// Private to oracles/: the CPU executor's compute ops on one rank — attention blocks, the LSE merge and the output
// correction (copy/add is data movement, executor_segments.hpp) — each executed as its docstring in hcpsim/core/schedule.hpp defines it, at the
// rounding points listed in cpu_executor.hpp. `where` names the op in assertion messages (op_text).

#include <string>

#include "executor_state.hpp"

namespace hcpsim::cpu_exec {

/// AttnFwdBlockOp: attention_block_forward into out and lse (with the op's document mask, if any). HCPSIM_ASSERT on aliasing operands, buffers not live
/// or rows outside their buffers.
void run_attn_fwd_block(const ExecutorState& state, RankState& st, const AttnFwdBlockOp& op, const std::string& where);

/// AttnBwdBlockOp: attention_block_backward into dq, dk, dv. HCPSIM_ASSERT on a gradient output aliasing an input
/// or another gradient, buffers not live or rows outside their buffers.
void run_attn_bwd_block(const ExecutorState& state, RankState& st, const AttnBwdBlockOp& op, const std::string& where);

/// LseMergeOp: dst rows ← merge(dst, src) in fp32 (fp64 runs: float64; naive: the overflowing fp32 form, in fp64
/// runs rounded as fp64 but with fp32's range; unguarded: semantics::lse_merge_unguarded, NaN for (−inf, −inf)).
void run_lse_merge(const ExecutorState& state, RankState& st, const LseMergeOp& op, const std::string& where);

/// OutCorrectionOp: dst rows ← (dst +) src · exp(src_lse − lse); a row whose src_lse is −inf contributes 0.
void run_out_correction(const ExecutorState& state, RankState& st, const OutCorrectionOp& op,
                        const std::string& where);

}  // namespace hcpsim::cpu_exec
