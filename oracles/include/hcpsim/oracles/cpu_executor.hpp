#pragma once
/// CPU schedule executor: runs a Schedule numerically in float64 over virtual CP ranks in one process; messages
/// and collectives are copy segments between the ranks' buffers. Every op is executed exactly as its docstring in hcpsim/core/schedule.hpp defines it; the
/// executor re-derives nothing (docs/architecture.md "A schedule is the contract").

#include <cstdint>
#include <functional>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim {

/// Counters of one executor run (for tests and reports; they do not affect results).
struct ExecutionStats {
  int64_t ops_executed = 0;       ///< ops completed, all ranks
  int64_t messages = 0;           ///< send/recv messages delivered
  int64_t message_elements = 0;   ///< elements carried by those messages
  int64_t all_to_alls = 0;        ///< collectives performed (all-to-all, all-gather, reduce-scatter; one per group and tag)
  int64_t batches = 0;            ///< communication batches of the walk (ProgramWalker, program_walker.hpp)
};

/// Gathered global results plus counters.
struct ExecutionResult {
  AttentionOutputs outputs;  ///< out, softmax_lse, dq, dk, dv in the global shapes of reference.hpp
  ExecutionStats stats;
};

/// Numerics of one executor run.
struct ExecutionOptions {
  int threads = 1;            ///< ≥ 1 OpenMP threads over (batch, head); results are byte-identical for any count
  Dtype dtype = Dtype::fp64;  ///< precision emulated (see execute_schedule); fp64 = exact float64 execution
  /// Optional: called from the calling thread after each walk step with (ops executed, ops of the schedule), for a
  /// progress display; it never changes the results.
  std::function<void(size_t done, size_t total)> progress = nullptr;
};

/// Executes `schedule` on virtual ranks in float64 (ExecutionOptions{threads, fp64}).
///
/// Buffers: each rank owns its BufferDecl tensors (float64 regardless of BufferDecl::dtype). AllocOp fills a buffer
/// with quiet NaN, so a read of an uninitialised half surfaces as NaN in an output; FreeOp releases it. Input
/// bindings (RankProgram::inputs: buffer row r = global token tokens[r], buffer head hh = global head
/// head_begin + hh, all batches and widths) are filled from `inputs` before the first op.
///
/// Scheduling: core's ProgramWalker (hcpsim/core/program_walker.hpp), the walk the GPU plan enqueues too:
/// round-robin over ranks in cp_rank order, each rank running its non-communication ops in list order until it
/// reaches a communication op; then the waiting communication ops that meet under the ordering contract's
/// rendezvous semantics (schedule.hpp: a send with its matching receive, a collective with all its members) run as
/// one batch, whose data moves as the copy segments of core's lowering (hcpsim/core/lowering.hpp: send/recv the
/// concatenated send buffers onto the recv buffers, all-to-all scatter_heads / gather_heads with chunk_order,
/// all-gather, reduce-scatter in member order). List order is one of the executions the ordering contract allows;
/// on a hazard-free schedule (check_hazards) every allowed execution computes the same values, so this one stands
/// for the simulated and GPU runs. Attention blocks use softmax_scale = effective_softmax_scale(schedule.shape) and
/// run `threads` OpenMP threads over (batch, head); Op::stream, deps and section do not change the numerics (they
/// order and time ops, see above). Debug builds also run check_hazards.
///
/// Outputs: after the last op, every rank's output bindings ("out", "softmax_lse", "dq", "dk", "dv") are gathered
/// into global tensors out [B, S, H, dv], softmax_lse [B, S, H, 1], dq [B, S, H, dk], dk [B, S, Hkv, dk],
/// dv [B, S, Hkv, dv] (B, S, H, … from schedule.shape). A NaN that survives into an output is returned as is (the
/// verifier reports it); it is not an error here.
///
/// @param inputs  global q, k, v, dout for schedule.shape (see make_attention_inputs)
/// @param threads ≥ 1; results are byte-identical for any thread count.
/// Aborts (HCPSIM_ASSERT, a schedule bug) on: a schedule numeric_run_blocker() refuses (a layer schedule),
/// Schedule::check_invariants failures, use of a buffer that is not
/// live, shape mismatches, inconsistent collective members, or a global output element written zero times or more
/// than once.
/// @throws InputError (key "schedule") on a deadlock under rendezvous semantics (ProgramWalker::next: the message
///   names every waiting rank and op) or a message whose size differs from its receive buffers.
ExecutionResult execute_schedule(const Schedule& schedule, const AttentionInputs& inputs, int threads);

/// Whether the CPU executor can run `schedule`, decided from the schedule alone before any op runs: it runs every
/// attention schedule, and refuses a layer schedule (its GEMM and elementwise ops are timing only). Callers check
/// it first; execute_schedule aborts on a schedule it refuses.
RunBlocker cpu_can_run(const Schedule& schedule);

/// Executes `schedule` as above, emulating `options.dtype` at exactly TE's rounding points (values are stored in
/// float64 but always hold a value of the format they model):
/// - inputs are rounded to dtype when loaded (the caller normally passes already-rounded inputs);
/// - attention blocks compute in fp32 (fp64 for dtype fp64) and round out/dq/dk/dv to dtype, lse to fp32
///   (attention_block_forward/backward; docs/algorithm.md §4.4, §5.3); a block with a document mask (packed
///   sequences, AttnFwdBlockOp::doc) runs piece by piece (document_mask_pieces), its empty rows out 0, lse −inf;
/// - LseMergeOp merges in fp32 (TE ≥ v2.4), or naively when LseMergeOp::naive (fp32; fp64 runs round as fp64 but
///   overflow where fp32 does, so the fault fails by overflow, never by rounding), or unguarded when
///   LseMergeOp::unguarded (semantics::lse_merge_unguarded: NaN for two empty rows);
/// - OutCorrectionOp: weight exp(L_i − L) in fp32, dst = dtype(src·w) or dtype(dst + src·w) (O is kept in the
///   kernel's output dtype, every add_ rounds, §4.4);
/// - CopyOp with accumulate and ReduceScatterOp sums round to the accumulator format: fp32, or dtype when
///   Schedule::grad_accumulation_in_dtype (TE's F16 path, §5.3); plain copies, messages, all-to-alls and
///   all-gathers move values unchanged;
/// - gathered outputs out, dq, dk, dv are rounded to dtype (the tensors TE returns), softmax_lse to fp32.
/// With dtype fp64 every rounding is the identity and the result equals the 3-argument overload bit for bit.
/// Reduce-scatter sums in member order 0, 1, … (the first assigns), as lowered (lowering.hpp).
ExecutionResult execute_schedule(const Schedule& schedule, const AttentionInputs& inputs,
                                 const ExecutionOptions& options);

}  // namespace hcpsim
