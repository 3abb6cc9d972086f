// The CPU executor's public entry points and its walk: core's ProgramWalker (the GPU plan's walk too) yields single
// ops, executed here, and communication batches, applied as copy segments (executor_segments.cpp); the op handlers
// live in executor_compute_ops.cpp (compute), executor_buffers.cpp and executor_bindings.cpp (buffers and I/O
// bindings).

#include "hcpsim/oracles/cpu_executor.hpp"

#include <algorithm>
#include <exception>
#include <functional>
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
#pragma omp atomic
  ++state.stats.ops_executed;
}

/// Executes the single ops the walk yielded between two communication batches (`pending`, in walk order).
/// Ops of different ranks touch only their own rank's buffers there (the ordering contract: data crosses ranks
/// only in a batch), so the ranks run concurrently, each through its own ops in walk order, one rank per thread
/// with single-threaded kernels; a lone rank keeps every thread for its kernels. Every kernel computes the same
/// bits for any thread count, so the results do not depend on this split. An assertion is rethrown for the op
/// that comes first in walk order, the one a sequential walk would have stopped at.
void run_pending(ExecutorState& state, const std::vector<OpRef>& pending) {
  std::vector<std::vector<size_t>> by_rank(state.ranks.size());  // indices into pending
  for (size_t i = 0; i < pending.size(); ++i) by_rank[static_cast<size_t>(pending[i].rank)].push_back(i);
  std::vector<size_t> busy;
  for (size_t r = 0; r < by_rank.size(); ++r)
    if (!by_rank[r].empty()) busy.push_back(r);
  if (busy.size() <= 1 || state.threads <= 1) {
    for (const OpRef& ref : pending) execute(state, ref);
    return;
  }
  const int kernel_threads = state.threads;
  state.threads = 1;  // kernels inside the rank-parallel region
  std::vector<std::exception_ptr> errors(busy.size());
  std::vector<size_t> failed_at(busy.size(), pending.size());
  const int n = static_cast<int>(std::min<size_t>(static_cast<size_t>(kernel_threads), busy.size()));
#pragma omp parallel for schedule(dynamic, 1) num_threads(n)
  for (size_t b = 0; b < busy.size(); ++b) {
    for (size_t i : by_rank[busy[b]]) {
      try {
        execute(state, pending[i]);
      } catch (...) {
        errors[b] = std::current_exception();
        failed_at[b] = i;
        break;
      }
    }
  }
  state.threads = kernel_threads;
  size_t first = busy.size();
  for (size_t b = 0; b < busy.size(); ++b)
    if (errors[b] && (first == busy.size() || failed_at[b] < failed_at[first])) first = b;
  if (first < busy.size()) std::rethrow_exception(errors[first]);
}

/// Walks the schedule (ProgramWalker) to its end: the single ops between two batches as run_pending runs them,
/// batches as copy segments. `progress`, when set, hears (ops done, ops of the schedule) after each group and batch.
void run(ExecutorState& state, const std::function<void(size_t, size_t)>& progress) {
  ProgramWalker walker(state.schedule);
  size_t total = 0, done = 0;
  for (const RankProgram& p : state.schedule.ranks) total += p.ops.size();
  std::vector<OpRef> pending;
  auto flush = [&] {
    run_pending(state, pending);
    done += pending.size();
    pending.clear();
    if (progress) progress(done, total);
  };
  for (WalkStep step; walker.next(step);) {
    if (step.is_batch) {
      flush();
      run_batch(state, step.members);
      done += step.members.size();
      if (progress) progress(done, total);
    } else {
      pending.push_back(step.op);
    }
  }
  flush();
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
