// The measured per-op CSV of a device run (host code: built into hcpsim_gpu_plan, so it is tested without a GPU).
#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/io/measured_ops.hpp"

namespace hcpsim::gpu {

std::string measured_ops_csv(const DeviceRunResult& run, Dtype dtype) {
  std::vector<MeasuredOpRow> rows;
  for (const MeasuredOp& m : run.timeline) {
    if (m.kind == OpKind::alloc || m.kind == OpKind::free) continue;  // zero-time bookkeeping
    MeasuredOpRow r;
    r.op_kind = to_string(m.kind);
    r.dtype = to_string(dtype);
    r.head_dim = m.head_dim;
    r.q_rows = m.q_rows;
    r.kv_rows = m.kv_rows;
    r.causal = m.causal;
    r.bytes = m.bytes;
    r.flops = m.flops;
    r.measured_s = m.end_s - m.start_s;
    r.cp_rank = m.cp_rank;
    r.op_index = static_cast<int64_t>(m.op_index);
    r.stream = to_string(m.stream);
    r.kernel = m.kernel;
    r.label = m.label;
    rows.push_back(std::move(r));
  }
  return hcpsim::measured_ops_csv(rows);
}

TraceTimeline measured_timeline(const DeviceRunResult& run) {
  TraceTimeline t;
  int64_t ranks = 0;
  for (const MeasuredOp& m : run.timeline) ranks = std::max(ranks, m.cp_rank + 1);
  t.processes = {TraceProcess{0, "node 0", 0}, TraceProcess{1, "fabric", 1}};
  for (int64_t r = 0; r < ranks; ++r)
    for (int s = 0; s < kStreamCount; ++s)
      t.threads.push_back(
          TraceThread{0, stream_tid(r, static_cast<Stream>(s)), stream_thread_name(r, r, static_cast<Stream>(s))});
  for (const MeasuredOp& m : run.timeline) {
    if (m.kind == OpKind::alloc || m.kind == OpKind::free) continue;  // zero-time: the memory counter shows them
    // Picoseconds are the trace's integer time unit; a measured time is cut to whole ps.
    const auto start_ps = static_cast<int64_t>(m.start_s * 1e12);
    const auto end_ps = static_cast<int64_t>(m.end_s * 1e12);
    t.slices.push_back(TraceSlice{m.kernel.empty() ? m.label : m.label + " [" + m.kernel + "]",
                                  to_string(m.kind),
                                  0,
                                  stream_tid(m.cp_rank, m.stream),
                                  start_ps,
                                  end_ps,
                                  {{"cp_rank", m.cp_rank},
                                   {"op_index", static_cast<int64_t>(m.op_index)},
                                   {"kind", to_string(m.kind)},
                                   {"phase", to_string(m.phase)},
                                   {"ring_step", m.ring_step},
                                   {"start_ps", start_ps},
                                   {"end_ps", end_ps},
                                   {"flops", m.flops},
                                   {"bytes", m.bytes}}});
  }
  return t;
}

namespace {

/// Picoseconds of a measured time (the trace's integer unit; cut to whole ps as measured_timeline does).
int64_t to_ps(double s) { return static_cast<int64_t>(s * 1e12); }

/// A time one picosecond inside a measured op's interval (its start or its end side), so that a viewer binds a
/// flow end to this slice and not to a neighbour that touches it.
int64_t inside(const MeasuredOp& m, bool near_start) {
  const int64_t a = to_ps(m.start_s), b = to_ps(m.end_s);
  if (b - a < 2) return a;
  return near_start ? a + 1 : b - 1;
}

/// Per rank with memory a "memory" counter (id "gpu <r>"): its input buffers at 0, then the live bytes after each
/// measured alloc and free in start order (op order among equal starts), sized by the schedule's buffers.
void add_measured_memory(const DeviceRunResult& run, const Schedule& schedule, TraceTimeline& t) {
  for (size_t r = 0; r < schedule.ranks.size(); ++r) {
    const RankProgram& p = schedule.ranks[r];
    std::vector<char> live(p.buffers.size(), 0);
    int64_t bytes = 0;
    for (const auto& in : p.inputs) {
      const auto b = static_cast<size_t>(in.buffer);
      if (in.buffer < 0 || b >= live.size() || live[b]) continue;  // one buffer bound twice is live once
      live[b] = 1;
      bytes += p.buffers[b].size_bytes();
    }
    std::vector<const MeasuredOp*> changes;
    for (const MeasuredOp& m : run.timeline)
      if (m.cp_rank == static_cast<int64_t>(r) && (m.kind == OpKind::alloc || m.kind == OpKind::free))
        changes.push_back(&m);
    if (changes.empty() && bytes == 0) continue;
    std::stable_sort(changes.begin(), changes.end(), [](const MeasuredOp* a, const MeasuredOp* b) {
      return std::tie(a->start_s, a->op_index) < std::tie(b->start_s, b->op_index);
    });
    const std::string id = "gpu " + std::to_string(r);
    t.counters.push_back(TraceCounter{"memory", id, 0, 0, {{"allocated_bytes", bytes}}});
    for (const MeasuredOp* m : changes) {
      const Op& op = p.ops[static_cast<size_t>(m->op_index)];
      const BufferId b = m->kind == OpKind::alloc ? std::get<AllocOp>(op.payload).buffer
                                                  : std::get<FreeOp>(op.payload).buffer;
      const int64_t size = p.buffers[static_cast<size_t>(b)].size_bytes();
      bytes += m->kind == OpKind::alloc ? size : -size;
      t.counters.push_back(TraceCounter{"memory", id, 0, to_ps(m->start_s), {{"allocated_bytes", bytes}}});
    }
  }
}

/// An arrow (cat "message") from each measured SendRecvOp send side to the measured op that receives it: sides
/// match by (source, destination, tag) in program order, as the NCCL backend pairs them; ids count the arrows in
/// (source, destination, tag, order) order.
void add_measured_arrows(const DeviceRunResult& run, const Schedule& schedule, TraceTimeline& t) {
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  std::map<Key, std::vector<OpIndex>> sends, recvs;
  for (size_t r = 0; r < schedule.ranks.size(); ++r) {
    const auto rank = static_cast<int64_t>(r);
    const std::vector<Op>& ops = schedule.ranks[r].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto* sr = std::get_if<SendRecvOp>(&ops[i].payload);
      if (sr == nullptr) continue;
      if (sr->send_peer >= 0) sends[Key{rank, sr->send_peer, sr->send_tag}].push_back(static_cast<OpIndex>(i));
      if (sr->recv_peer >= 0) recvs[Key{sr->recv_peer, rank, sr->recv_tag}].push_back(static_cast<OpIndex>(i));
    }
  }
  std::map<std::pair<int64_t, OpIndex>, const MeasuredOp*> measured;
  for (const MeasuredOp& m : run.timeline) measured[{m.cp_rank, m.op_index}] = &m;
  int64_t id = 0;
  for (const auto& [key, send_ops] : sends) {
    const auto [src, dst, tag] = key;
    const std::vector<OpIndex>& recv_ops = recvs[key];
    for (size_t k = 0; k < send_ops.size() && k < recv_ops.size(); ++k) {
      const auto s = measured.find({src, send_ops[k]});
      const auto d = measured.find({dst, recv_ops[k]});
      if (s == measured.end() || d == measured.end()) continue;  // process mode: the peer ran elsewhere
      const std::string name = "cp " + std::to_string(src) + "->" + std::to_string(dst);
      t.flows.push_back(TraceFlowEnd{name, "message", id, true, 0, stream_tid(src, s->second->stream),
                                     inside(*s->second, true)});
      t.flows.push_back(TraceFlowEnd{name, "message", id, false, 0, stream_tid(dst, d->second->stream),
                                     inside(*d->second, false)});
      ++id;
    }
  }
}

}  // namespace

TraceTimeline measured_timeline(const DeviceRunResult& run, const Schedule& schedule) {
  TraceTimeline t = measured_timeline(run);
  add_measured_memory(run, schedule, t);
  add_measured_arrows(run, schedule, t);
  return t;
}

}  // namespace hcpsim::gpu
