#pragma once
/// CPU schedule executor: runs a Schedule numerically in float64 over virtual CP ranks in one process; messages
/// are buffer copies. Every op is executed exactly as its docstring in hcpsim/core/schedule.hpp defines it; the
/// executor re-derives nothing (DESIGN.md "a schedule is the contract").

#include <cstdint>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim {

/// Counters of one executor run (for tests and reports; they do not affect results).
struct ExecutionStats {
  int64_t ops_executed = 0;       ///< ops completed, all ranks
  int64_t messages = 0;           ///< send/recv messages delivered
  int64_t message_elements = 0;   ///< elements carried by those messages
  int64_t all_to_alls = 0;        ///< all-to-all collectives performed (one per group and tag)
  int64_t rounds = 0;             ///< round-robin passes over the ranks
};

/// Gathered global results plus counters.
struct ExecutionResult {
  AttentionOutputs outputs;  ///< out, softmax_lse, dq, dk, dv in the global shapes of reference.hpp
  ExecutionStats stats;
};

/// Executes `schedule` on virtual ranks.
///
/// Buffers: each rank owns its BufferDecl tensors (float64 regardless of BufferDecl::dtype). AllocOp fills a buffer
/// with quiet NaN, so a read of an uninitialised half surfaces as NaN in an output; FreeOp releases it. Input
/// bindings (RankProgram::inputs: buffer row r = global token tokens[r], buffer head hh = global head
/// head_begin + hh, all batches and widths) are filled from `inputs` before the first op.
///
/// Scheduling: round-robin over ranks in cp_rank order; each rank runs its ops in list order until it blocks.
/// SendRecvOp posts its send (a snapshot of the concatenated send buffers) into a mailbox keyed by
/// (source cp rank, destination cp rank, tag), FIFO per key, and then blocks until the message for its recv side
/// is present (sizes must match). AllToAllOp blocks until every group member has reached the op with that tag,
/// then moves the data of all members at once (scatter_heads / gather_heads with chunk_order; half-chunks have
/// c = rows/2 rows of a member's pre-a2a buffer). Attention blocks use softmax_scale = effective_softmax_scale(
/// schedule.shape) and run `threads` OpenMP threads over (batch, head); Op::stream, deps and section are timing
/// information and do not change the numerics.
///
/// Outputs: after the last op, every rank's output bindings ("out", "softmax_lse", "dq", "dk", "dv") are gathered
/// into global tensors out [B, S, H, dv], softmax_lse [B, S, H, 1], dq [B, S, H, dk], dk [B, S, Hkv, dk],
/// dv [B, S, Hkv, dv] (B, S, H, … from schedule.shape). A NaN that survives into an output is returned as is (the
/// verifier reports it); it is not an error here.
///
/// @param inputs  global q, k, v, dout for schedule.shape (see make_attention_inputs)
/// @param threads ≥ 1; results are byte-identical for any thread count.
/// Aborts (HCPSIM_ASSERT, a schedule bug) on: Schedule::check_invariants failures, use of a buffer that is not
/// live, shape mismatches, a message whose size differs from its receive buffers, inconsistent all-to-all members,
/// a deadlock (the message names every blocked rank and op), an undelivered message at the end, or a global output
/// element written zero times or more than once.
ExecutionResult execute_schedule(const Schedule& schedule, const AttentionInputs& inputs, int threads);

}  // namespace hcpsim
