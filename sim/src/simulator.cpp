#include "hcpsim/sim/simulator.hpp"

#include <algorithm>
#include <limits>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/sim/flow_network.hpp"

namespace hcpsim::sim {

namespace {

// Event priorities (lower first among events at one time; equal priorities run FIFO). Completions run before
// the initial per-rank kick so that at t = 0 zero-time effects are applied in a fixed order; the network's
// max-min recomputation runs last, so that all flow starts and ends of one timestamp are batched.
constexpr int kPriorityCompletion = 0;
constexpr int kPriorityKick = 1;
constexpr int kPriorityNetwork = 2;

// Processor sharing of a GPU's SMs in integer arithmetic: remaining kernel work is kept in units of
// 1/kShareScale ps of full-speed GPU time, so that with n ≤ kStreamCount running kernels each one's progress
// over Δ ps, Δ·kShareScale/n units, is an integer. kShareScale = 1000·lcm(1, 2, 3); the factor 1000 gives a
// compute slowdown during communication (a real factor) a per-mille-exact integer rate.
constexpr int64_t kShareScale = 6000;
static_assert(kStreamCount == 3, "kShareScale must be divisible by every possible number of running kernels");

// A deadlock report lists at most this many ranks in detail (the rest are counted), so that a large schedule
// still gives a readable message.
constexpr int64_t kDeadlockReportRanks = 16;

// Symmetry reduction: a link shared by concurrent ring messages must have this relative headroom above the sum of
// their route minimum capacities, so that no rounding of the max-min arithmetic can make it a bottleneck.
// Source: far above double rounding (~1e-16 relative per operation), far below any real headroom.
constexpr double kShadowMargin = 1e-9;

size_t index_of(int64_t i) { return static_cast<size_t>(i); }

/// (cp rank, op index) in one int64: rank in the high 32 bits. Both are < 2^31 (HCPSIM_ASSERT at pack time).
int64_t pack(int64_t rank, OpIndex i) {
  HCPSIM_ASSERT(rank < (int64_t{1} << 31), "cp rank too large to pack");
  HCPSIM_ASSERT(i >= 0, "negative op index");
  return rank * (int64_t{1} << 32) + i;
}
OpIndex unpack_op(int64_t key) { return static_cast<OpIndex>(key & 0xffffffff); }
size_t stream_index(Stream s) { return static_cast<size_t>(s); }
size_t phase_index(Phase p) { return static_cast<size_t>(p); }
size_t level_index(LinkLevel l) { return static_cast<size_t>(l); }

bool is_compute_stream(Stream s) { return s == Stream::compute || s == Stream::cp; }

/// Run-time state of one op.
struct OpRuntime {
  TimePs start_ps = -1;
  TimePs end_ps = -1;
  int pending_transfers = 0;  ///< send_recv: messages of this op not yet delivered
  [[nodiscard]] bool started() const { return start_ps >= 0; }
  [[nodiscard]] bool finished() const { return end_ps >= 0; }
};

/// A kernel running on a shared GPU.
struct RunningKernel {
  OpIndex op = -1;
  int64_t remaining_units = 0;  ///< full-speed GPU time still needed, in 1/kShareScale ps
  EventId completion = -1;      ///< pending completion event (rescheduled whenever the sharing changes)
};

/// Run-time state of one rank.
struct RankRuntime {
  std::vector<RunningKernel> running;  ///< kernels sharing the GPU now, in start order
  int64_t rate_units_per_ps = kShareScale;  ///< progress of each running kernel since gpu_updated_ps
  int64_t comm_running = 0;            ///< communication ops started and not finished
  TimePs gpu_updated_ps = 0;           ///< time up to which `running` progress has been applied
  std::array<std::vector<OpIndex>, kStreamCount> stream_ops;  ///< op indices of each stream, in list order
  std::array<size_t, kStreamCount> cursor{};                  ///< position of the stream's next unfinished op
  std::vector<OpRuntime> ops;
  std::vector<char> live;  ///< per buffer: currently allocated
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
  std::array<int64_t, kPhaseCount> phase_peak_bytes{};  ///< peak reached by allocs of each phase
  int64_t input_bytes = 0;
  MessageTable messages_sent{};
};

/// One side of a communication: the op of a rank that takes part.
struct Endpoint {
  int64_t cp_rank = -1;
  OpIndex op = -1;
};

/// A message that one side has reached and the other not yet. Key: (source, destination, tag).
struct HalfMessage {
  Endpoint endpoint;
  int64_t size_bytes = 0;
};

/// Messages with equal keys match in issue order; every queued entry waits for the opposite side, so a
/// queue holds only senders or only receivers. Vectors, not deques: a queue rarely holds more than one entry,
/// and a std::deque allocates a whole block on construction.
struct MessageQueue {
  std::vector<HalfMessage> senders;
  std::vector<HalfMessage> receivers;
};

using MessageKey = std::tuple<int64_t, int64_t, int64_t>;       // (src cp rank, dst cp rank, tag)
using AllToAllKey = std::tuple<int, int64_t, std::vector<int64_t>>;  // (op kind, tag, group)

/// Union of half-open intervals, sorted and disjoint.
std::vector<std::pair<TimePs, TimePs>> merge_intervals(std::vector<std::pair<TimePs, TimePs>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<TimePs, TimePs>> out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;  // zero-length ops occupy no time
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

TimePs measure(const std::vector<std::pair<TimePs, TimePs>>& merged) {
  TimePs total = 0;
  for (const auto& iv : merged) total += iv.second - iv.first;
  return total;
}

class Engine {
 public:
  Engine(const Schedule& schedule, const ClusterSpec& cluster, const Topology& topology,
         const std::vector<int64_t>& gpu_of_cp_rank, const SimOptions& options)
      : schedule_(schedule),
        cluster_(cluster),
        topology_(topology),
        gpus_(gpu_of_cp_rank),
        options_(options),
        network_(queue_, capacities(topology), kPriorityCompletion, kPriorityNetwork) {
    for (int64_t g : gpus_) nodes_.push_back(topology.gpu_node(g));
    if (options_.symmetry_reduction) {
      class_size_ = schedule.a2a_size;
      shadow_count_.assign(topology.links().size(), 0);
      shadow_mincap_sum_.assign(topology.links().size(), 0.0);
      shadow_image_count_.assign(topology.links().size(), 0);
      shadow_busy_since_.assign(topology.links().size(), 0);
      shadow_usage_.resize(topology.links().size());
    }
    pair_messages_.resize(schedule.ranks.size());
    HCPSIM_ASSERT(cluster.message_latency_s >= 0, "negative message latency");
    HCPSIM_ASSERT(cluster.gpu.compute_slowdown_during_comm >= 1, "compute_slowdown_during_comm < 1");
    ranks_.resize(schedule.ranks.size());
    for (size_t r = 0; r < schedule.ranks.size(); ++r) {
      const RankProgram& program = schedule.ranks[r];
      HCPSIM_ASSERT(program.cp_rank == static_cast<int64_t>(r),
                    fmt::format("schedule.ranks[{}] has cp_rank {}", r, program.cp_rank));
      RankRuntime& rt = ranks_[r];
      if (!represented(static_cast<int64_t>(r))) continue;  // an image: never executed
      rt.ops.resize(program.ops.size());
      rt.live.assign(program.buffers.size(), 0);
      for (size_t i = 0; i < program.ops.size(); ++i) {
        const Stream s = program.ops[i].stream;
        HCPSIM_ASSERT(stream_index(s) < kStreamCount, fmt::format("bad stream on cp rank {} op {}", r, i));
        rt.stream_ops[stream_index(s)].push_back(static_cast<OpIndex>(i));
      }
      for (const IoBinding& in : program.inputs) {
        HCPSIM_ASSERT(in.buffer >= 0, fmt::format("input '{}' on cp rank {} has no buffer", in.tensor, r));
        HCPSIM_ASSERT(index_of(in.buffer) < program.buffers.size(),
                      fmt::format("input '{}' on cp rank {}: buffer id out of range", in.tensor, r));
        if (rt.live[index_of(in.buffer)]) continue;  // one buffer bound twice is live once
        rt.live[index_of(in.buffer)] = 1;
        rt.live_bytes += program.buffers[index_of(in.buffer)].size_bytes();
      }
      rt.input_bytes = rt.live_bytes;
      rt.peak_bytes = rt.live_bytes;
    }
    reserve_for_run();
  }

  SimResult run() {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const auto rank = static_cast<int64_t>(r);
      if (!represented(rank)) continue;
      queue_.schedule_at(0, kPriorityKick, [this, rank] { try_start_ready(rank); });
    }
    const int64_t events = queue_.run();
    check_all_finished();
    return collect(events);
  }

 private:
  [[nodiscard]] const RankProgram& program(int64_t rank) const { return schedule_.ranks[index_of(rank)]; }
  [[nodiscard]] const Op& op_of(int64_t rank, OpIndex i) const { return program(rank).ops[index_of(i)]; }
  RankRuntime& rt(int64_t rank) { return ranks_[index_of(rank)]; }
  [[nodiscard]] int64_t node(int64_t rank) const { return nodes_[index_of(rank)]; }

  /// Sizes the flow records exactly and the event tables roughly from the executed programs, so that a large
  /// run does not regrow (and copy) them while it runs. Capacity only.
  void reserve_for_run() {
    int64_t messages = 0, ops = 0;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (!represented(static_cast<int64_t>(r))) continue;
      for (const Op& op : schedule_.ranks[r].ops) {
        ++ops;
        if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
          if (sr->send_peer >= 0) messages += class_size_;  // the message and its images
        } else if (is_communication(op.kind())) {
          const auto n = static_cast<int64_t>(collective_of(op).group->size());
          // A full run launches a collective once for all n members, a reduced run once per class.
          messages += options_.symmetry_reduction ? n * (n - 1) : n - 1;
        }
      }
    }
    flows_.reserve(static_cast<size_t>(messages));
    // About two events per op and three per message (start, drain, delivery); a hint, not a bound.
    queue_.reserve(2 * ops + 3 * messages);
  }

