#include "message_transport.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "hcpsim/sim/cost_model.hpp"

namespace hcpsim::sim::detail {

namespace {

std::vector<double> capacities(const Topology& t) {
  std::vector<double> c;
  for (const TopologyLink& l : t.links()) c.push_back(l.bandwidth_bytes_per_s);
  return c;
}

}  // namespace

MessageTransport::MessageTransport(SimContext& ctx)
    : ctx_(ctx),
      network_(ctx.queue, capacities(ctx.topology), kPriorityCompletion, kPriorityNetwork),
      shadow_(ctx.topology, ctx.options.symmetry_reduction),
      sent_(ctx.schedule.ranks.size()),
      pair_messages_(ctx.schedule.ranks.size()) {}

const MessageTransport::Routed& MessageTransport::RouteTree::route(const Topology& topology, int64_t src_gpu,
                                                                    int64_t dst_gpu, uint64_t flow_id,
                                                                    bool& only_path) {
  only_path = true;
  if (nodes_.empty()) {
    const int64_t src = topology.gpu_vertex(src_gpu);
    if (src == topology.gpu_vertex(dst_gpu)) {  // a message that stays on its GPU: no links, no latency
      if (leaves_.empty()) leaves_.push_back(Routed{});
      return leaves_.front();
    }
    std::vector<int64_t> links = topology.next_hops(src, dst_gpu);
    const size_t n = links.size();
    nodes_.push_back(Node{std::move(links), std::vector<int32_t>(n, kUnbuilt)});
  }
  thread_local std::vector<int64_t> path;  // the links taken so far (kept for a new leaf)
  path.clear();
  const uint64_t key = ecmp_pair_key(src_gpu, dst_gpu);
  size_t node = 0;
  for (uint64_t hop = 0;; ++hop) {
    const size_t choices = nodes_[node].links.size();
    if (choices > 1) only_path = false;
    const size_t i = choices == 1 ? 0 : static_cast<size_t>(ecmp_hash(key, flow_id, hop) % choices);
    const int64_t link = nodes_[node].links[i];
    path.push_back(link);
    int32_t next = nodes_[node].next[i];
    if (next == kUnbuilt) {
      const int64_t v = topology.links()[index_of(link)].to;
      if (v == topology.gpu_vertex(dst_gpu)) {
        leaves_.push_back(Routed{SharedRoute(path), topology.route_latency_s(path)});
        next = ~static_cast<int32_t>(leaves_.size() - 1);
      } else {
        std::vector<int64_t> links = topology.next_hops(v, dst_gpu);
        const size_t n = links.size();
        nodes_.push_back(Node{std::move(links), std::vector<int32_t>(n, kUnbuilt)});
        next = static_cast<int32_t>(nodes_.size() - 1);
      }
      nodes_[node].next[i] = next;
    }
    if (next < 0) return leaves_[index_of(~next)];
    node = static_cast<size_t>(next);
  }
}

MessageTransport::PairState& MessageTransport::pair_state(int64_t src, int64_t dst) {
  std::vector<PairState>& peers = pair_messages_[index_of(src)];
  auto it = std::find_if(peers.begin(), peers.end(), [dst](const PairState& ps) { return ps.peer == dst; });
  if (it != peers.end()) return *it;
  return peers.emplace_back(PairState{dst, 0, {}, {}, false, {}});
}

MessageTransport::Routed MessageTransport::next_route(PairState& ps, int64_t src, int64_t dst) {
  const auto ordinal = static_cast<uint64_t>(ps.count++);
  if (ps.single_path) return ps.single;
  bool only_path = false;
  const Routed& routed = ps.routes.route(ctx_.topology, ctx_.gpus[index_of(src)], ctx_.gpus[index_of(dst)], ordinal,
                                         only_path);
  // A pair with one shortest path gets it for every ordinal: reuse it without a walk (also in a full run).
  if (only_path || (ctx_.options.symmetry_reduction && single_shortest_path(src, dst))) {
    ps.single = routed;
    ps.single_path = true;
    ps.routes = RouteTree{};  // `routed` pointed into it: return the copy
    return ps.single;
  }
  return routed;
}

bool MessageTransport::single_shortest_path(int64_t src, int64_t dst) const {
  const int64_t gpn = ctx_.cluster.gpus_per_node;
  const int64_t ga = ctx_.gpus[index_of(src)], gb = ctx_.gpus[index_of(dst)];
  if (ga / gpn == gb / gpn) return true;
  const int64_t leaf_downlinks = ctx_.cluster.fabric.leaf_downlinks;
  return ga % gpn == gb % gpn && (ga / gpn) / leaf_downlinks == (gb / gpn) / leaf_downlinks;
}

void MessageTransport::count_message(int64_t src, Phase phase, LinkLevel level, int64_t size_bytes) {
  for (MessageTable* table : {&totals_, &sent_[index_of(src)]}) {
    MessageTotals& t = (*table)[phase_index(phase)][level_index(level)];
    ++t.count;
    t.bytes += size_bytes;
  }
}

void MessageTransport::send_message(int64_t src, int64_t dst, int64_t bytes, Phase phase, MessageOps ops,
                                    Delivered delivered, bool with_images) {
  count_message(src, phase, link_level(ctx_.node(src), ctx_.node(dst)), bytes);
  const int64_t images = with_images ? ctx_.classes.size - 1 : 0;
  const int32_t slot = acquire_slot(images);
  PairState& ps = pair_state(src, dst);
  Routed routed = next_route(ps, src, dst);
  const double route_latency_s = routed.latency_s;
  const TimePs route_latency_ps = seconds_to_ps(route_latency_s);
  add_record(slot, FlowRecord{src, dst, bytes, phase, -1, -1, std::move(routed.route), ops.send, ops.recv});
  // Until every image pair has its single route (then kept in ps.image_routes), each image is routed by its own
  // pair's state.
  const bool kept = !ps.image_routes.empty();
  bool all_single = !kept;
  for (int64_t a = 1; a <= images; ++a) {
    const int64_t isrc = ctx_.classes.image(src, a), idst = ctx_.classes.image(dst, a);
    count_message(isrc, phase, link_level(ctx_.node(isrc), ctx_.node(idst)), bytes);
    Routed image;
    if (kept) {
      image = ps.image_routes[index_of(a - 1)];
    } else {
      PairState& ips = pair_state(isrc, idst);
      image = next_route(ips, isrc, idst);
      all_single = all_single && ips.single_path;
    }
    if (image.latency_s != route_latency_s)
      shadow_.not_exact(
          fmt::format("the image {}→{} of message {}→{} has another route latency", isrc, idst, src, dst));
    add_record(slot, FlowRecord{isrc, idst, bytes, phase, -1, -1, std::move(image.route), ops.send, ops.recv});
  }
  if (images > 0 && all_single) {
    // (ps stays valid: image pairs live in the peer lists of image ranks, never in src's.)
    for (int64_t a = 1; a <= images; ++a)
      ps.image_routes.push_back(pair_state(ctx_.classes.image(src, a), ctx_.classes.image(dst, a)).single);
  }
  launch(slot, seconds_to_ps(ctx_.cluster.message_latency_s), route_latency_ps, std::move(delivered));
}

void MessageTransport::send_routed_message(int64_t src, int64_t dst, int64_t bytes, Phase phase, MessageOps ops,
                                           std::vector<int64_t> route, TimePs software_latency_ps,
                                           Delivered delivered) {
  count_message(src, phase, link_level(ctx_.node(src), ctx_.node(dst)), bytes);
  const int32_t slot = acquire_slot(0);
  const TimePs route_latency_ps = seconds_to_ps(ctx_.topology.route_latency_s(route));
  add_record(slot, FlowRecord{src, dst, bytes, phase, -1, -1, std::move(route), ops.send, ops.recv});
  launch(slot, software_latency_ps, route_latency_ps, std::move(delivered));
}

int32_t MessageTransport::acquire_slot(int64_t images) {
  int32_t slot = 0;
  if (free_in_flight_.empty()) {
    HCPSIM_ASSERT(in_flight_.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()),
                  "too many messages in flight");
    slot = static_cast<int32_t>(in_flight_.size());
    in_flight_.emplace_back();
  } else {
    slot = free_in_flight_.back();
    free_in_flight_.pop_back();
  }
  InFlight& m = in_flight_[index_of(slot)];
  m.flow_index = ctx_.options.record_flows ? static_cast<int64_t>(flows_.size()) : -1;
  m.images = images;
  m.records.clear();
  return slot;
}

