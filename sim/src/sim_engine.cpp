#include "sim_engine.hpp"

#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "hcpsim/core/op_visit.hpp"
#include "hcpsim/core/parallel_for.hpp"
#include "sim_results.hpp"

namespace hcpsim::sim::detail {

namespace {

// A deadlock report lists at most this many ranks in detail (the rest are counted), so that a large schedule
// still gives a readable message.
constexpr int64_t kDeadlockReportRanks = 16;

}  // namespace

Engine::Engine(const Schedule& schedule, const ClusterSpec& cluster, const Topology& topology,
               const std::vector<int64_t>& gpu_of_cp_rank, const SimOptions& options)
    : ctx_(schedule, cluster, topology, gpu_of_cp_rank, options, *this),
      memory_(ctx_),
      gpu_(ctx_),
      transport_(ctx_),
      rendezvous_(ctx_, transport_) {
  for (int64_t g : ctx_.gpus) ctx_.nodes.push_back(topology.gpu_node(g));
  HCPSIM_ASSERT(cluster.message_latency_s >= 0, "negative message latency");
  HCPSIM_ASSERT(cluster.gpu.compute_slowdown_during_comm >= 1, "compute_slowdown_during_comm < 1");
  ctx_.progress.resize(schedule.ranks.size());
  // Each rank's indexes are its own (one work item per rank), so any thread count builds the same ones; the
  // messages each rank sends are counted in the same pass (reserve_for_run), not in another walk of every op.
  std::vector<int64_t> messages(schedule.ranks.size(), 0);
  parallel_for(static_cast<int64_t>(schedule.ranks.size()), options.threads, [&](int64_t rank) {
    const auto r = static_cast<size_t>(rank);
    const RankProgram& program = schedule.ranks[r];
    HCPSIM_ASSERT(program.rank == rank, fmt::format("schedule.ranks[{}] has rank {}", r, program.rank));
    if (!ctx_.classes.represented(rank)) return;  // an image: never executed
    RankProgress& p = ctx_.progress[r];
    p.ops.resize(program.ops.size());
    for (size_t i = 0; i < program.ops.size(); ++i) {
      const Op& op = program.ops[i];
      const Stream s = op.stream;
      HCPSIM_ASSERT(stream_index(s) < kStreamCount, fmt::format("bad stream on cp rank {} op {}", r, i));
      p.stream_ops[stream_index(s)].push_back(static_cast<OpIndex>(i));
      p.ops[i].stream = static_cast<uint8_t>(stream_index(s));
      const auto* sr = std::get_if<SendRecvOp>(&op.payload);
      p.ops[i].takes_sms = is_communication(op.kind()) && !(sr != nullptr && sr->copy_engine);
      messages[r] += messages_of(op);
    }
    index_dependents(rank);
    memory_.bind_inputs(rank);
  });
  reserve_for_run(messages);
}

SimResult Engine::run() {
  for (int64_t rank = 0; rank < ctx_.rank_count(); ++rank) {
    if (!ctx_.classes.represented(rank)) continue;
    ctx_.queue.schedule_at(0, kPriorityKick, [this, rank] { try_start_ready(rank); });
  }
  const int64_t events = ctx_.queue.run();
  check_all_finished();
  // The results read only the op times: hand back the stream and dependency indexes before they are built.
  for (RankProgress& p : ctx_.progress) {
    for (std::vector<OpIndex>& ops : p.stream_ops) std::vector<OpIndex>().swap(ops);
    std::vector<int32_t>().swap(p.dependents_begin);
    std::vector<OpIndex>().swap(p.dependents);
  }
  return collect_results(ctx_, memory_, transport_, events);
}

int64_t Engine::messages_of(const Op& op) const {
  if (const auto* sr = std::get_if<SendRecvOp>(&op.payload))
    return sr->send_peer >= 0 ? ctx_.classes.size : 0;  // the message and its images
  if (!is_communication(op.kind())) return 0;
  const auto n = static_cast<int64_t>(collective_of(op).group->size());
  // A full run launches a collective once for all n members, a reduced run once per class.
  return ctx_.options.symmetry_reduction ? n * (n - 1) : n - 1;
}

void Engine::reserve_for_run(const std::vector<int64_t>& messages_per_rank) {
  int64_t messages = 0;
  for (int64_t rank = 0; rank < ctx_.rank_count(); ++rank)
    if (ctx_.classes.represented(rank)) messages += messages_per_rank[index_of(rank)];
  transport_.reserve_flows(messages);
}

void Engine::index_dependents(int64_t rank) {
  const std::vector<Op>& ops = ctx_.program(rank).ops;
  RankProgress& p = ctx_.progress[index_of(rank)];
  // Counting sort of the (dep, dependent) pairs by dep: first count each op's dependents in begin[d + 1].
  std::vector<int32_t>& begin = p.dependents_begin;
  begin.assign(ops.size() + 1, 0);
  size_t total = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto op = static_cast<OpIndex>(i);
    for (OpIndex d : ops[i].deps) {
      HCPSIM_ASSERT(d >= 0, fmt::format("cp rank {} op {}: negative dep", rank, op));
      HCPSIM_ASSERT(d < op, fmt::format("cp rank {} op {}: dep {} does not point backwards", rank, op, d));
      ++begin[index_of(d) + 1];
    }
    total += ops[i].deps.size();
    p.ops[i].remaining_deps = static_cast<int32_t>(ops[i].deps.size());
  }
  HCPSIM_ASSERT(total < static_cast<size_t>(std::numeric_limits<int32_t>::max()),
                fmt::format("cp rank {}: too many deps", rank));
  for (size_t i = 0; i < ops.size(); ++i) begin[i + 1] += begin[i];
  // Then place each dependent, moving begin[d] up to d's end; shifting back restores the starts.
  p.dependents.resize(total);
  for (size_t i = 0; i < ops.size(); ++i)
    for (OpIndex d : ops[i].deps) p.dependents[index_of(begin[index_of(d)]++)] = static_cast<OpIndex>(i);
  for (size_t i = ops.size(); i > 0; --i) begin[i] = begin[i - 1];
  begin[0] = 0;
}