  // ---- symmetry reduction: classes {A·p + a : a < A}, representative A·p (a2a_rank 0) ----

  [[nodiscard]] int64_t representative(int64_t rank) const { return rank - rank % class_size_; }
  [[nodiscard]] bool represented(int64_t rank) const { return rank % class_size_ == 0; }
  /// The image of `rank` in class position a (the rank with the same p2p_rank and a2a_rank a).
  [[nodiscard]] int64_t image(int64_t rank, int64_t a) const { return representative(rank) + a; }

  /// The route of the next message from src to dst: Topology::route with flow id = the message's ordinal among
  /// those from src to dst (simulator.hpp). In a symmetry-reduced run the topology is the generated
  /// rail-optimised one with a NIC per GPU (symmetry_reduction_blocker), where a pair inside one node, or on one
  /// rail inside one scalable unit, has a single shortest path; its route is computed once and reused (the
  /// route of every image message made the reduced run spend a quarter of its time in Topology::route).
  std::vector<int64_t> next_route(int64_t src, int64_t dst) {
    std::vector<PairState>& peers = pair_messages_[index_of(src)];
    auto it = std::find_if(peers.begin(), peers.end(), [dst](const PairState& ps) { return ps.peer == dst; });
    if (it == peers.end()) {
      peers.push_back(PairState{dst, 0, {}, false});
      it = peers.end() - 1;
    }
    const auto ordinal = static_cast<uint64_t>(it->count++);
    if (it->single_path) return it->route;
    std::vector<int64_t> route = topology_.route(gpus_[index_of(src)], gpus_[index_of(dst)], ordinal);
    if (options_.symmetry_reduction && single_shortest_path(src, dst)) {
      it->route = route;
      it->single_path = true;
    }
    return route;
  }

  /// True if the generated rail-optimised topology (one NIC per GPU) has one shortest path between the GPUs of
  /// two ranks: same node (GPU → NVSwitch → GPU), or same local GPU index (rail) and same scalable unit
  /// (GPU → NIC → leaf → NIC → GPU); any other path is longer. Only used in symmetry-reduced runs.
  [[nodiscard]] bool single_shortest_path(int64_t src, int64_t dst) const {
    const int64_t gpn = cluster_.gpus_per_node;
    const int64_t ga = gpus_[index_of(src)], gb = gpus_[index_of(dst)];
    if (ga / gpn == gb / gpn) return true;
    return ga % gpn == gb % gpn && (ga / gpn) / cluster_.fabric.leaf_downlinks == (gb / gpn) / cluster_.fabric.leaf_downlinks;
  }

  /// compute_op_ps, memoised by (kind, block shape, mask, bytes, flops): ranks repeat the same kernels, and
  /// the efficiency-table lookup is the expensive part. The key holds every input of compute_op_ps.
  TimePs kernel_ps(int64_t rank, OpIndex i) {
    const Op& op = op_of(rank, i);
    const RankProgram& prog = program(rank);
    int64_t q_rows = -1, kv_rows = -1, head_dim = -1, mask = -1;
    if (const auto* f = std::get_if<AttnFwdBlockOp>(&op.payload)) {
      q_rows = f->q_rows.count;
      kv_rows = f->kv_rows.count;
      head_dim = prog.buffers[index_of(f->q)].width;
      mask = static_cast<int64_t>(f->mask);
    } else if (const auto* g = std::get_if<AttnBwdBlockOp>(&op.payload)) {
      q_rows = g->q_rows.count;
      kv_rows = g->kv_rows.count;
      head_dim = prog.buffers[index_of(g->q)].width;
      mask = static_cast<int64_t>(g->mask);
    } else {
      return compute_op_ps(op, prog, schedule_.shape.dtype, cluster_.gpu);
    }
    const int64_t hbm = attention_block_hbm_bytes(op, prog);
    const KernelKey key{static_cast<int64_t>(op.kind()), q_rows, kv_rows, head_dim, mask, hbm, op.flops};
    const auto it = kernel_cache_.find(key);
    if (it != kernel_cache_.end()) return it->second;
    const TimePs ps = compute_op_ps(op, prog, schedule_.shape.dtype, cluster_.gpu);
    kernel_cache_.emplace(key, ps);
    return ps;
  }

