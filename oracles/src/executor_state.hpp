#pragma once
// Private to oracles/: what the parts of the CPU executor (cpu_executor.hpp) share — the numerics of the run,
// every virtual rank's buffers, the storage kept for reuse, and the counters; plus the buffer helpers every op handler uses (allocation, liveness, row-range checks).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/oracles/cpu_executor.hpp"
#include "hcpsim/oracles/host_tensor.hpp"

namespace hcpsim::cpu_exec {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
/// Freed buffers kept for reuse: bounds the memory held beyond the schedule's own peak. A schedule frees few
/// distinct shapes (per-step KV, O/LSE and gradient buffers), so a small pool catches nearly every allocation.
constexpr size_t kMaxSpareBuffers = 16;

/// Per-rank execution state (the program position is the walker's, ProgramWalker in cpu_executor.cpp).
struct RankState {
  const RankProgram* program = nullptr;
  std::vector<HostTensor> buffers;  // indexed by BufferId
  std::vector<bool> live;
};

/// The inputs and the whole state of one executor run. `schedule` must outlive it.
struct ExecutorState {
  /// One RankState per RankProgram (ranks must be indexed by cp_rank); HCPSIM_ASSERT on threads < 1.
  ExecutorState(const Schedule& schedule_in, const ExecutionOptions& options);

  const Schedule& schedule;
  int threads;
  Dtype dtype = Dtype::fp64;
  Dtype acc_dtype = Dtype::fp64;  ///< format of sums (accumulating copies, reduce-scatter)
  double scale = 0;               ///< softmax scale of the attention blocks
  std::vector<RankState> ranks;   ///< indexed by cp_rank
  std::vector<HostTensor> spare;  ///< storage of freed buffers, reused by allocate() for the same shape
  ExecutionStats stats;
};

/// "cp_rank R op #pc kind 'label'": how every assertion names an op.
std::string op_text(const RankState& st, size_t pc);

/// Makes buffer `id` of `st` live, filled with quiet NaN (storage of a freed buffer of the same shape is reused);
/// HCPSIM_ASSERT on an id out of range or a buffer already live. `why` names the caller in the message.
HostTensor& allocate(ExecutorState& state, RankState& st, BufferId id, const char* why);

/// FreeOp: buffer `id` stops being live; its storage is kept for reuse while the pool has room.
void release(ExecutorState& state, RankState& st, BufferId id);

/// Buffer `id` of `st`; HCPSIM_ASSERT unless it is live. `role` names the operand in the message.
HostTensor& live_buffer(RankState& st, BufferId id, const char* role);

/// HCPSIM_ASSERT that `range` lies within the rows of `t`.
void check_rows(const HostTensor& t, RowRange range, const std::string& where);

}  // namespace hcpsim::cpu_exec