void Engine::try_start_ready(int64_t rank) {
  for (size_t s = 0; s < kStreamCount; ++s) {
    const RankProgress& p = ctx_.progress[index_of(rank)];
    if (p.cursor[s] >= p.stream_ops[s].size()) continue;
    const OpIndex head = p.stream_ops[s][p.cursor[s]];
    const OpRuntime& o = p.ops[index_of(head)];
    if (o.started() || o.remaining_deps > 0) continue;
    start_op(rank, head);
  }
}

void Engine::start_op(int64_t rank, OpIndex i) {
  const Op& op = ctx_.op_of(rank, i);
  ctx_.op_runtime(rank, i).start_ps = ctx_.queue.now();
  auto collective = [&](const auto&) {
    gpu_.comm_running_change(rank, +1);
    rendezvous_.arrive_collective(rank, i);
  };
  auto kernel = [&](const auto&) { gpu_.start_kernel(rank, i); };
  visit_op(op.payload, Overload{
                           [&](const AllocOp&) {
                             memory_.allocate(rank, i);
                             ctx_.finish_after(0, rank, i);
                           },
                           [&](const FreeOp&) {
                             memory_.release(rank, i);
                             ctx_.finish_after(0, rank, i);
                           },
                           [&](const SendRecvOp& p) {
                             if (!p.copy_engine) gpu_.comm_running_change(rank, +1);
                             rendezvous_.start_send_recv(rank, i);
                           },
                           [&](const AllToAllOp& p) { collective(p); },
                           [&](const AllGatherOp& p) { collective(p); },
                           [&](const ReduceScatterOp& p) { collective(p); },
                           [&](const AttnFwdBlockOp& p) { kernel(p); },
                           [&](const AttnBwdBlockOp& p) { kernel(p); },
                           [&](const LseMergeOp& p) { kernel(p); },
                           [&](const OutCorrectionOp& p) { kernel(p); },
                           [&](const CopyOp& p) { kernel(p); },
                           [&](const GemmOp& p) { kernel(p); },
                           [&](const ElementwiseOp& p) { kernel(p); },
                       });
}