  static std::vector<double> capacities(const Topology& t) {
    std::vector<double> c;
    for (const TopologyLink& l : t.links()) c.push_back(l.bandwidth_bytes_per_s);
    return c;
  }

  [[nodiscard]] bool slows_compute() const {
    return options_.share_gpu_between_kernels && cluster_.gpu.compute_slowdown_during_comm != 1.0;
  }

  /// A communication op of `rank` started (+1) or finished (−1): compute speed may change.
  void comm_running_change(int64_t rank, int delta) {
    if (slows_compute()) advance_gpu(rank);
    rt(rank).comm_running += delta;
    if (slows_compute()) reschedule_gpu(rank);
  }

  [[nodiscard]] bool deps_finished(int64_t rank, OpIndex i) const {
    for (OpIndex d : op_of(rank, i).deps) {
      HCPSIM_ASSERT(d >= 0, fmt::format("cp rank {} op {}: negative dep", rank, i));
      HCPSIM_ASSERT(d < i, fmt::format("cp rank {} op {}: dep {} does not point backwards", rank, i, d));
      if (!ranks_[index_of(rank)].ops[index_of(d)].finished()) return false;
    }
    return true;
  }

  /// Starts the head op of every stream of `rank` whose stream predecessor and deps have finished.
  void try_start_ready(int64_t rank) {
    for (size_t s = 0; s < kStreamCount; ++s) {
      RankRuntime& r = rt(rank);
      if (r.cursor[s] >= r.stream_ops[s].size()) continue;
      const OpIndex head = r.stream_ops[s][r.cursor[s]];
      if (r.ops[index_of(head)].started()) continue;
      if (!deps_finished(rank, head)) continue;
      start_op(rank, head);
    }
  }

  void finish_at(TimePs delay_ps, int64_t rank, OpIndex i) {
    const int64_t key = pack(rank, i);  // one int64 keeps the capture within std::function's small buffer
    queue_.schedule_after(delay_ps, kPriorityCompletion, [this, key] { finish_op(key >> 32, unpack_op(key)); });
  }

  void start_op(int64_t rank, OpIndex i) {
    const Op& op = op_of(rank, i);
    RankRuntime& r = rt(rank);
    r.ops[index_of(i)].start_ps = queue_.now();
    switch (op.kind()) {
      case OpKind::alloc: {
        const BufferId b = std::get<AllocOp>(op.payload).buffer;
        HCPSIM_ASSERT(!r.live[index_of(b)], fmt::format("cp rank {} op {} '{}': alloc of live buffer '{}'", rank, i,
                                                        op.label, program(rank).buffers[index_of(b)].name));
        r.live[index_of(b)] = 1;
        r.live_bytes += program(rank).buffers[index_of(b)].size_bytes();
        r.peak_bytes = std::max(r.peak_bytes, r.live_bytes);
        r.phase_peak_bytes[phase_index(op.phase)] = std::max(r.phase_peak_bytes[phase_index(op.phase)], r.live_bytes);
        finish_at(0, rank, i);
        return;
      }
      case OpKind::free: {
        const BufferId b = std::get<FreeOp>(op.payload).buffer;
        HCPSIM_ASSERT(r.live[index_of(b)], fmt::format("cp rank {} op {} '{}': free of dead buffer '{}'", rank, i,
                                                       op.label, program(rank).buffers[index_of(b)].name));
        r.live[index_of(b)] = 0;
        r.live_bytes -= program(rank).buffers[index_of(b)].size_bytes();
        finish_at(0, rank, i);
        return;
      }
      case OpKind::send_recv:
        comm_running_change(rank, +1);
        start_send_recv(rank, i);
        return;
      case OpKind::all_to_all:
      case OpKind::all_gather:
      case OpKind::reduce_scatter:
        comm_running_change(rank, +1);
        arrive_collective(rank, i);
        return;
      case OpKind::attn_fwd_block:
      case OpKind::attn_bwd_block:
      case OpKind::lse_merge:
      case OpKind::out_correction:
      case OpKind::copy:
      case OpKind::gemm:
      case OpKind::elementwise: start_kernel(rank, i); return;
    }
    HCPSIM_ASSERT(false, fmt::format("cp rank {} op {}: unknown op kind", rank, i));
  }

  void finish_op(int64_t rank, OpIndex i) {
    RankRuntime& r = rt(rank);
    OpRuntime& o = r.ops[index_of(i)];
    HCPSIM_ASSERT(o.started(), fmt::format("cp rank {} op {} finished before it started", rank, i));
    HCPSIM_ASSERT(!o.finished(), fmt::format("cp rank {} op {} finished twice", rank, i));
    o.end_ps = queue_.now();
    const size_t s = stream_index(op_of(rank, i).stream);
    HCPSIM_ASSERT(r.cursor[s] < r.stream_ops[s].size(), "stream cursor past the end");
    HCPSIM_ASSERT(r.stream_ops[s][r.cursor[s]] == i,
                  fmt::format("cp rank {} op {} finished but is not the head of its stream", rank, i));
    ++r.cursor[s];
    if (is_communication(op_of(rank, i).kind())) comm_running_change(rank, -1);
    try_start_ready(rank);
  }

  // ---- kernels: full speed, or processor sharing of the GPU ----

  void start_kernel(int64_t rank, OpIndex i) {
    const TimePs work_ps = kernel_ps(rank, i);
    if (!options_.share_gpu_between_kernels) {
      finish_at(work_ps, rank, i);
      return;
    }
    HCPSIM_ASSERT(work_ps <= std::numeric_limits<int64_t>::max() / (kShareScale * kStreamCount),
                  fmt::format("cp rank {} op {}: kernel of {} ps overflows the sharing arithmetic", rank, i, work_ps));
    advance_gpu(rank);
    rt(rank).running.push_back(RunningKernel{i, work_ps * kShareScale, -1});
    reschedule_gpu(rank);
  }

  /// Applies the progress of the running kernels since the last change.
  void advance_gpu(int64_t rank) {
    RankRuntime& r = rt(rank);
    const TimePs elapsed = queue_.now() - r.gpu_updated_ps;
    if (!r.running.empty() && elapsed > 0) {
      HCPSIM_ASSERT(static_cast<int64_t>(r.running.size()) <= kStreamCount, "more running kernels than streams");
      const int64_t progress = elapsed * r.rate_units_per_ps;
      for (RunningKernel& k : r.running) k.remaining_units = std::max<int64_t>(0, k.remaining_units - progress);
    }
    r.gpu_updated_ps = queue_.now();
  }

