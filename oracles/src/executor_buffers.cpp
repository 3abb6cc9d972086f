// The CPU executor's run state and rank buffers: allocation with storage reuse, liveness and row-range checks.

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

#include "executor_state.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim::cpu_exec {

namespace {

std::string shape_text(const HostTensor& t) {
  return fmt::format("[{}, {}, {}, {}]", t.batch(), t.rows(), t.heads(), t.width());
}

}  // namespace

ExecutorState::ExecutorState(const Schedule& schedule_in, const ExecutionOptions& options)
    : schedule(schedule_in), threads(options.threads), dtype(options.dtype) {
  HCPSIM_ASSERT(threads >= 1, "execute_schedule: threads must be >= 1");
  // Accumulators: fp32 (or fp64 when the whole run is fp64) unless the schedule asks for TE's F16 behaviour.
  acc_dtype = dtype == Dtype::fp64 ? Dtype::fp64 : (schedule.grad_accumulation_in_dtype ? dtype : Dtype::fp32);
  scale = effective_softmax_scale(schedule.shape);
  ranks.resize(schedule.ranks.size());
  for (size_t i = 0; i < schedule.ranks.size(); ++i) {
    const RankProgram& prog = schedule.ranks[i];
    HCPSIM_ASSERT(prog.rank == static_cast<int64_t>(i), "execute_schedule: ranks must be indexed by rank");
    RankState& st = ranks[i];
    st.program = &prog;
    st.buffers.resize(prog.buffers.size());
    st.live.assign(prog.buffers.size(), false);
  }
}

std::string op_text(const RankState& st, size_t pc) {
  const Op& op = st.program->ops[pc];
  return fmt::format("cp_rank {} op #{} {} '{}'", st.program->cp_rank, pc, to_string(op.kind()), op.label.str());
}

HostTensor& allocate(ExecutorState& state, RankState& st, BufferId id, const char* why) {
  HCPSIM_ASSERT(id >= 0 && static_cast<size_t>(id) < st.buffers.size(),
                fmt::format("cp_rank {}: buffer id {} out of range ({})", st.program->cp_rank, id, why));
  HCPSIM_ASSERT(!st.live[static_cast<size_t>(id)],
                fmt::format("cp_rank {}: buffer '{}' allocated while live ({})", st.program->cp_rank,
                            st.program->buffers[static_cast<size_t>(id)].name, why));
  const BufferDecl& d = st.program->buffers[static_cast<size_t>(id)];
  HostTensor& buf = st.buffers[static_cast<size_t>(id)];
  // Reuse the storage of a freed buffer of the same shape: a fresh multi-megabyte allocation costs a page fault
  // per 4 KiB on first touch, which dominated the executor's own time. Refilled with NaN either way, so a read of
  // an unwritten element still surfaces; which storage is reused changes no value.
  // Ranks run concurrently between communication batches (cpu_executor.cpp): the pool is shared, so it is taken
  // from under a lock; the refill runs outside it.
  const std::array<int64_t, 4> dims{d.batch, d.rows, d.heads, d.width};
  bool reused = false;
#pragma omp critical(hcpsim_executor_spare_pool)
  {
    auto& spare = state.spare;
    const auto it = std::find_if(spare.begin(), spare.end(), [&](const HostTensor& t) { return t.shape() == dims; });
    if (it != spare.end()) {
      buf = std::move(*it);
      spare.erase(it);
      reused = true;
    }
  }
  if (reused) {
    buf.fill(kNaN);
  } else {
    buf = HostTensor(d.batch, d.rows, d.heads, d.width, kNaN);
  }
  st.live[static_cast<size_t>(id)] = true;
  return st.buffers[static_cast<size_t>(id)];
}

void release(ExecutorState& state, RankState& st, BufferId id) {
  HostTensor& freed = live_buffer(st, id, "FreeOp");
#pragma omp critical(hcpsim_executor_spare_pool)
  {
    if (state.spare.size() < kMaxSpareBuffers) state.spare.push_back(std::move(freed));
  }
  st.buffers[static_cast<size_t>(id)] = HostTensor();
  st.live[static_cast<size_t>(id)] = false;
}

HostTensor& live_buffer(RankState& st, BufferId id, const char* role) {
  HCPSIM_ASSERT(id >= 0 && static_cast<size_t>(id) < st.buffers.size(),
                fmt::format("cp_rank {}: {} buffer id {} out of range", st.program->cp_rank, role, id));
  HCPSIM_ASSERT(st.live[static_cast<size_t>(id)],
                fmt::format("cp_rank {}: {} buffer '{}' used while not live", st.program->cp_rank, role,
                            st.program->buffers[static_cast<size_t>(id)].name));
  return st.buffers[static_cast<size_t>(id)];
}

void check_rows(const HostTensor& t, RowRange range, const std::string& where) {
  HCPSIM_ASSERT(range.begin >= 0, where + ": negative row begin");
  HCPSIM_ASSERT(range.count >= 0, where + ": negative row count");
  HCPSIM_ASSERT(range.end() <= t.rows(), where + ": row range outside buffer " + shape_text(t));
}

}  // namespace hcpsim::cpu_exec
