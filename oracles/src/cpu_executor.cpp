// The CPU executor's public entry points and its walk: core's ProgramWalker (the GPU plan's walk too) yields single
// ops, executed here, and communication batches, applied as copy segments (executor_segments.cpp); the op handlers
// live in executor_compute_ops.cpp (compute), executor_buffers.cpp and executor_bindings.cpp (buffers and I/O
// bindings).

#include "hcpsim/oracles/cpu_executor.hpp"

#include <string>
#include <type_traits>
#include <variant>

#include "executor_bindings.hpp"
#include "executor_compute_ops.hpp"
#include "executor_segments.hpp"
#include "executor_state.hpp"
#include "hcpsim/core/error.hpp"
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
  std::visit(
      [&](const auto& payload) {
        using T = std::decay_t<decltype(payload)>;
        if constexpr (std::is_same_v<T, AllocOp>) {
          HostTensor& t = allocate(state, st, payload.buffer, "AllocOp");
          if (payload.zero) t.fill(0.0);
        } else if constexpr (std::is_same_v<T, FreeOp>) {
          release(state, st, payload.buffer);
        } else if constexpr (std::is_same_v<T, SendRecvOp> || std::is_same_v<T, AllToAllOp> ||
                             std::is_same_v<T, AllGatherOp> || std::is_same_v<T, ReduceScatterOp>) {
          HCPSIM_ASSERT(false, where + ": a communication op outside a batch");
        } else if constexpr (std::is_same_v<T, AttnFwdBlockOp>) {
          run_attn_fwd_block(state, st, payload, where);
        } else if constexpr (std::is_same_v<T, AttnBwdBlockOp>) {
          run_attn_bwd_block(state, st, payload, where);
        } else if constexpr (std::is_same_v<T, LseMergeOp>) {
          run_lse_merge(state, st, payload, where);
        } else if constexpr (std::is_same_v<T, OutCorrectionOp>) {
          run_out_correction(state, st, payload, where);
        } else if constexpr (std::is_same_v<T, CopyOp>) {
          run_copy(state, st, payload, where);
        } else if constexpr (std::is_same_v<T, GemmOp> || std::is_same_v<T, ElementwiseOp>) {
          // Layer-model ops time the whole training step; the oracle executes attention schedules only.
          HCPSIM_ASSERT(false, where + ": the CPU executor runs attention schedules, not layer-model ops");
        } else {
          static_assert(std::is_same_v<T, AllocOp>, "every op kind needs an implementation");
        }
      },
      op.payload);
  ++state.stats.ops_executed;
}

/// Walks the schedule (ProgramWalker) to its end: single ops one by one, batches as copy segments.
void run(ExecutorState& state) {
  ProgramWalker walker(state.schedule);
  for (WalkStep step; walker.next(step);) {
    if (step.is_batch) {
      run_batch(state, step.members);
    } else {
      execute(state, step.op);
    }
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

ExecutionResult execute_schedule(const Schedule& schedule, const AttentionInputs& inputs,
                                 const ExecutionOptions& options) {
  const RunBlocker blocker = numeric_run_blocker(schedule);
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
  cpu_exec::run(state);
  ExecutionResult result;
  result.outputs = cpu_exec::gather_outputs(state);
  result.stats = state.stats;
  return result;
}

}  // namespace hcpsim