  /// (Re)schedules the completion of every running kernel for the current number of running kernels:
  /// remaining / (kShareScale / n) ps, rounded up (a kernel never finishes early; the error is < 1 ps per change).
  void reschedule_gpu(int64_t rank) {
    RankRuntime& r = rt(rank);
    const auto n = static_cast<int64_t>(r.running.size());
    if (n == 0) return;
    r.rate_units_per_ps = kShareScale / n;
    if (r.comm_running > 0 && slows_compute()) {
      // Rounded once to an integer rate (per-mille exact with kShareScale = 6000).
      r.rate_units_per_ps = std::max<int64_t>(
          1, std::llround(static_cast<double>(kShareScale) /
                          (static_cast<double>(n) * cluster_.gpu.compute_slowdown_during_comm)));
    }
    for (RunningKernel& k : r.running) {
      if (k.completion >= 0) queue_.cancel(k.completion);
      const int64_t rate = r.rate_units_per_ps;
      const TimePs delay = (k.remaining_units + rate - 1) / rate;
      const OpIndex op = k.op;
      const int64_t key = pack(rank, op);
      k.completion =
          queue_.schedule_after(delay, kPriorityCompletion, [this, key] { kernel_done(key >> 32, unpack_op(key)); });
    }
  }

  void kernel_done(int64_t rank, OpIndex i) {
    advance_gpu(rank);
    RankRuntime& r = rt(rank);
    const auto it = std::find_if(r.running.begin(), r.running.end(), [i](const RunningKernel& k) { return k.op == i; });
    HCPSIM_ASSERT(it != r.running.end(), fmt::format("cp rank {} op {}: completion of a kernel not running", rank, i));
    HCPSIM_ASSERT(it->remaining_units == 0, fmt::format("cp rank {} op {}: kernel completed early", rank, i));
    r.running.erase(it);
    reschedule_gpu(rank);
    finish_op(rank, i);
  }

  // ---- send/recv ----

  void start_send_recv(int64_t rank, OpIndex i) {
    const auto& sr = std::get<SendRecvOp>(op_of(rank, i).payload);
    OpRuntime& o = rt(rank).ops[index_of(i)];
    o.pending_transfers = (sr.send_peer >= 0 ? 1 : 0) + (sr.recv_peer >= 0 ? 1 : 0);
    if (o.pending_transfers == 0) {
      finish_at(0, rank, i);
      return;
    }
    // Register the send before the receive: with a self-message (peer == rank) the op matches itself.
    if (sr.send_peer >= 0) {
      check_peer(rank, i, sr.send_peer);
      arrive_message(MessageKey{rank, sr.send_peer, sr.send_tag}, /*is_sender=*/true,
                     HalfMessage{{rank, i}, send_size_bytes(sr, program(rank))});
    }
    if (sr.recv_peer >= 0) {
      check_peer(rank, i, sr.recv_peer);
      arrive_message(MessageKey{sr.recv_peer, rank, sr.recv_tag}, /*is_sender=*/false,
                     HalfMessage{{rank, i}, recv_size_bytes(sr, program(rank))});
    }
  }

  void check_peer(int64_t rank, OpIndex i, int64_t peer) const {
    HCPSIM_ASSERT(peer < static_cast<int64_t>(ranks_.size()),
                  fmt::format("cp rank {} op {} '{}': peer {} out of range", rank, i, op_of(rank, i).label, peer));
  }

  void arrive_message(const MessageKey& key, bool is_sender, HalfMessage half) {
    MessageQueue& q = messages_[key];
    std::vector<HalfMessage>& opposite = is_sender ? q.receivers : q.senders;
    if (opposite.empty()) {
      (is_sender ? q.senders : q.receivers).push_back(half);
      return;
    }
    const HalfMessage other = opposite.front();
    opposite.erase(opposite.begin());
    if (q.senders.empty() && q.receivers.empty()) messages_.erase(key);
    start_transfer(key, is_sender ? half : other, is_sender ? other : half);
  }

  void start_transfer(const MessageKey& key, const HalfMessage& sender, const HalfMessage& receiver) {
    const auto [src, dst, tag] = key;
    HCPSIM_ASSERT(sender.size_bytes == receiver.size_bytes,
                  fmt::format("message {}→{} tag {}: sender op {} '{}' sends {} B, receiver op {} '{}' takes {} B",
                              src, dst, tag, sender.endpoint.op, op_of(src, sender.endpoint.op).label,
                              sender.size_bytes, receiver.endpoint.op, op_of(dst, receiver.endpoint.op).label,
                              receiver.size_bytes));
    const Phase phase = op_of(src, sender.endpoint.op).phase;
    const Endpoint s = sender.endpoint;
    const Endpoint r = receiver.endpoint;
    HCPSIM_ASSERT(represented(src) && represented(dst),
                  fmt::format("symmetry reduction: message {}→{} tag {} leaves the representatives", src, dst, tag));
    send_message(src, dst, sender.size_bytes, phase, [this, s, r] {
      transfer_done(s);
      transfer_done(r);
    }, /*with_images=*/options_.symmetry_reduction);
  }

  /// One message: software latency, then a flow over the route, then the route latency; `delivered` runs at
  /// delivery. Counts the message (sender's phase, level by nodes) and records its flow.
  /// with_images (symmetry reduction, send/recv only): the message also stands for its A − 1 images on the
  /// other class positions; they are counted and recorded (flows_[flow_index + a]) and their routes enter the
  /// shadow link accounting from the representative's flow start to its drain.
  void send_message(int64_t src, int64_t dst, int64_t bytes, Phase phase, std::function<void()> delivered,
                    bool with_images = false) {
    count_message(src, phase, link_level(node(src), node(dst)), bytes);
    const auto flow_index = static_cast<int64_t>(flows_.size());
    std::vector<int64_t> route = next_route(src, dst);
    const double route_latency_s = topology_.route_latency_s(route);
    const TimePs route_latency_ps = seconds_to_ps(route_latency_s);
    flows_.push_back(FlowRecord{src, dst, bytes, phase, -1, -1, route});
    const int64_t images = with_images ? class_size_ - 1 : 0;
    for (int64_t a = 1; a <= images; ++a) {
      const int64_t isrc = image(src, a), idst = image(dst, a);
      count_message(isrc, phase, link_level(node(isrc), node(idst)), bytes);
      std::vector<int64_t> iroute = next_route(isrc, idst);
      if (topology_.route_latency_s(iroute) != route_latency_s)
        not_exact(fmt::format("the image {}→{} of message {}→{} has another route latency", isrc, idst, src, dst));
      flows_.push_back(FlowRecord{isrc, idst, bytes, phase, -1, -1, std::move(iroute)});
    }
    queue_.schedule_after(seconds_to_ps(cluster_.message_latency_s), kPriorityCompletion,
                          [this, flow_index, images, route_latency_ps, delivered = std::move(delivered)]() mutable {
                            FlowRecord& rec = flows_[index_of(flow_index)];
                            rec.start_ps = queue_.now();
                            if (images > 0) shadow_start(flow_index, images);
                            network_.start_flow(rec.route, rec.bytes,
                                                [this, flow_index, images, route_latency_ps,
                                                 delivered = std::move(delivered)]() mutable {
                                                  flows_[index_of(flow_index)].drained_ps = queue_.now();
                                                  if (images > 0) shadow_end(flow_index, images);
                                                  queue_.schedule_after(route_latency_ps, kPriorityCompletion,
                                                                        std::move(delivered));
                                                });
                          });
  }


