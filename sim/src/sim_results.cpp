#include "sim_results.hpp"

#include "gpu_sharing.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace hcpsim::sim::detail {

namespace {

using Intervals = std::vector<std::pair<TimePs, TimePs>>;

/// Union of half-open intervals, sorted and disjoint.
Intervals merge_intervals(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
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

TimePs measure(const Intervals& merged) {
  TimePs total = 0;
  for (const auto& iv : merged) total += iv.second - iv.first;
  return total;
}

bool is_compute_stream(Stream s) { return s == Stream::compute || s == Stream::cp; }

/// The TimeBreakdown field an op of `kind` on a compute stream adds its duration to.
TimePs& category(TimeBreakdown& b, OpKind kind) {
  switch (kind) {
    case OpKind::attn_fwd_block:
    case OpKind::attn_bwd_block: return b.attention_kernel_ps;
    case OpKind::lse_merge:
    case OpKind::out_correction: return b.merge_correction_ps;
    case OpKind::copy: return b.copy_ps;
    case OpKind::alloc:
    case OpKind::free:
    case OpKind::gemm:
    case OpKind::elementwise:
    case OpKind::all_to_all:
    case OpKind::send_recv:
    case OpKind::all_gather:
    case OpKind::reduce_scatter: break;
  }
  return b.other_compute_ps;
}

/// The per-phase time breakdown of one rank (RankStats::time_breakdown), accumulated op by op in the walk over
/// the rank's ops that executed_rank makes anyway (at large CP a program is far from the cache: one walk, not two).
class BreakdownAccumulator {
 public:
  /// Adds op `op` of the rank, which ran over [o.start_ps, o.end_ps).
  void add(const Op& op, const OpRuntime& o) {
    const size_t p = phase_index(op.phase);
    first_[p] = seen_[p] ? std::min(first_[p], o.start_ps) : o.start_ps;
    last_[p] = std::max(last_[p], o.end_ps);
    seen_[p] = true;
    if (!is_compute_stream(op.stream)) return;
    category(breakdown_[p], op.kind()) += o.end_ps - o.start_ps;
    busy_[p].emplace_back(o.start_ps, o.end_ps);
  }
  /// Writes the breakdown of the ops added into `st`; `progress`: the rank's runtimes (its comm slowdown).
  void finish(const RankProgress& progress, RankStats& st) {
    for (size_t p = 0; p < kPhaseCount; ++p) {
      st.time_breakdown[p] = breakdown_[p];
      st.time_breakdown[p].comm_slowdown_ps = progress.comm_slowdown_units[p] / kShareScale;
      if (seen_[p])
        st.time_breakdown[p].exposed_comm_ps = last_[p] - first_[p] - measure(merge_intervals(std::move(busy_[p])));
    }
  }

 private:
  std::array<TimeBreakdown, kPhaseCount> breakdown_{};
  std::array<Intervals, kPhaseCount> busy_;
  std::array<TimePs, kPhaseCount> first_{};
  std::array<TimePs, kPhaseCount> last_{};
  std::array<bool, kPhaseCount> seen_{};
};

/// Every directed link's totals: the flow network's usage plus, in a reduced run, the image messages'.
std::vector<LinkStats> link_stats(const Topology& topology, const std::vector<LinkUsage>& usage,
                                  const std::vector<LinkUsage>& shadow_usage) {
  std::vector<LinkStats> links;
  for (size_t l = 0; l < topology.links().size(); ++l) {
    const TopologyLink& tl = topology.links()[l];
    const TopologyVertex& from = topology.vertices()[index_of(tl.from)];
    LinkUsage u = usage[l];
    if (!shadow_usage.empty()) {
      // Image messages use other rails than the executed ones: the two usages never overlap on a link.
      u.bytes += shadow_usage[l].bytes;
      u.busy_ps += shadow_usage[l].busy_ps;
      u.flows += shadow_usage[l].flows;
    }
    links.push_back(LinkStats{from.name, topology.vertices()[index_of(tl.to)].name, from.node, tl.link_class,
                              tl.bandwidth_bytes_per_s, u.bytes, u.busy_ps, u.flows});
  }
  return links;
}

/// The end of the backward over the ranks collected so far.
struct BackwardEnd {
  bool any_backward = false;
  TimePs end_ps = 0;
};

/// The FLOPs of the last executed rank's ops that have any, as (phase index, flops) in op order: what each of its
/// images (collected right after it) adds to SimResult::flops, read without walking the representative's whole
/// program again (at large CP a program is far from the cache, and a class has several images). Skipping the
/// ops with 0 FLOPs leaves every sum bit for bit as it was: the sums start at +0 and add values >= 0, and
/// x + 0 == x for those.
struct RepresentativeFlops {
  int64_t rank = -1;
  std::vector<std::pair<size_t, double>> flops;
};

/// The stats of executed `rank`. Adds its FLOPs (in op order), forward end, backward bounds, makespan and, with
/// SimOptions::record_timeline, its timeline entries to `res`.
RankStats executed_rank(const SimContext& ctx, const MemoryAccounting& memory, const MessageTransport& transport,
                        int64_t rank, BackwardEnd& backward, RepresentativeFlops& rep_flops, SimResult& res) {
  const RankMemory& m = memory.of(rank);
  RankStats st;
  st.cp_rank = rank;
  st.node = ctx.node(rank);
  st.gpu = ctx.gpus[index_of(rank)];
  st.phase_peak_memory_bytes = m.phase_peak_bytes;
  // The inputs are live in both phases.
  for (auto& p : st.phase_peak_memory_bytes) p = std::max(p, m.input_bytes);
  st.input_bytes = m.input_bytes;
  st.peak_memory_bytes = m.peak_bytes;
  st.final_memory_bytes = m.live_bytes;
  st.messages_sent = transport.sent_by(rank);
  Intervals compute_iv;
  Intervals comm_iv;
  BreakdownAccumulator breakdown;
  const std::vector<OpRuntime>& ops = ctx.progress[index_of(rank)].ops;
  rep_flops.rank = rank;
  rep_flops.flops.clear();
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ctx.program(rank).ops[i];
    const OpRuntime& o = ops[i];
    res.flops[phase_index(op.phase)] += op.flops;
    if (op.flops != 0) rep_flops.flops.emplace_back(phase_index(op.phase), op.flops);
    breakdown.add(op, o);
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
      res.backward_start_ps = backward.any_backward ? std::min(res.backward_start_ps, o.start_ps) : o.start_ps;
      backward.end_ps = std::max(backward.end_ps, o.end_ps);
      backward.any_backward = true;
    }
    if (ctx.options.record_timeline)
      res.timeline.push_back(TimelineEntry{rank, op.stream, static_cast<OpIndex>(i), op.kind(), op.phase,
                                           op.ring_step, o.start_ps, o.end_ps, op.flops, op.bytes, op.label});
  }
  if (ctx.options.record_timeline) {
    // This rank's entries are the last ops.size() ones, in op order.
    const size_t first = res.timeline.size() - ops.size();
    for (size_t k = 0; k < m.changes.size(); ++k) {
      TimelineEntry& e = res.timeline[first + index_of(m.changes[k].first)];
      e.live_bytes = m.changes[k].second;
      e.memory_change = static_cast<int64_t>(k);
    }
  }
  breakdown.finish(ctx.progress[index_of(rank)], st);
  st.compute_busy_ps = measure(merge_intervals(std::move(compute_iv)));
  st.comm_busy_ps = measure(merge_intervals(std::move(comm_iv)));
  res.total_ps = std::max(res.total_ps, st.end_ps);
  return st;
}

