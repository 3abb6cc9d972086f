#include "hcpsim/sim/trace_writer.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hcpsim/core/error.hpp"
#include "hcpsim/io/output_file.hpp"

namespace hcpsim::sim {

namespace {

using Json = nlohmann::ordered_json;  // keys in insertion order: stable, readable output

Json message_table_json(const MessageTable& table) {
  Json out = Json::object();
  for (size_t p = 0; p < kPhaseCount; ++p) {
    Json phase = Json::object();
    for (size_t l = 0; l < kLinkLevelCount; ++l) {
      const MessageTotals& t = table[p][l];
      phase[to_string(static_cast<LinkLevel>(l))] = Json{{"count", t.count}, {"bytes", t.bytes}};
    }
    out[to_string(static_cast<Phase>(p))] = phase;
  }
  return out;
}

}  // namespace

namespace {

/// A time inside [a, b], one picosecond away from both ends when the slice is long enough, so that a viewer binds
/// a flow end to this slice and not to the one that ends or starts at the same instant.
int64_t inside(int64_t t, int64_t a, int64_t b) {
  if (b - a < 2) return a;
  return std::clamp(t, a + 1, b - 1);
}

/// Index in result.timeline of each rank's first entry (the timeline is ordered by (cp_rank, op_index) and holds
/// every op of every rank); empty without a timeline.
std::vector<size_t> rank_offsets(const SimResult& result) {
  std::vector<size_t> first(result.ranks.size(), result.timeline.size());
  for (size_t i = result.timeline.size(); i-- > 0;) first[static_cast<size_t>(result.timeline[i].cp_rank)] = i;
  return first;
}

/// Per GPU that holds memory a "memory" counter (id "gpu <g>", value allocated_bytes): its inputs at t = 0, then the
/// live bytes after each alloc and free in run order.
void add_memory_counters(const SimResult& result, const std::vector<size_t>& first, TraceTimeline& t) {
  for (const RankStats& r : result.ranks) {
    const std::string id = "gpu " + std::to_string(r.gpu);
    std::vector<const TimelineEntry*> changes;
    for (size_t i = first[static_cast<size_t>(r.cp_rank)];
         i < result.timeline.size() && result.timeline[i].cp_rank == r.cp_rank; ++i)
      if (result.timeline[i].memory_change >= 0) changes.push_back(&result.timeline[i]);
    if (changes.empty() && r.input_bytes == 0) continue;  // a GPU that never holds memory has no track
    std::sort(changes.begin(), changes.end(),
              [](const TimelineEntry* a, const TimelineEntry* b) { return a->memory_change < b->memory_change; });
    t.counters.push_back(TraceCounter{"memory", id, r.node, 0, {{"allocated_bytes", r.input_bytes}}});
    for (const TimelineEntry* e : changes)
      t.counters.push_back(TraceCounter{"memory", id, r.node, e->start_ps, {{"allocated_bytes", e->live_bytes}}});
  }
}

/// The name of flow `fr`'s arrow and link slices: "cp <src>-><dst>" for an attention result, "gpu <src>-><dst>" for a
/// layer of TP x CP ranks (tp > 1), whose rank indices are not CP ranks.
std::string message_name(const SimResult& result, const FlowRecord& fr, int64_t tp) {
  if (tp == 1) return "cp " + std::to_string(fr.src_cp_rank) + "->" + std::to_string(fr.dst_cp_rank);
  return fmt::format("gpu {}->{}", result.ranks[static_cast<size_t>(fr.src_cp_rank)].gpu,
                     result.ranks[static_cast<size_t>(fr.dst_cp_rank)].gpu);
}

/// Per message an arrow (cat "message", id = its flow index) from its sending op's slice, where its first byte
/// enters the network, to its receiving op's slice, where its last byte has left the network.
void add_message_arrows(const SimResult& result, const std::vector<size_t>& first, int64_t tp, TraceTimeline& t) {
  for (size_t f = 0; f < result.flows.size(); ++f) {
    const FlowRecord& fr = result.flows[f];
    if (fr.src_op < 0 || fr.dst_op < 0) continue;
    const auto entry = [&](int64_t rank, OpIndex op) -> const TimelineEntry& {
      return result.timeline[first[static_cast<size_t>(rank)] + static_cast<size_t>(op)];
    };
    const TimelineEntry& s = entry(fr.src_cp_rank, fr.src_op);
    const TimelineEntry& d = entry(fr.dst_cp_rank, fr.dst_op);
    const RankStats& rs = result.ranks[static_cast<size_t>(fr.src_cp_rank)];
    const RankStats& rd = result.ranks[static_cast<size_t>(fr.dst_cp_rank)];
    const std::string name = message_name(result, fr, tp);
    const auto id = static_cast<int64_t>(f);
    t.flows.push_back(TraceFlowEnd{name, "message", id, true, rs.node, stream_tid(rs.gpu, s.stream),
                                   inside(fr.start_ps, s.start_ps, s.end_ps)});
    t.flows.push_back(TraceFlowEnd{name, "message", id, false, rd.node, stream_tid(rd.gpu, d.stream),
                                   inside(fr.drained_ps, d.start_ps, d.end_ps)});
  }
}

}  // namespace

TraceTimeline trace_timeline(const SimResult& result, int64_t tensor_model_parallel_size) {
  const int64_t tp = std::max<int64_t>(1, tensor_model_parallel_size);
  TraceTimeline t;
  const int64_t fabric_pid = result.node_count;  // leaf/spine links live in one extra process
  // Processes: one per node, then the fabric.
  for (int64_t n = 0; n <= result.node_count; ++n)
    t.processes.push_back(TraceProcess{n, n < result.node_count ? "node " + std::to_string(n) : std::string("fabric"), n});
  // Threads: one per GPU stream, then one per link direction that carried a flow.
  for (const RankStats& r : result.ranks)
    for (int s = 0; s < kStreamCount; ++s)
      t.threads.push_back(TraceThread{r.node, stream_tid(r.gpu, static_cast<Stream>(s)),
                                      tp == 1 ? stream_thread_name(r.gpu, r.cp_rank, static_cast<Stream>(s))
                                              : fmt::format("gpu {} tp rank {} cp rank {} {}", r.gpu, r.cp_rank % tp,
                                                            r.cp_rank / tp, to_string(static_cast<Stream>(s)))});
  for (size_t l = 0; l < result.links.size(); ++l) {
    const LinkStats& ls = result.links[l];
    if (ls.flows == 0) continue;
    t.threads.push_back(TraceThread{ls.from_node >= 0 ? ls.from_node : fabric_pid, link_tid(static_cast<int64_t>(l)),
                                    "link " + ls.from + " -> " + ls.to});
  }
  for (const TimelineEntry& e : result.timeline) {
    if (e.kind == OpKind::alloc || e.kind == OpKind::free) continue;  // zero-time: the memory counter shows them
    const RankStats& r = result.ranks[static_cast<size_t>(e.cp_rank)];
    t.slices.push_back(TraceSlice{e.label, to_string(e.kind), r.node, stream_tid(r.gpu, e.stream), e.start_ps, e.end_ps,
                                  {{"cp_rank", e.cp_rank / tp},
                                   {"op_index", static_cast<int64_t>(e.op_index)},
                                   {"kind", to_string(e.kind)},
                                   {"phase", to_string(e.phase)},
                                   {"ring_step", e.ring_step},
                                   {"start_ps", e.start_ps},
                                   {"end_ps", e.end_ps},
                                   {"flops", e.flops},
                                   {"bytes", e.bytes}}});
    if (tp > 1) t.slices.back().args.insert(t.slices.back().args.begin() + 1, TraceArg{"tp_rank", e.cp_rank % tp});
  }
  // Flows: one complete event per link of the route, from the first byte to the last.
  for (size_t f = 0; f < result.flows.size(); ++f) {
    const FlowRecord& fr = result.flows[f];
    for (int64_t l : fr.route) {
      const LinkStats& ls = result.links[static_cast<size_t>(l)];
      t.slices.push_back(TraceSlice{message_name(result, fr, tp),
                                    "flow",
                                    ls.from_node >= 0 ? ls.from_node : fabric_pid,
                                    link_tid(l),
                                    fr.start_ps,
                                    fr.drained_ps,
                                    {{"flow", static_cast<int64_t>(f)},
                                     {"bytes", fr.bytes},
                                     {"phase", to_string(fr.phase)},
                                     {"start_ps", fr.start_ps},
                                     {"drained_ps", fr.drained_ps}}});
    }
  }
  if (result.timeline.empty()) return t;  // no op entries to bind counters and arrows to
  const std::vector<size_t> first = rank_offsets(result);
  add_memory_counters(result, first, t);
  add_message_arrows(result, first, tp, t);
  return t;
}

std::string chrome_trace_json(const SimResult& result) { return hcpsim::chrome_trace_json(trace_timeline(result)); }

void write_chrome_trace(const std::string& path, const SimResult& result) {
  hcpsim::write_chrome_trace(path, trace_timeline(result));
}

namespace {

/// {"forward": {...}, "backward": {...}} of one rank's TimeBreakdown.
Json time_breakdown_json(const RankStats& r) {
  Json out = Json::object();
  for (size_t p = 0; p < kPhaseCount; ++p) {
    const TimeBreakdown& b = r.time_breakdown[p];
    out[to_string(static_cast<Phase>(p))] = Json{{"attention_kernel_ps", b.attention_kernel_ps},
                                                 {"merge_correction_ps", b.merge_correction_ps},
                                                 {"copy_ps", b.copy_ps},
                                                 {"other_compute_ps", b.other_compute_ps},
                                                 {"comm_slowdown_ps", b.comm_slowdown_ps},
                                                 {"exposed_comm_ps", b.exposed_comm_ps}};
  }
  return out;
}

}  // namespace

std::string summary_json(const SimResult& result) {
  Json ranks = Json::array();
  for (const RankStats& r : result.ranks) {
    ranks.push_back(Json{{"cp_rank", r.cp_rank},
                         {"node", r.node},
                         {"gpu", r.gpu},
                         {"end_ps", r.end_ps},
                         {"compute_busy_ps", r.compute_busy_ps},
                         {"compute_kernel_ps", r.compute_kernel_ps},
                         {"comm_busy_ps", r.comm_busy_ps},
                         {"exposed_comm_ps", r.exposed_comm_ps},
                         {"input_bytes", r.input_bytes},
                         {"peak_memory_bytes", r.peak_memory_bytes},
                         {"peak_memory_bytes_forward", r.phase_peak_memory_bytes[0]},
                         {"peak_memory_bytes_backward", r.phase_peak_memory_bytes[1]},
                         {"final_memory_bytes", r.final_memory_bytes},
                         {"time_breakdown", time_breakdown_json(r)},
                         {"messages_sent", message_table_json(r.messages_sent)}});
  }
  Json flops = Json::object();
  for (size_t p = 0; p < kPhaseCount; ++p) flops[to_string(static_cast<Phase>(p))] = result.flops[p];
  Json levels = Json::object();
  for (int c = 0; c < kLinkClassCount; ++c) {
    const LinkClassUtilisation u = result.link_class_utilisation(static_cast<LinkClass>(c));
    levels[to_string(static_cast<LinkClass>(c))] = Json{{"links", u.links},
                                                        {"bytes", u.bytes},
                                                        {"mean_utilisation", u.mean_utilisation},
                                                        {"max_utilisation", u.max_utilisation}};
  }
  int64_t peak = 0;
  TimePs max_exposed = 0;
  for (const RankStats& r : result.ranks) {
    peak = std::max(peak, r.peak_memory_bytes);
    max_exposed = std::max(max_exposed, r.exposed_comm_ps);
  }
  Json summary{{"network_model", "flow-level max-min fair"},
               {"share_gpu_between_kernels", result.share_gpu_between_kernels},
               {"cp_comm_type", to_string(result.cp_comm_type)},
               {"a2a_size", result.a2a_size},
               {"p2p_size", result.p2p_size},
               {"forward_ps", result.forward_ps},
               {"backward_start_ps", result.backward_start_ps},
               {"backward_ps", result.backward_ps},
               {"total_ps", result.total_ps},
               {"flops", std::move(flops)},
               {"messages", message_table_json(result.messages)},
               {"max_exposed_comm_ps", max_exposed},
               {"critical_exposed_comm_ps", result.critical_exposed_comm_ps()},
               {"load_imbalance_ps", result.load_imbalance_ps()},
               {"busiest_cp_rank", result.busiest_cp_rank},
               {"time_breakdown", result.ranks.empty() ? Json::object()
                                                       : time_breakdown_json(result.ranks[static_cast<size_t>(
                                                             result.busiest_cp_rank)])},
               {"max_peak_memory_bytes", peak},
               {"link_utilisation", std::move(levels)},
               {"flow_count", result.flow_count},
               {"event_count", result.event_count},
               {"ranks", std::move(ranks)}};
  return summary.dump(2) + "\n";
}

void write_summary_json(const std::string& path, const SimResult& result) {
  write_output_file(path, summary_json(result), "summary");
}


std::string links_csv(const SimResult& result) {
  std::string out = "link,from,to,class,bandwidth_bytes_per_s,bytes,busy_ps,flows,utilisation\n";
  const double total_s = static_cast<double>(result.total_ps) / kPsPerSecond;
  for (size_t l = 0; l < result.links.size(); ++l) {
    const LinkStats& ls = result.links[l];
    const double util = total_s > 0 ? static_cast<double>(ls.bytes) / (ls.bandwidth_bytes_per_s * total_s) : 0.0;
    out += fmt::format("{},{},{},{},{:.17g},{},{},{},{:.17g}\n", l, ls.from, ls.to, to_string(ls.link_class),
                       ls.bandwidth_bytes_per_s, ls.bytes, ls.busy_ps, ls.flows, util);
  }
  return out;
}

void write_links_csv(const std::string& path, const SimResult& result) {
  write_output_file(path, links_csv(result), "links CSV");
}

}  // namespace hcpsim::sim