  /// Records that the reduced run may differ from the full one (the first reason is kept).
  void not_exact(const std::string& why) {
    if (exact_) symmetry_note_ = why;
    exact_ = false;
  }

  /// Smallest link capacity of a route (the rate the flow gets when nothing else limits it).
  [[nodiscard]] double min_capacity(const std::vector<int64_t>& route) const {
    double c = std::numeric_limits<double>::infinity();
    for (int64_t l : route) c = std::min(c, topology_.links()[index_of(l)].bandwidth_bytes_per_s);
    return c;
  }

  /// The representative's flow flows_[flow_index] and its images flows_[flow_index + 1 … + images] start now.
  /// Exactness check (docs/simulator.md): over the routes of all A class positions, every link must carry
  /// either one active flow, or flows whose route minimum capacities sum to less than its capacity (with a
  /// 1e-9 relative margin). Then max-min fairness gives every such flow exactly its route's minimum capacity,
  /// whichever equal-cost spine ECMP picked for it, so an image drains when its representative does.
  void shadow_start(int64_t flow_index, int64_t images) {
    for (int64_t a = 0; a <= images; ++a) {
      FlowRecord& rec = flows_[index_of(flow_index + a)];
      rec.start_ps = queue_.now();
      const double mincap = min_capacity(rec.route);
      for (int64_t l : rec.route) {
        const size_t li = index_of(l);
        ++shadow_count_[li];
        shadow_mincap_sum_[li] += mincap;
        const double cap = topology_.links()[li].bandwidth_bytes_per_s;
        if (topology_.links()[li].link_class == LinkClass::nvlink)
          not_exact(fmt::format("ring message {}→{} crosses NVLink link {}", rec.src_cp_rank, rec.dst_cp_rank, l));
        if (shadow_count_[li] > 1 && !(shadow_mincap_sum_[li] < cap * (1 - kShadowMargin)))
          not_exact(fmt::format("link {} carries {} concurrent ring messages without headroom at t = {} ps", l,
                                shadow_count_[li], queue_.now()));
        if (a == 0) continue;  // the representative's flow is in network_'s usage
        if (shadow_image_count_[li]++ == 0) shadow_busy_since_[li] = queue_.now();
        shadow_usage_[li].bytes += rec.bytes;
        ++shadow_usage_[li].flows;
      }
    }
  }

  /// The representative's flow drained: so do its images (the exactness check holds them to the same rate).
  void shadow_end(int64_t flow_index, int64_t images) {
    for (int64_t a = 0; a <= images; ++a) {
      FlowRecord& rec = flows_[index_of(flow_index + a)];
      rec.drained_ps = queue_.now();
      const double mincap = min_capacity(rec.route);
      for (int64_t l : rec.route) {
        const size_t li = index_of(l);
        --shadow_count_[li];
        shadow_mincap_sum_[li] -= mincap;
        if (shadow_count_[li] == 0) shadow_mincap_sum_[li] = 0;  // no drift from the float sums
        if (a == 0) continue;
        if (--shadow_image_count_[li] == 0) shadow_usage_[li].busy_ps += queue_.now() - shadow_busy_since_[li];
      }
    }
  }

  void transfer_done(const Endpoint& e) {
    OpRuntime& o = rt(e.cp_rank).ops[index_of(e.op)];
    HCPSIM_ASSERT(o.pending_transfers > 0, fmt::format("cp rank {} op {}: extra transfer", e.cp_rank, e.op));
    if (--o.pending_transfers == 0) finish_op(e.cp_rank, e.op);
  }

  void count_message(int64_t src, Phase phase, LinkLevel level, int64_t size_bytes) {
    for (MessageTable* table : {&totals_, &rt(src).messages_sent}) {
      MessageTotals& t = (*table)[phase_index(phase)][level_index(level)];
      ++t.count;
      t.bytes += size_bytes;
    }
  }

  // ---- collectives: all-to-all, all-gather, reduce-scatter ----

  struct CollectiveView {
    const std::vector<int64_t>* group = nullptr;
    int64_t tag = 0;
    BufferId input = -1;
  };

  [[nodiscard]] CollectiveView collective_of(const Op& op) const {
    if (const auto* a = std::get_if<AllToAllOp>(&op.payload)) return {&a->group, a->tag, a->input};
    if (const auto* g = std::get_if<AllGatherOp>(&op.payload)) return {&g->group, g->tag, g->input};
    if (const auto* r = std::get_if<ReduceScatterOp>(&op.payload)) return {&r->group, r->tag, r->input};
    HCPSIM_ASSERT(false, "not a collective: " + op.label);
    return {};
  }

  void arrive_collective(int64_t rank, OpIndex i) {
    const Op& op = op_of(rank, i);
    const OpKind kind = op.kind();
    const CollectiveView c = collective_of(op);
    const std::vector<int64_t>& group = *c.group;
    HCPSIM_ASSERT(std::find(group.begin(), group.end(), rank) != group.end(),
                  fmt::format("cp rank {} op {} '{}': rank is not a member of its {} group", rank, i, op.label,
                              to_string(kind)));
    if (options_.symmetry_reduction) {
      // Every member is an image of `rank` and reaches this op at the same time (docs/simulator.md).
      std::vector<Endpoint> all;
      for (int64_t member : group) {
        HCPSIM_ASSERT(representative(member) == rank,
                      fmt::format("symmetry reduction: {} tag {} of cp rank {} has member {} outside its class",
                                  to_string(kind), c.tag, rank, member));
        all.push_back(Endpoint{member, i});
      }
      all_to_alls_[AllToAllKey{static_cast<int>(kind), c.tag, group}] = std::move(all);
      launch_collective(rank, i);
      return;
    }
    AllToAllKey key{static_cast<int>(kind), c.tag, group};
    std::vector<Endpoint>& arrived = all_to_alls_[key];
    for (const Endpoint& e : arrived) {
      HCPSIM_ASSERT(e.cp_rank != rank, fmt::format("cp rank {} op {} '{}': reached {} tag {} twice", rank, i,
                                                   op.label, to_string(kind), c.tag));
    }
    arrived.push_back(Endpoint{rank, i});
    if (arrived.size() < group.size()) return;
    launch_collective(rank, i);
  }