/// The stats of image `rank` of a reduced run: its representative's (already in res.ranks) under relabelling.
/// Adds the representative's FLOPs (summed in the same order as a full run) and, with record_timeline, the
/// relabelled copy of its timeline entries to `res`.
RankStats image_rank(const SimContext& ctx, const MessageTransport& transport, int64_t rank,
                     const RepresentativeFlops& rep_flops, SimResult& res) {
  const int64_t rep_rank = ctx.classes.representative(rank);
  RankStats st = res.ranks[index_of(rep_rank)];
  st.cp_rank = rank;
  st.node = ctx.node(rank);
  st.gpu = ctx.gpus[index_of(rank)];
  st.messages_sent = transport.sent_by(rank);
  // A class's images follow its representative in cp-rank order (its a2a group, CpSymmetryClasses), as the
  // timeline copy below assumes too.
  HCPSIM_ASSERT(rep_flops.rank == rep_rank, "image collected apart from its representative");
  for (const auto& [phase, flops] : rep_flops.flops) res.flops[phase] += flops;
  if (ctx.options.record_timeline) {
    // The timeline ends with the representative's entries and the images before this one.
    const size_t count = ctx.progress[index_of(rep_rank)].ops.size();
    const size_t first = res.timeline.size() - count * index_of(rank - rep_rank);
    for (size_t k = 0; k < count; ++k) {
      TimelineEntry e = res.timeline[first + k];
      e.cp_rank = rank;
      res.timeline.push_back(std::move(e));
    }
  }
  return st;
}

}  // namespace