void Engine::finish_op(int64_t rank, OpIndex i) {
  RankProgress& p = ctx_.progress[index_of(rank)];
  OpRuntime& o = p.ops[index_of(i)];
  HCPSIM_ASSERT(o.started(), fmt::format("cp rank {} op {} finished before it started", rank, i));
  HCPSIM_ASSERT(!o.finished(), fmt::format("cp rank {} op {} finished twice", rank, i));
  o.end_ps = ctx_.queue.now();
  const size_t first = index_of(p.dependents_begin[index_of(i)]);
  const size_t last = index_of(p.dependents_begin[index_of(i) + 1]);
  for (size_t k = first; k < last; ++k) --p.ops[index_of(p.dependents[k])].remaining_deps;
  const size_t s = o.stream;
  HCPSIM_ASSERT(p.cursor[s] < p.stream_ops[s].size(), "stream cursor past the end");
  HCPSIM_ASSERT(p.stream_ops[s][p.cursor[s]] == i,
                fmt::format("cp rank {} op {} finished but is not the head of its stream", rank, i));
  ++p.cursor[s];
  if (o.takes_sms) gpu_.comm_running_change(rank, -1);
  try_start_ready(rank);
}

// ---- end of run ----

std::string Engine::describe_op(int64_t rank, OpIndex i) const {
  const Op& op = ctx_.op_of(rank, i);
  return fmt::format("op {} {} '{}' ({} stream)", i, to_string(op.kind()), op.label.str(), to_string(op.stream));
}

std::string Engine::blocked_reason(int64_t rank, OpIndex i) const {
  if (!ctx_.op_runtime(rank, i).started()) {
    std::string deps;
    for (OpIndex d : ctx_.op_of(rank, i).deps) {
      if (!ctx_.op_runtime(rank, d).finished()) deps += (deps.empty() ? "" : ", ") + std::to_string(d);
    }
    return "not started; waiting for deps [" + deps + "]";
  }
  std::string waiting = rendezvous_.blocked_reason(rank, i);
  if (!waiting.empty()) return waiting;
  return "started but not finished";
}

void Engine::check_all_finished() const {
  int64_t blocked_ranks = 0;
  std::string report;
  for (int64_t rank = 0; rank < ctx_.rank_count(); ++rank) {
    const RankProgress& p = ctx_.progress[index_of(rank)];
    int64_t unfinished = 0;
    for (const OpRuntime& o : p.ops) unfinished += o.finished() ? 0 : 1;
    if (unfinished == 0) continue;
    ++blocked_ranks;
    if (blocked_ranks > kDeadlockReportRanks) continue;
    report += fmt::format("\n  cp rank {}: {} of {} ops unfinished", rank, unfinished, p.ops.size());
    for (size_t s = 0; s < kStreamCount; ++s) {
      if (p.cursor[s] >= p.stream_ops[s].size()) continue;
      const OpIndex head = p.stream_ops[s][p.cursor[s]];
      report += fmt::format("\n    {} stream head: {}: {}", to_string(static_cast<Stream>(s)),
                            describe_op(rank, head), blocked_reason(rank, head));
    }
  }
  if (blocked_ranks > kDeadlockReportRanks) {
    report += fmt::format("\n  ... and {} more blocked ranks", blocked_ranks - kDeadlockReportRanks);
  }
  HCPSIM_ASSERT(blocked_ranks == 0,
                fmt::format("schedule deadlock at t = {} ps: no event left, {} ranks blocked:{}", ctx_.queue.now(),
                            blocked_ranks, report));
}

}  // namespace hcpsim::sim::detail