  /// Every member of the collective of (rank, op i) has arrived (all_to_alls_ holds them): start its messages.
  void launch_collective(int64_t rank, OpIndex i) {
    const Op& op = op_of(rank, i);
    const OpKind kind = op.kind();
    const CollectiveView c = collective_of(op);
    const std::vector<int64_t>& group = *c.group;
    AllToAllKey key{static_cast<int>(kind), c.tag, group};
    const std::vector<Endpoint>& arrived = all_to_alls_[key];

    // Everyone is here: order the members by group position and size each member's message to each peer.
    std::vector<Endpoint> members;
    std::vector<int64_t> bytes_per_peer;
    const auto group_size = static_cast<int64_t>(group.size());
    for (int64_t member : group) {
      HCPSIM_ASSERT(member >= 0, "negative cp rank in a collective group");
      HCPSIM_ASSERT(member < static_cast<int64_t>(ranks_.size()), "collective group member out of range");
      const auto it = std::find_if(arrived.begin(), arrived.end(),
                                   [member](const Endpoint& e) { return e.cp_rank == member; });
      HCPSIM_ASSERT(it != arrived.end(), fmt::format("{} tag {}: member {} missing", to_string(kind), c.tag, member));
      members.push_back(*it);
      const int64_t executed = options_.symmetry_reduction ? rank : member;  // an image reads its representative
      const BufferId input = collective_of(op_of(executed, it->op)).input;
      HCPSIM_ASSERT(input >= 0, "collective without input buffer");
      HCPSIM_ASSERT(index_of(input) < program(executed).buffers.size(), "collective input buffer out of range");
      const int64_t input_bytes = program(executed).buffers[index_of(input)].size_bytes();
      if (kind == OpKind::all_gather) {
        bytes_per_peer.push_back(input_bytes);  // every other member receives the whole input
      } else {
        HCPSIM_ASSERT(input_bytes % group_size == 0,
                      fmt::format("{} tag {}: cp rank {} input of {} B does not split into {} equal parts",
                                  to_string(kind), c.tag, member, input_bytes, group_size));
        bytes_per_peer.push_back(input_bytes / group_size);
      }
    }
    all_to_alls_.erase(key);

    const auto pending = std::make_shared<int64_t>(group_size * (group_size - 1));
    auto finish_all = [this, members] {
      for (const Endpoint& e : members)
        if (represented(e.cp_rank)) finish_op(e.cp_rank, e.op);
    };
    if (*pending == 0) {
      queue_.schedule_after(0, kPriorityCompletion, finish_all);
      return;
    }
    for (size_t m = 0; m < members.size(); ++m) {
      const Phase phase =
          options_.symmetry_reduction ? op.phase : op_of(members[m].cp_rank, members[m].op).phase;
      for (size_t n = 0; n < members.size(); ++n) {
        if (n == m) continue;
        send_message(members[m].cp_rank, members[n].cp_rank, bytes_per_peer[m], phase, [pending, finish_all] {
          if (--*pending == 0) finish_all();
        });
      }
    }
  }

  // ---- end of run ----

  [[nodiscard]] std::string describe_op(int64_t rank, OpIndex i) const {
    const Op& op = op_of(rank, i);
    return fmt::format("op {} {} '{}' ({} stream)", i, to_string(op.kind()), op.label, to_string(op.stream));
  }

