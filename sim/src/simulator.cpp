#include "hcpsim/sim/simulator.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"

namespace hcpsim::sim {

namespace {

// Event priorities (lower first among events at one time; equal priorities run FIFO). Completions run before
// the initial per-rank kick so that at t = 0 zero-time effects are applied in a fixed order. Nothing else
// depends on priorities in this contention-free model.
constexpr int kPriorityCompletion = 0;
constexpr int kPriorityKick = 1;

// Processor sharing of a GPU's SMs in integer arithmetic: remaining kernel work is kept in units of
// 1/kShareScale ps of full-speed GPU time, so that with n ≤ kStreamCount running kernels each one's progress
// over Δ ps, Δ·kShareScale/n units, is an integer. kShareScale = lcm(1, 2, 3).
constexpr int64_t kShareScale = 6;
static_assert(kStreamCount == 3, "kShareScale must be divisible by every possible number of running kernels");

// A deadlock report lists at most this many ranks in detail (the rest are counted), so that a large schedule
// still gives a readable message.
constexpr int64_t kDeadlockReportRanks = 16;

size_t index_of(int64_t i) { return static_cast<size_t>(i); }
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
  TimePs gpu_updated_ps = 0;           ///< time up to which `running` progress has been applied
  std::array<std::vector<OpIndex>, kStreamCount> stream_ops;  ///< op indices of each stream, in list order
  std::array<size_t, kStreamCount> cursor{};                  ///< position of the stream's next unfinished op
  std::vector<OpRuntime> ops;
  std::vector<char> live;  ///< per buffer: currently allocated
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
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
/// queue holds only senders or only receivers.
struct MessageQueue {
  std::deque<HalfMessage> senders;
  std::deque<HalfMessage> receivers;
};

using MessageKey = std::tuple<int64_t, int64_t, int64_t>;       // (src cp rank, dst cp rank, tag)
using AllToAllKey = std::pair<int64_t, std::vector<int64_t>>;  // (tag, group)

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

/// |a ∩ b| for two merged interval lists.
TimePs intersection_measure(const std::vector<std::pair<TimePs, TimePs>>& a,
                            const std::vector<std::pair<TimePs, TimePs>>& b) {
  TimePs total = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const TimePs lo = std::max(a[i].first, b[j].first);
    const TimePs hi = std::min(a[i].second, b[j].second);
    if (hi > lo) total += hi - lo;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

class Engine {
 public:
  Engine(const Schedule& schedule, const ClusterSpec& cluster, const std::vector<int64_t>& node_of_cp_rank,
         const SimOptions& options)
      : schedule_(schedule), cluster_(cluster), nodes_(node_of_cp_rank), options_(options) {
    ranks_.resize(schedule.ranks.size());
    for (size_t r = 0; r < schedule.ranks.size(); ++r) {
      const RankProgram& program = schedule.ranks[r];
      HCPSIM_ASSERT(program.cp_rank == static_cast<int64_t>(r),
                    fmt::format("schedule.ranks[{}] has cp_rank {}", r, program.cp_rank));
      RankRuntime& rt = ranks_[r];
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
  }

  SimResult run() {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const auto rank = static_cast<int64_t>(r);
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
    queue_.schedule_after(delay_ps, kPriorityCompletion, [this, rank, i] { finish_op(rank, i); });
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
      case OpKind::send_recv: start_send_recv(rank, i); return;
      case OpKind::all_to_all: arrive_all_to_all(rank, i); return;
      case OpKind::attn_fwd_block:
      case OpKind::attn_bwd_block:
      case OpKind::lse_merge:
      case OpKind::out_correction:
      case OpKind::copy: start_kernel(rank, i); return;
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
    try_start_ready(rank);
  }

  // ---- kernels: full speed, or processor sharing of the GPU ----

  void start_kernel(int64_t rank, OpIndex i) {
    const TimePs work_ps = compute_op_ps(op_of(rank, i), program(rank), schedule_.shape.dtype, cluster_.gpu);
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
      const auto n = static_cast<int64_t>(r.running.size());
      HCPSIM_ASSERT(n <= kStreamCount, "more running kernels than streams");
      const int64_t progress = elapsed * (kShareScale / n);
      for (RunningKernel& k : r.running) k.remaining_units = std::max<int64_t>(0, k.remaining_units - progress);
    }
    r.gpu_updated_ps = queue_.now();
  }

  /// (Re)schedules the completion of every running kernel for the current number of running kernels:
  /// remaining / (kShareScale / n) ps, rounded up (a kernel never finishes early; the error is < 1 ps per change).
  void reschedule_gpu(int64_t rank) {
    RankRuntime& r = rt(rank);
    const auto n = static_cast<int64_t>(r.running.size());
    for (RunningKernel& k : r.running) {
      if (k.completion >= 0) queue_.cancel(k.completion);
      const int64_t rate = kShareScale / n;  // units per ps
      const TimePs delay = (k.remaining_units + rate - 1) / rate;
      const OpIndex op = k.op;
      k.completion = queue_.schedule_after(delay, kPriorityCompletion, [this, rank, op] { kernel_done(rank, op); });
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
    std::deque<HalfMessage>& opposite = is_sender ? q.receivers : q.senders;
    if (opposite.empty()) {
      (is_sender ? q.senders : q.receivers).push_back(half);
      return;
    }
    const HalfMessage other = opposite.front();
    opposite.pop_front();
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
    const LinkLevel level = link_level(node(src), node(dst));
    const Phase phase = op_of(src, sender.endpoint.op).phase;
    count_message(src, phase, level, sender.size_bytes);
    const Endpoint s = sender.endpoint;
    const Endpoint r = receiver.endpoint;
    queue_.schedule_after(message_ps(sender.size_bytes, level, cluster_), kPriorityCompletion, [this, s, r] {
      transfer_done(s);
      transfer_done(r);
    });
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

  // ---- all-to-all ----

  void arrive_all_to_all(int64_t rank, OpIndex i) {
    const auto& a2a = std::get<AllToAllOp>(op_of(rank, i).payload);
    HCPSIM_ASSERT(std::find(a2a.group.begin(), a2a.group.end(), rank) != a2a.group.end(),
                  fmt::format("cp rank {} op {} '{}': rank is not a member of its a2a group", rank, i,
                              op_of(rank, i).label));
    AllToAllKey key{a2a.tag, a2a.group};
    std::vector<Endpoint>& arrived = all_to_alls_[key];
    for (const Endpoint& e : arrived) {
      HCPSIM_ASSERT(e.cp_rank != rank, fmt::format("cp rank {} op {} '{}': reached a2a tag {} twice", rank, i,
                                                   op_of(rank, i).label, a2a.tag));
    }
    arrived.push_back(Endpoint{rank, i});
    if (arrived.size() < a2a.group.size()) return;

    // Everyone is here: order the members by group position, size the traffic, finish all together.
    std::vector<Endpoint> members;
    std::vector<int64_t> bytes_per_peer;
    const auto group_size = static_cast<int64_t>(a2a.group.size());
    for (int64_t member : a2a.group) {
      HCPSIM_ASSERT(member >= 0, "negative cp rank in a2a group");
      HCPSIM_ASSERT(member < static_cast<int64_t>(ranks_.size()), "a2a group member out of range");
      const auto it = std::find_if(arrived.begin(), arrived.end(),
                                   [member](const Endpoint& e) { return e.cp_rank == member; });
      HCPSIM_ASSERT(it != arrived.end(), fmt::format("a2a tag {}: member {} missing", a2a.tag, member));
      members.push_back(*it);
      const auto& member_op = std::get<AllToAllOp>(op_of(member, it->op).payload);
      const BufferId input = member_op.input;
      HCPSIM_ASSERT(input >= 0, "a2a without input buffer");
      HCPSIM_ASSERT(index_of(input) < program(member).buffers.size(), "a2a input buffer out of range");
      const int64_t input_bytes = program(member).buffers[index_of(input)].size_bytes();
      HCPSIM_ASSERT(input_bytes % group_size == 0,
                    fmt::format("a2a tag {}: cp rank {} input of {} B does not split into {} equal parts", a2a.tag,
                                member, input_bytes, group_size));
      bytes_per_peer.push_back(input_bytes / group_size);
    }
    all_to_alls_.erase(key);

    for (size_t m = 0; m < members.size(); ++m) {
      const Phase phase = op_of(members[m].cp_rank, members[m].op).phase;
      for (size_t n = 0; n < members.size(); ++n) {
        if (n == m) continue;
        count_message(members[m].cp_rank, phase, link_level(node(members[m].cp_rank), node(members[n].cp_rank)),
                      bytes_per_peer[m]);
      }
    }
    const TimePs duration = all_to_all_ps(all_to_all_traffic(a2a.group, bytes_per_peer, nodes_), cluster_);
    queue_.schedule_after(duration, kPriorityCompletion, [this, members] {
      for (const Endpoint& e : members) finish_op(e.cp_rank, e.op);
    });
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
    if (const auto* a2a = std::get_if<AllToAllOp>(&op.payload)) {
      std::string missing;
      const auto it = all_to_alls_.find(AllToAllKey{a2a->tag, a2a->group});
      for (int64_t m : a2a->group) {
        bool here = false;
        if (it != all_to_alls_.end()) {
          for (const Endpoint& e : it->second) here = here || e.cp_rank == m;
        }
        if (!here) missing += (missing.empty() ? "" : ", ") + std::to_string(m);
      }
      return fmt::format("started at {} ps; a2a tag {} waiting for members [{}]", r.ops[index_of(i)].start_ps,
                         a2a->tag, missing);
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

  SimResult collect(int64_t events) const {
    SimResult res;
    res.cp_comm_type = schedule_.cp_comm_type;
    res.a2a_size = schedule_.a2a_size;
    res.p2p_size = schedule_.p2p_size;
    res.share_gpu_between_kernels = options_.share_gpu_between_kernels;
    res.messages = totals_;
    res.event_count = events;
    bool any_backward = false;
    TimePs backward_end = 0;
    for (size_t rr = 0; rr < ranks_.size(); ++rr) {
      const auto rank = static_cast<int64_t>(rr);
      const RankRuntime& r = ranks_[rr];
      RankStats st;
      st.cp_rank = rank;
      st.node = node(rank);
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
        res.timeline.push_back(TimelineEntry{rank, op.stream, static_cast<OpIndex>(i), op.kind(), op.phase,
                                             op.ring_step, o.start_ps, o.end_ps, op.flops, op.bytes, op.label});
      }
      const auto compute_union = merge_intervals(std::move(compute_iv));
      const auto comm_union = merge_intervals(std::move(comm_iv));
      st.compute_busy_ps = measure(compute_union);
      st.comm_busy_ps = measure(comm_union);
      st.exposed_comm_ps = st.comm_busy_ps - intersection_measure(comm_union, compute_union);
      res.total_ps = std::max(res.total_ps, st.end_ps);
      res.ranks.push_back(st);
    }
    res.backward_ps = any_backward ? backward_end - res.backward_start_ps : 0;
    return res;
  }

  const Schedule& schedule_;
  const ClusterSpec& cluster_;
  const std::vector<int64_t>& nodes_;
  SimOptions options_;
  EventQueue queue_;
  std::vector<RankRuntime> ranks_;
  std::map<MessageKey, MessageQueue> messages_;
  std::map<AllToAllKey, std::vector<Endpoint>> all_to_alls_;
  MessageTable totals_{};
};

}  // namespace

SimResult simulate(const Schedule& schedule, const ClusterSpec& cluster, const std::vector<int64_t>& node_of_cp_rank,
                   const SimOptions& options) {
  schedule.check_invariants();
  HCPSIM_ASSERT(node_of_cp_rank.size() == schedule.ranks.size(),
                fmt::format("node_of_cp_rank has {} entries for {} cp ranks", node_of_cp_rank.size(),
                            schedule.ranks.size()));
  for (int64_t n : node_of_cp_rank) HCPSIM_ASSERT(n >= 0, "negative node index");
  Engine engine(schedule, cluster, node_of_cp_rank, options);
  return engine.run();
}

std::vector<int64_t> cp_rank_nodes(const std::string& order, const ParallelSizes& sizes, int64_t gpus_per_node) {
  std::vector<int64_t> nodes;
  for (const CpRankPlacement& p : place_cp_group(order, sizes, gpus_per_node)) nodes.push_back(p.node);
  return nodes;
}

}  // namespace hcpsim::sim
