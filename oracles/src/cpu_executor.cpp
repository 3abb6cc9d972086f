// The CPU executor's public entry points and its walk: core's ProgramWalker (the GPU plan's walk too) yields single
// ops, executed here, and communication batches, applied as copy segments (executor_segments.cpp); the op handlers
// live in executor_compute_ops.cpp (compute), executor_buffers.cpp and executor_bindings.cpp (buffers and I/O
// bindings).

#include "hcpsim/oracles/cpu_executor.hpp"

#include <string>

#include "executor_bindings.hpp"
#include "executor_compute_ops.hpp"
#include "executor_segments.hpp"
#include "executor_state.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/op_visit.hpp"
#include "hcpsim/core/program_walker.hpp"
#include "hcpsim/core/schedule_hazards.hpp"

namespace hcpsim {

namespace cpu_exec {
namespace {

/// Executes non-communication op `ref` (the walker's single step) on its rank.
void execute(ExecutorState& state, const OpRef& ref) {
  RankState& st = state.ranks[static_cast<size_t>(ref.rank)];
  const auto pc = static_cast<size_t>(ref.op);
  const Op& op = st.program->ops[pc];
  const std::string where = op_text(st, pc);
  auto communication = [&](const auto&) { HCPSIM_ASSERT(false, where + ": a communication op outside a batch"); };
  // Layer-model ops time the whole training step; the oracle executes attention schedules only (can_execute).
  auto layer_op = [&](const auto&) {
    HCPSIM_ASSERT(false, where + ": the CPU executor runs attention schedules, not layer-model ops");
  };
  visit_op(op.payload,
           Overload{
               [&](const AllocOp& p) {
                 HostTensor& t = allocate(state, st, p.buffer, "AllocOp");
                 if (p.zero) t.fill(0.0);
               },
               [&](const FreeOp& p) { release(state, st, p.buffer); },
               [&](const SendRecvOp& p) { communication(p); },
               [&](const AllToAllOp& p) { communication(p); },
               [&](const AllGatherOp& p) { communication(p); },
               [&](const ReduceScatterOp& p) { communication(p); },
               [&](const AttnFwdBlockOp& p) { run_attn_fwd_block(state, st, p, where); },
               [&](const AttnBwdBlockOp& p) { run_attn_bwd_block(state, st, p, where); },
               [&](const LseMergeOp& p) { run_lse_merge(state, st, p, where); },
               [&](const OutCorrectionOp& p) { run_out_correction(state, st, p, where); },
               [&](const CopyOp& p) { run_copy(state, st, p, where); },
               [&](const GemmOp& p) { layer_op(p); },
               [&](const ElementwiseOp& p) { layer_op(p); },
           });
  ++state.stats.ops_executed;
}

/// Walks the schedule (ProgramWalker) to its end: single ops one by one, batches as copy segments.
void run(ExecutorState& state, const std::function<void(size_t, size_t)>& progress) {
  ProgramWalker walker(state.schedule);
  size_t total = 0, done = 0;
  for (const RankProgram& p : state.schedule.ranks) total += p.ops.size();
  for (WalkStep step; walker.next(step);) {
    if (step.is_batch) {
      run_batch(state, step.members);
      done += step.members.size();
    } else {
      execute(state, step.op);
      ++done;
    }
    if (progress) progress(done, total);
  }
}

}  // namespace
}  // namespace cpu_exec

namespace {

bool has_shape(const HostTensor& t, int64_t batch, int64_t rows, int64_t heads, int64_t width) {
  return t.batch() == batch && t.rows() == rows && t.heads() == heads && t.width() == width;
}

}  // namespace

ExecutionResult execute_schedule(const Schedule& schedule, const AttentionInputs& inputs, int threads) {
  return execute_schedule(schedule, inputs, ExecutionOptions{threads, Dtype::fp64});
}

RunBlocker cpu_can_run(const Schedule& schedule) { return numeric_run_blocker(schedule); }

ExecutionResult execute_schedule(const Schedule& schedule, const AttentionInputs& inputs,
                                 const ExecutionOptions& options) {
  const RunBlocker blocker = cpu_can_run(schedule);
  HCPSIM_ASSERT(!blocker.blocked(), "CPU executor: " + blocker.text());
  schedule.check_invariants();
#ifndef NDEBUG
  check_hazards(schedule);
#endif
  const AttentionShape& sh = schedule.shape;
  HCPSIM_ASSERT(has_shape(inputs.q, sh.batch, sh.seq_length, sh.heads_q, sh.head_dim_qk),
                "execute_schedule: q is not [B, S, H, dk] of schedule.shape");
  HCPSIM_ASSERT(has_shape(inputs.k, sh.batch, sh.seq_length, sh.heads_kv, sh.head_dim_qk),
                "execute_schedule: k is not [B, S, Hkv, dk] of schedule.shape");
  HCPSIM_ASSERT(has_shape(inputs.v, sh.batch, sh.seq_length, sh.heads_kv, sh.head_dim_v),
                "execute_schedule: v is not [B, S, Hkv, dv] of schedule.shape");
  HCPSIM_ASSERT(has_shape(inputs.dout, sh.batch, sh.seq_length, sh.heads_q, sh.head_dim_v),
                "execute_schedule: dout is not [B, S, H, dv] of schedule.shape");
  cpu_exec::ExecutorState state(schedule, options);
  cpu_exec::load_inputs(state, inputs);
  cpu_exec::run(state, options.progress);
  ExecutionResult result;
  result.outputs = cpu_exec::gather_outputs(state);
  result.stats = state.stats;
  return result;
}

}  // namespace hcpsim
