// The CPU executor's program walker and public entry points: round-robin over the virtual ranks, each running its
// ops in list order until it blocks; the op handlers live in executor_compute_ops.cpp (compute),
// executor_comm_ops.cpp (data movement of communication ops), executor_rendezvous.cpp (where communication meets),
// executor_buffers.cpp and executor_bindings.cpp (buffers and I/O bindings).

#include "hcpsim/oracles/cpu_executor.hpp"

#include <string>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "executor_bindings.hpp"
#include "executor_comm_ops.hpp"
#include "executor_compute_ops.hpp"
#include "executor_state.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule_hazards.hpp"

namespace hcpsim {

namespace cpu_exec {
namespace {

/// Executes the current op of `st`; false if it blocks. `touched`: state changed although the op blocks.
bool execute(ExecutorState& state, RankState& st, bool& touched) {
  const Op& op = st.current();
  const std::string where = op_text(st, st.pc);
  return std::visit(
      [&](const auto& payload) -> bool {
        using T = std::decay_t<decltype(payload)>;
        if constexpr (std::is_same_v<T, AllocOp>) {
          HostTensor& t = allocate(state, st, payload.buffer, "AllocOp");
          if (payload.zero) t.fill(0.0);
        } else if constexpr (std::is_same_v<T, FreeOp>) {
          release(state, st, payload.buffer);
        } else if constexpr (std::is_same_v<T, SendRecvOp>) {
          return run_send_recv(state, st, payload, where, touched);
        } else if constexpr (std::is_same_v<T, AllToAllOp>) {
          return run_all_to_all(state, st, payload, where, touched);
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
        } else if constexpr (std::is_same_v<T, AllGatherOp>) {
          return run_all_gather(state, st, payload, where, touched);
        } else if constexpr (std::is_same_v<T, ReduceScatterOp>) {
          return run_reduce_scatter(state, st, payload, where, touched);
        } else if constexpr (std::is_same_v<T, GemmOp> || std::is_same_v<T, ElementwiseOp>) {
          // Layer-model ops time the whole training step; the oracle executes attention schedules only.
          HCPSIM_ASSERT(false, where + ": the CPU executor runs attention schedules, not layer-model ops");
        } else {
          static_assert(std::is_same_v<T, AllocOp>, "every op kind needs an implementation");
        }
        return true;
      },
      op.payload);
}

/// Runs rank `st` until it blocks or finishes; true if anything happened.
bool run_until_blocked(ExecutorState& state, RankState& st) {
  bool progress = false;
  while (!st.finished()) {
    bool touched = false;
    const bool done = execute(state, st, touched);
    progress = progress || touched;
    if (!done) break;
    ++st.pc;
    st.send_posted = false;
    st.a2a_arrived = false;
    ++state.stats.ops_executed;
    progress = true;
  }
  return progress;
}

/// The deadlock report: every blocked rank's op and what it waits for.
std::string deadlock_text(const ExecutorState& state) {
  std::string text = "execute_schedule: deadlock, no rank can progress:";
  for (const RankState& st : state.ranks) {
    if (st.finished()) continue;
    text += "\n  " + op_text(st, st.pc);
    if (const auto* sr = std::get_if<SendRecvOp>(&st.current().payload)) {
      text += fmt::format(" waits for a message from cp_rank {} tag {}", sr->recv_peer, sr->recv_tag);
    } else if (const auto* a2a = std::get_if<AllToAllOp>(&st.current().payload)) {
      text += fmt::format(" waits for all-to-all tag {} of group [{}]", a2a->tag, fmt::join(a2a->group, ", "));
    }
  }
  return text;
}

/// Round-robin passes over the ranks until all have finished; HCPSIM_ASSERT on a pass without progress
/// (deadlock) or a message nobody received.
void run(ExecutorState& state) {
  for (;;) {
    ++state.stats.rounds;
    bool progress = false;
    bool all_finished = true;
    for (RankState& st : state.ranks) {
      progress = run_until_blocked(state, st) || progress;
      all_finished = all_finished && st.finished();
    }
    if (all_finished) break;
    HCPSIM_ASSERT(progress, deadlock_text(state));
  }
  state.mailbox.check_all_delivered();
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