SimResult collect_results(const SimContext& ctx, const MemoryAccounting& memory, MessageTransport& transport,
                          int64_t events) {
  SimResult res;
  res.cp_comm_type = ctx.schedule.cp_comm_type;
  res.a2a_size = ctx.schedule.a2a_size;
  res.p2p_size = ctx.schedule.p2p_size;
  res.share_gpu_between_kernels = ctx.options.share_gpu_between_kernels;
  res.symmetry_reduced = ctx.options.symmetry_reduction;
  res.symmetry_exact = transport.shadow().exact();
  res.symmetry_note = transport.shadow().note();
  for (int64_t r = 0; r < ctx.rank_count(); ++r) res.simulated_ranks += ctx.classes.represented(r) ? 1 : 0;
  res.messages = transport.totals();
  res.event_count = events;
  res.flows = transport.take_flows();  // the engine is done with them
  res.flow_count = transport.flow_count();
  res.network_recomputes = transport.network().recompute_count();
  for (const TopologyVertex& v : ctx.topology.vertices()) res.node_count = std::max(res.node_count, v.node + 1);
  res.links = link_stats(ctx.topology, transport.network().usage(), transport.shadow().usage());

  size_t op_total = 0;
  for (int64_t r = 0; r < ctx.rank_count(); ++r)
    op_total += ctx.progress[index_of(ctx.classes.representative(r))].ops.size();
  if (ctx.options.record_timeline) res.timeline.reserve(op_total);
  BackwardEnd backward;
  RepresentativeFlops rep_flops;
  for (int64_t r = 0; r < ctx.rank_count(); ++r) {
    res.ranks.push_back(ctx.classes.represented(r) ? executed_rank(ctx, memory, transport, r, backward, rep_flops, res)
                                                   : image_rank(ctx, transport, r, rep_flops, res));
  }
  // Exposed communication needs the layer time, known only after every rank is collected.
  for (RankStats& st : res.ranks) st.exposed_comm_ps = res.total_ps - st.compute_busy_ps;
  // One busiest GPU for every output: the one whose idle time critical_exposed_comm_ps() is (SimResult::most_busy_rank).
  if (const RankStats* busiest = res.most_busy_rank(); busiest != nullptr) res.busiest_cp_rank = busiest->cp_rank;
  res.backward_ps = backward.any_backward ? backward.end_ps - res.backward_start_ps : 0;
  return res;
}

}  // namespace hcpsim::sim::detail