void MessageTransport::add_record(int32_t slot, FlowRecord record) {
  ++flow_count_;
  if (ctx_.options.record_flows)
    flows_.push_back(std::move(record));
  else
    in_flight_[index_of(slot)].records.push_back(std::move(record));
}

FlowRecord* MessageTransport::records(int32_t slot) {
  InFlight& m = in_flight_[index_of(slot)];
  return m.flow_index >= 0 ? &flows_[index_of(m.flow_index)] : m.records.data();
}

void MessageTransport::launch(int32_t slot, TimePs software_latency_ps, TimePs route_latency_ps,
                              Delivered delivered) {
  InFlight& m = in_flight_[index_of(slot)];
  m.route_latency_ps = route_latency_ps;
  m.delivered = std::move(delivered);
  ctx_.queue.schedule_after(software_latency_ps, kPriorityCompletion, [this, slot] { start_flow(slot); });
}

void MessageTransport::start_flow(int32_t slot) {
  FlowRecord* rec = records(slot);
  const int64_t images = in_flight_[index_of(slot)].images;
  rec->start_ps = ctx_.queue.now();
  if (images > 0) shadow_.start(rec, images, ctx_.queue.now());
  network_.start_flow(rec->route, rec->bytes, [this, slot] { flow_drained(slot); });
}

void MessageTransport::flow_drained(int32_t slot) {
  FlowRecord* rec = records(slot);
  InFlight& m = in_flight_[index_of(slot)];
  rec->drained_ps = ctx_.queue.now();
  if (m.images > 0) shadow_.end(rec, m.images, ctx_.queue.now());
  ctx_.queue.schedule_after(m.route_latency_ps, kPriorityCompletion, std::move(m.delivered));
  m.delivered = nullptr;
  free_in_flight_.push_back(slot);
}

}  // namespace hcpsim::sim::detail
