#pragma once
// Private to oracles/: what the parts of the CPU executor (cpu_executor.hpp) share — the numerics of the run,
// every virtual rank's buffers and program position, the mailbox of posted messages, the storage kept for reuse,
// and the counters; plus the buffer helpers every op handler uses (allocation, liveness, row-range checks).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <tuple>
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

/// Per-rank execution state.
struct RankState {
  const RankProgram* program = nullptr;
  std::vector<HostTensor> buffers;  // indexed by BufferId
  std::vector<bool> live;
  size_t pc = 0;             // next op
  bool send_posted = false;  // the current SendRecvOp has posted its send
  bool a2a_arrived = false;  // the current AllToAllOp is waiting for its group

  [[nodiscard]] bool finished() const { return pc >= program->ops.size(); }
  [[nodiscard]] const Op& current() const { return program->ops[pc]; }
};

/// Posted send/recv messages, FIFO per (source cp rank, destination cp rank, tag); a message is a snapshot of the
/// sender's concatenated send buffers. Defined in executor_rendezvous.cpp.
class Mailbox {
 public:
  using Key = std::tuple<int64_t, int64_t, int64_t>;  // (source cp rank, destination cp rank, tag)

  /// Empty storage for a new message: a delivered message's when one is kept (no fresh pages, see allocate()).
  std::vector<double> blank_message();
  /// Appends `message` to the queue of `key`.
  void post(const Key& key, std::vector<double> message);
  /// The oldest message of `key`, or nullptr when none is waiting.
  [[nodiscard]] const std::vector<double>* oldest(const Key& key) const;
  /// Removes the oldest message of `key` (which must be waiting), keeping its storage for reuse.
  void pop_oldest(const Key& key);
  /// HCPSIM_ASSERT that every posted message was received (names the first undelivered one).
  void check_all_delivered() const;

 private:
  std::map<Key, std::deque<std::vector<double>>> queues_;
  std::vector<std::vector<double>> spare_;  // storage of delivered messages, reused by blank_message()
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
  Mailbox mailbox;
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