  [[nodiscard]] std::string blocked_reason(int64_t rank, OpIndex i) const {
    const Op& op = op_of(rank, i);
    const RankRuntime& r = ranks_[index_of(rank)];
    if (!r.ops[index_of(i)].started()) {
      std::string deps;
      for (OpIndex d : op.deps) {
        if (!r.ops[index_of(d)].finished()) deps += (deps.empty() ? "" : ", ") + std::to_string(d);
      }
      return "not started; waiting for deps [" + deps + "]";
    }
    if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
      // A side is unmatched while its half message still waits in the queue of its key.
      auto waiting = [this, rank, i](const MessageKey& key, bool sender) {
        const auto it = messages_.find(key);
        if (it == messages_.end()) return false;
        for (const HalfMessage& h : sender ? it->second.senders : it->second.receivers)
          if (h.endpoint.cp_rank == rank && h.endpoint.op == i) return true;
        return false;
      };
      std::string sides;
      if (sr->send_peer >= 0 && waiting(MessageKey{rank, sr->send_peer, sr->send_tag}, true))
        sides += fmt::format(" send to cp rank {} tag {} (receiver not there);", sr->send_peer, sr->send_tag);
      if (sr->recv_peer >= 0 && waiting(MessageKey{sr->recv_peer, rank, sr->recv_tag}, false))
        sides += fmt::format(" recv from cp rank {} tag {} (sender not there);", sr->recv_peer, sr->recv_tag);
      return fmt::format("started at {} ps; waiting for a rendezvous:{}", r.ops[index_of(i)].start_ps, sides);
    }
    if (op.kind() == OpKind::all_to_all || op.kind() == OpKind::all_gather || op.kind() == OpKind::reduce_scatter) {
      const CollectiveView c = collective_of(op);
      std::string missing;
      const auto it = all_to_alls_.find(AllToAllKey{static_cast<int>(op.kind()), c.tag, *c.group});
      for (int64_t m : *c.group) {
        bool here = false;
        if (it != all_to_alls_.end()) {
          for (const Endpoint& e : it->second) here = here || e.cp_rank == m;
        }
        if (!here) missing += (missing.empty() ? "" : ", ") + std::to_string(m);
      }
      return fmt::format("started at {} ps; {} tag {} waiting for members [{}]", r.ops[index_of(i)].start_ps,
                         to_string(op.kind()), c.tag, missing);
    }
    return "started but not finished";
  }

  void check_all_finished() const {
    int64_t blocked_ranks = 0;
    std::string report;
    for (size_t rr = 0; rr < ranks_.size(); ++rr) {
      const auto rank = static_cast<int64_t>(rr);
      const RankRuntime& r = ranks_[rr];
      int64_t unfinished = 0;
      for (const OpRuntime& o : r.ops) unfinished += o.finished() ? 0 : 1;
      if (unfinished == 0) continue;
      ++blocked_ranks;
      if (blocked_ranks > kDeadlockReportRanks) continue;
      report += fmt::format("\n  cp rank {}: {} of {} ops unfinished", rank, unfinished, r.ops.size());
      for (size_t s = 0; s < kStreamCount; ++s) {
        if (r.cursor[s] >= r.stream_ops[s].size()) continue;
        const OpIndex head = r.stream_ops[s][r.cursor[s]];
        report += fmt::format("\n    {} stream head: {}: {}", to_string(static_cast<Stream>(s)),
                              describe_op(rank, head), blocked_reason(rank, head));
      }
    }
    if (blocked_ranks > kDeadlockReportRanks) {
      report += fmt::format("\n  ... and {} more blocked ranks", blocked_ranks - kDeadlockReportRanks);
    }
    HCPSIM_ASSERT(blocked_ranks == 0,
                  fmt::format("schedule deadlock at t = {} ps: no event left, {} ranks blocked:{}", queue_.now(),
                              blocked_ranks, report));
  }

  SimResult collect(int64_t events) {
    SimResult res;
    res.cp_comm_type = schedule_.cp_comm_type;
    res.a2a_size = schedule_.a2a_size;
    res.p2p_size = schedule_.p2p_size;
    res.share_gpu_between_kernels = options_.share_gpu_between_kernels;
    res.symmetry_reduced = options_.symmetry_reduction;
    res.symmetry_exact = exact_;
    res.symmetry_note = symmetry_note_;
    for (size_t rr = 0; rr < ranks_.size(); ++rr) res.simulated_ranks += represented(static_cast<int64_t>(rr)) ? 1 : 0;
    res.messages = totals_;
    res.event_count = events;
    res.flows = std::move(flows_);  // the engine is done with them
    res.network_recomputes = network_.recompute_count();
    for (const TopologyVertex& v : topology_.vertices()) res.node_count = std::max(res.node_count, v.node + 1);
    const auto& usage = network_.usage();
    for (size_t l = 0; l < topology_.links().size(); ++l) {
      const TopologyLink& tl = topology_.links()[l];
      const TopologyVertex& from = topology_.vertices()[index_of(tl.from)];
      LinkUsage u = usage[l];
      if (!shadow_usage_.empty()) {
        // Image messages use other rails than the executed ones: the two usages never overlap on a link.
        u.bytes += shadow_usage_[l].bytes;
        u.busy_ps += shadow_usage_[l].busy_ps;
        u.flows += shadow_usage_[l].flows;
      }
      res.links.push_back(LinkStats{from.name, topology_.vertices()[index_of(tl.to)].name, from.node, tl.link_class,
                                    tl.bandwidth_bytes_per_s, u.bytes, u.busy_ps, u.flows});
    }
    bool any_backward = false;
    TimePs backward_end = 0;
    size_t op_total = 0;
    for (size_t rr = 0; rr < ranks_.size(); ++rr)
      op_total += ranks_[index_of(representative(static_cast<int64_t>(rr)))].ops.size();
    if (options_.record_timeline) res.timeline.reserve(op_total);
    for (size_t rr = 0; rr < ranks_.size(); ++rr) {
      const auto rank = static_cast<int64_t>(rr);
      const RankRuntime& r = ranks_[rr];
      if (!represented(rank)) {
        // An image: its representative's results under relabelling (FLOPs summed in the same order as a full run).
        const int64_t rep_rank = representative(rank);
        RankStats st = res.ranks[index_of(rep_rank)];
        st.cp_rank = rank;
        st.node = node(rank);
        st.gpu = gpus_[rr];
        st.messages_sent = r.messages_sent;
        for (const Op& op : program(rep_rank).ops) res.flops[phase_index(op.phase)] += op.flops;
        if (options_.record_timeline) {
          // The timeline ends with the representative's entries and the images before this one.
          const size_t count = ranks_[index_of(rep_rank)].ops.size();
          const size_t first = res.timeline.size() - count * index_of(rank - rep_rank);
          for (size_t k = 0; k < count; ++k) {
            TimelineEntry e = res.timeline[first + k];
            e.cp_rank = rank;
            res.timeline.push_back(std::move(e));
          }
        }
        res.ranks.push_back(st);
        continue;
      }
      RankStats st;
      st.cp_rank = rank;
      st.node = node(rank);
      st.gpu = gpus_[rr];
      st.phase_peak_memory_bytes = r.phase_peak_bytes;
      // The inputs are live in both phases.
      for (auto& p : st.phase_peak_memory_bytes) p = std::max(p, r.input_bytes);
      st.input_bytes = r.input_bytes;
      st.peak_memory_bytes = r.peak_bytes;
      st.final_memory_bytes = r.live_bytes;
      st.messages_sent = r.messages_sent;
      std::vector<std::pair<TimePs, TimePs>> compute_iv;
      std::vector<std::pair<TimePs, TimePs>> comm_iv;
      for (size_t i = 0; i < r.ops.size(); ++i) {
        const Op& op = program(rank).ops[i];
        const OpRuntime& o = r.ops[i];
        res.flops[phase_index(op.phase)] += op.flops;
        st.end_ps = std::max(st.end_ps, o.end_ps);
        if (is_compute_stream(op.stream)) {
          compute_iv.emplace_back(o.start_ps, o.end_ps);
          st.compute_kernel_ps += o.end_ps - o.start_ps;
        } else {
          comm_iv.emplace_back(o.start_ps, o.end_ps);
        }
        if (op.phase == Phase::forward) {
          res.forward_ps = std::max(res.forward_ps, o.end_ps);
        } else {
          res.backward_start_ps = any_backward ? std::min(res.backward_start_ps, o.start_ps) : o.start_ps;
          backward_end = std::max(backward_end, o.end_ps);
          any_backward = true;
        }
        if (options_.record_timeline)
          res.timeline.push_back(TimelineEntry{rank, op.stream, static_cast<OpIndex>(i), op.kind(), op.phase,
                                             op.ring_step, o.start_ps, o.end_ps, op.flops, op.bytes, op.label});
      }
      const auto compute_union = merge_intervals(std::move(compute_iv));
      const auto comm_union = merge_intervals(std::move(comm_iv));
      st.compute_busy_ps = measure(compute_union);
      st.comm_busy_ps = measure(comm_union);
      res.total_ps = std::max(res.total_ps, st.end_ps);
      res.ranks.push_back(st);
    }
    // Exposed communication needs the layer time, known only after every rank is collected.
    for (RankStats& st : res.ranks) st.exposed_comm_ps = res.total_ps - st.compute_busy_ps;
    res.backward_ps = any_backward ? backward_end - res.backward_start_ps : 0;
    return res;
  }

  const Schedule& schedule_;
  const ClusterSpec& cluster_;
  const Topology& topology_;
  const std::vector<int64_t>& gpus_;
  std::vector<int64_t> nodes_;  ///< node of each cp rank's GPU
  SimOptions options_;
  EventQueue queue_;
  FlowNetwork network_;
  std::vector<FlowRecord> flows_;
  using KernelKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double>;
  std::map<KernelKey, TimePs> kernel_cache_;  ///< kernel_ps memo (std::map: ordered, deterministic)
  std::vector<RankRuntime> ranks_;
  std::map<MessageKey, MessageQueue> messages_;
  std::map<AllToAllKey, std::vector<Endpoint>> all_to_alls_;
  MessageTable totals_{};
  int64_t class_size_ = 1;  ///< symmetry reduction: ranks per class (A); 1 = every rank is executed
  /// Messages from one source rank to one destination rank so far (the ECMP flow id of the next one), and the
  /// pair's route when it has a single shortest path (reduced runs only).
  struct PairState {
    int64_t peer = -1;
    int64_t count = 0;
    std::vector<int64_t> route;
    bool single_path = false;
  };
  /// Per source rank; a rank has few peers, so a linear search is fastest.
  std::vector<std::vector<PairState>> pair_messages_;
  // Symmetry reduction, per link: active ring messages over all class positions, the sum of their route minimum
  // capacities, active image messages, start of the current image-busy interval, and the images' usage.
  std::vector<int64_t> shadow_count_;
  std::vector<double> shadow_mincap_sum_;
  std::vector<int64_t> shadow_image_count_;
  std::vector<TimePs> shadow_busy_since_;
  std::vector<LinkUsage> shadow_usage_;
  bool exact_ = true;
  std::string symmetry_note_;
};

}  // namespace

