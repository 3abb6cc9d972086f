#pragma once
// Private to oracles/: the CPU executor's data movement. Every communication batch of the program walker
// (hcpsim/core/program_walker.hpp) and every CopyOp is applied as core's copy segments (hcpsim/core/lowering.hpp,
// the one lowering the GPU plan uses too) on the rank buffers' float64 storage: plain copies move values unchanged,
// accumulating segments (CopyOp add, reduce-scatter sums after the first member) round to the run's accumulator
// format (ExecutorState::acc_dtype, cpu_executor.hpp). `where` names the op (op_text).

#include <string>
#include <vector>

#include "executor_state.hpp"
#include "hcpsim/core/lowering.hpp"

namespace hcpsim::cpu_exec {

/// Applies `seg` from its source rank's buffer to its destination rank's buffer; HCPSIM_ASSERT unless both are live.
void apply_segment(ExecutorState& state, const CopySegment& seg);

/// One communication batch (`members`: the ops of one rendezvous, in rank order): applies every member's
/// incoming_segments in member order and counts the send/recv messages, their elements and the collectives
/// (ExecutionStats). Errors as incoming_segments (lowering.hpp); HCPSIM_ASSERT on buffers that are not live.
void run_batch(ExecutorState& state, const std::vector<OpRef>& members);

/// CopyOp: copy_op_segment, dst rows ← src rows, or dst + src rounded to the accumulator format when accumulating.
/// HCPSIM_ASSERT on buffers not live, rows outside them, or row shapes that differ.
void run_copy(ExecutorState& state, RankState& st, const CopyOp& op, const std::string& where);

}  // namespace hcpsim::cpu_exec
