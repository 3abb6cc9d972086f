#pragma once
// Private to sim/: what the parts of the discrete-event engine (sim_engine.hpp) share — the inputs of one run,
// the event queue, where every rank's streams stand and when each op ran, the symmetry classes, and the hook
// through which a part reports that an op has finished.

#include <array>
#include <cstdint>
#include <vector>

#include "hcpsim/core/error.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "symmetry_reduction.hpp"

namespace hcpsim::sim::detail {

// Event priorities (lower first among events at one time; equal priorities run FIFO). Completions run before
// the initial per-rank kick so that at t = 0 zero-time effects are applied in a fixed order; the network's
// max-min recomputation runs last, so that all flow starts and ends of one timestamp are batched.
constexpr int kPriorityCompletion = 0;
constexpr int kPriorityKick = 1;
constexpr int kPriorityNetwork = 2;

inline size_t index_of(int64_t i) { return static_cast<size_t>(i); }

/// (cp rank, op index) in one int64: rank in the high 32 bits. Both are < 2^31 (HCPSIM_ASSERT at pack time).
/// One int64 keeps an event's capture (with one pointer) within std::function's small buffer.
inline int64_t pack(int64_t rank, OpIndex i) {
  HCPSIM_ASSERT(rank < (int64_t{1} << 31), "cp rank too large to pack");
  HCPSIM_ASSERT(i >= 0, "negative op index");
  return rank * (int64_t{1} << 32) + i;
}
inline OpIndex unpack_op(int64_t key) { return static_cast<OpIndex>(key & 0xffffffff); }
inline size_t stream_index(Stream s) { return static_cast<size_t>(s); }
inline size_t phase_index(Phase p) { return static_cast<size_t>(p); }
inline size_t level_index(LinkLevel l) { return static_cast<size_t>(l); }

/// Run-time state of one op (24 bytes: the engine touches one per event).
struct OpRuntime {
  TimePs start_ps = -1;
  TimePs end_ps = -1;
  /// Entries of Op::deps (a dep listed twice counts twice) whose op has not finished; the op may start when this
  /// is 0 and it heads its stream. Counted down by Engine::finish_op, so no stream head polls its deps.
  int32_t remaining_deps = 0;
  int16_t pending_transfers = 0;  ///< send_recv: messages of this op not yet delivered (at most 2)
  /// stream_index(Op::stream), and whether the op is a communication op whose kernel runs on the GPU's SMs
  /// (is_communication(Op::kind()), except a SendRecvOp with copy_engine): such an op slows the GPU's compute
  /// while it runs (GpuSharing::comm_running_change). Copied here so that finishing an op reads only this
  /// record, not the Op (at large CP every rank's program is far from the cache).
  uint8_t stream = 0;
  bool takes_sms = false;
  [[nodiscard]] bool started() const { return start_ps >= 0; }
  [[nodiscard]] bool finished() const { return end_ps >= 0; }
};

/// Where the streams of one rank stand and when each of its ops ran (empty for an image rank of a
/// symmetry-reduced run, which is never executed).
struct RankProgress {
  std::array<std::vector<OpIndex>, kStreamCount> stream_ops;  ///< op indices of each stream, in list order
  std::array<size_t, kStreamCount> cursor{};                  ///< position of the stream's next unfinished op
  std::vector<OpRuntime> ops;
  /// The ops that depend on each op, as one flat array (compressed rows): the dependents of op i are
  /// dependents[dependents_begin[i] .. dependents_begin[i + 1]), once per entry of their Op::deps.
  std::vector<int32_t> dependents_begin;
  std::vector<OpIndex> dependents;
  /// Per phase, the full-speed GPU time the rank's compute kernels did not get because a communication op ran
  /// beside them (GpuSpec::compute_slowdown_during_comm), in 1/kShareScale ps (GpuSharing::advance_gpu;
  /// TimeBreakdown::comm_slowdown_ps).
  std::array<int64_t, kPhaseCount> comm_slowdown_units{};
};

/// One side of a communication: the op of a rank that takes part.
struct Endpoint {
  int64_t cp_rank = -1;
  OpIndex op = -1;
};

/// Told by the parts of the engine that an op has finished; the engine then advances the op's stream and starts
/// whatever became ready.
class OpFinisher {
 public:
  OpFinisher() = default;
  OpFinisher(const OpFinisher&) = delete;
  OpFinisher& operator=(const OpFinisher&) = delete;
  virtual ~OpFinisher() = default;
  /// Op i of `rank` finishes now.
  virtual void finish_op(int64_t rank, OpIndex i) = 0;
};

/// The inputs of one run and the state that every part of the engine reads. The references must outlive it.
struct SimContext {
  SimContext(const Schedule& schedule_in, const ClusterSpec& cluster_in, const Topology& topology_in,
             const std::vector<int64_t>& gpu_of_cp_rank, const SimOptions& options_in, OpFinisher& finisher_in)
      : schedule(schedule_in),
        cluster(cluster_in),
        topology(topology_in),
        gpus(gpu_of_cp_rank),
        options(options_in),
        finisher(finisher_in),
        classes(options_in.symmetry_reduction
                    ? SymmetryClasses(CpLayout::a2a_group_classes(schedule_in.a2a_size, schedule_in.p2p_size))
                    : SymmetryClasses()) {}

  const Schedule& schedule;
  const ClusterSpec& cluster;
  const Topology& topology;
  const std::vector<int64_t>& gpus;  ///< global GPU index of each cp rank
  SimOptions options;
  OpFinisher& finisher;
  SymmetryClasses classes;           ///< size 1 unless options.symmetry_reduction
  std::vector<int64_t> nodes;        ///< node of each cp rank's GPU
  EventQueue queue;
  std::vector<RankProgress> progress;  ///< indexed by cp rank

  [[nodiscard]] int64_t rank_count() const { return static_cast<int64_t>(schedule.ranks.size()); }
  [[nodiscard]] const RankProgram& program(int64_t rank) const { return schedule.ranks[index_of(rank)]; }
  [[nodiscard]] const Op& op_of(int64_t rank, OpIndex i) const { return program(rank).ops[index_of(i)]; }
  [[nodiscard]] int64_t node(int64_t rank) const { return nodes[index_of(rank)]; }
  [[nodiscard]] OpRuntime& op_runtime(int64_t rank, OpIndex i) {
    return progress[index_of(rank)].ops[index_of(i)];
  }
  [[nodiscard]] const OpRuntime& op_runtime(int64_t rank, OpIndex i) const {
    return progress[index_of(rank)].ops[index_of(i)];
  }

  /// Schedules the finish of op i of `rank` delay_ps from now, as a completion event.
  void finish_after(TimePs delay_ps, int64_t rank, OpIndex i) {
    const int64_t key = pack(rank, i);
    OpFinisher* f = &finisher;
    queue.schedule_after(delay_ps, kPriorityCompletion, [f, key] { f->finish_op(key >> 32, unpack_op(key)); });
  }
};

}  // namespace hcpsim::sim::detail