LinkClassUtilisation SimResult::link_class_utilisation(LinkClass c) const {
  LinkClassUtilisation u;
  double capacity_sum = 0;
  const double total_s = static_cast<double>(total_ps) / kPsPerSecond;
  for (const LinkStats& l : links) {
    if (l.link_class != c) continue;
    ++u.links;
    u.bytes += l.bytes;
    capacity_sum += l.bandwidth_bytes_per_s;
    if (total_s > 0)
      u.max_utilisation = std::max(u.max_utilisation, static_cast<double>(l.bytes) / (l.bandwidth_bytes_per_s * total_s));
  }
  if (capacity_sum > 0 && total_s > 0) u.mean_utilisation = static_cast<double>(u.bytes) / (capacity_sum * total_s);
  return u;
}

SimResult simulate(const Schedule& schedule, const ClusterSpec& cluster, const Topology& topology,
                   const std::vector<int64_t>& gpu_of_cp_rank, const SimOptions& options) {
  if (options.symmetry_reduction) {
    const std::string blocker = symmetry_reduction_blocker(schedule.cp_comm_type, schedule.a2a_size,
                                                           schedule.p2p_size, cluster, gpu_of_cp_rank);
    HCPSIM_ASSERT(blocker.empty(), "symmetry reduction requested but it does not apply: " + blocker);
    HCPSIM_ASSERT(schedule.ranks.size() == gpu_of_cp_rank.size(), "schedule and placement disagree on CP");
    for (int64_t r : symmetry_representatives(schedule.a2a_size, schedule.p2p_size))
      HCPSIM_ASSERT(!schedule.ranks[index_of(r)].ops.empty(), fmt::format("representative cp rank {} has no ops", r));
  } else {
    schedule.check_invariants();
  }
  HCPSIM_ASSERT(gpu_of_cp_rank.size() == schedule.ranks.size(),
                fmt::format("gpu_of_cp_rank has {} entries for {} cp ranks", gpu_of_cp_rank.size(),
                            schedule.ranks.size()));
  std::vector<int64_t> sorted = gpu_of_cp_rank;
  std::sort(sorted.begin(), sorted.end());
  HCPSIM_ASSERT(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "two cp ranks on one GPU");
  for (int64_t g : gpu_of_cp_rank) {
    HCPSIM_ASSERT(g >= 0, "negative GPU index");
    HCPSIM_ASSERT(g < topology.gpu_count(), fmt::format("GPU {} beyond the topology's {} GPUs", g, topology.gpu_count()));
  }
  Engine engine(schedule, cluster, topology, gpu_of_cp_rank, options);
  return engine.run();
}

SimResult simulate(const Schedule& schedule, const ClusterSpec& cluster, const std::vector<int64_t>& node_of_cp_rank,
                   const SimOptions& options) {
  HCPSIM_ASSERT(node_of_cp_rank.size() == schedule.ranks.size(),
                fmt::format("node_of_cp_rank has {} entries for {} cp ranks", node_of_cp_rank.size(),
                            schedule.ranks.size()));
  ClusterSpec c = cluster;
  c.topology = ExplicitTopology{};
  std::vector<int64_t> next_slot;
  std::vector<int64_t> gpus;
  for (int64_t n : node_of_cp_rank) {
    HCPSIM_ASSERT(n >= 0, "negative node index");
    if (index_of(n) >= next_slot.size()) next_slot.resize(index_of(n) + 1, 0);
    HCPSIM_ASSERT(next_slot[index_of(n)] < c.gpus_per_node, fmt::format("more than {} cp ranks on node {}",
                                                                       c.gpus_per_node, n));
    gpus.push_back(n * c.gpus_per_node + next_slot[index_of(n)]++);
  }
  c.nodes = std::max<int64_t>(c.nodes, static_cast<int64_t>(next_slot.size()));
  const Topology topology = Topology::from_cluster(c);
  return simulate(schedule, c, topology, gpus, options);
}

std::string symmetry_reduction_blocker(CpCommType cp_comm_type, int64_t a2a_size, int64_t p2p_size,
                                       const ClusterSpec& cluster, const std::vector<int64_t>& gpu_of_cp_rank) {
  if (cp_comm_type != CpCommType::a2a_p2p && cp_comm_type != CpCommType::a2a) return "cp_comm_type has no a2a level";
  if (a2a_size < 2) return "A < 2 (nothing to reduce)";
  if (!cluster.topology.vertices.empty()) return "explicit topology (its symmetry is not known)";
  if (cluster.fabric.kind != FabricSpec::Kind::rail_optimized) return "fabric is not rail-optimised";
  if (cluster.nics_per_node != 0 && cluster.nics_per_node != cluster.gpus_per_node) return "not one NIC per GPU";
  if (cluster.gpus_per_node != a2a_size) return "A != gpus_per_node (an a2a group is not one whole node)";
  if (static_cast<int64_t>(gpu_of_cp_rank.size()) != a2a_size * p2p_size) return "placement size != A*P";
  for (size_t g = 0; g < gpu_of_cp_rank.size(); ++g) {
    const auto rank = static_cast<int64_t>(g);
    const int64_t gpu = gpu_of_cp_rank[g];
    const int64_t rep_gpu = gpu_of_cp_rank[index_of(rank - rank % a2a_size)];
    if (gpu < 0 || gpu % cluster.gpus_per_node != rank % a2a_size || gpu - rep_gpu != rank % a2a_size)
      return fmt::format("cp rank {} is not on GPU {} of its a2a group's node", rank, rank % a2a_size);
  }
  return "";
}

std::vector<int64_t> symmetry_representatives(int64_t a2a_size, int64_t p2p_size) {
  std::vector<int64_t> reps;
  for (int64_t p = 0; p < p2p_size; ++p) reps.push_back(p * a2a_size);
  return reps;
}

std::vector<int64_t> cp_rank_nodes(const std::string& order, const ParallelSizes& sizes, int64_t gpus_per_node) {
  std::vector<int64_t> nodes;
  for (const CpRankPlacement& p : place_cp_group(order, sizes, gpus_per_node)) nodes.push_back(p.node);
  return nodes;
}

std::vector<int64_t> cp_rank_gpus(const std::string& order, const ParallelSizes& sizes, int64_t gpus_per_node) {
  std::vector<int64_t> gpus;
  for (const CpRankPlacement& p : place_cp_group(order, sizes, gpus_per_node)) gpus.push_back(p.global_rank);
  return gpus;
}

}  // namespace hcpsim::sim
