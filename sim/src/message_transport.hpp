#pragma once
// Private to sim/: messages as flows on the flow network (simulator.hpp) — each message is counted, routed,
// recorded as a FlowRecord and delivered after the per-message software latency, its flow at the max-min fair
// rate, and the route latency. In a symmetry-reduced run a ring message also stands for its images on the other
// class positions (ShadowLinks).

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "hcpsim/sim/flow_network.hpp"
#include "sim_context.hpp"
#include "symmetry_reduction.hpp"

namespace hcpsim::sim::detail {

/// The sending op (of the source rank) and the receiving op (of the destination rank) of one message.
struct MessageOps {
  OpIndex send = -1;
  OpIndex recv = -1;
};

/// Sends messages between the ranks of one run and keeps their totals, flows and routes.
class MessageTransport {
 public:
  /// Runs when a message has been delivered.
  using Delivered = std::function<void()>;

  explicit MessageTransport(SimContext& ctx);

  /// One message: software latency, then a flow over the route, then the route latency; `delivered` runs at
  /// delivery. Counts the message (sender's phase, level by nodes) and records its flow.
  /// with_images (symmetry reduction, send/recv only): the message also stands for its A − 1 images on the
  /// other class positions; they are counted and recorded (flows right after the message's own) and their
  /// routes enter the shadow link accounting from the representative's flow start to its drain.
  /// `ops`: the sending op of src and the receiving op of dst (FlowRecord::src_op, dst_op; an image's flow
  /// keeps them, its program being the representative's).
  void send_message(int64_t src, int64_t dst, int64_t bytes, Phase phase, MessageOps ops, Delivered delivered,
                    bool with_images = false);

  /// One message of a ring collective over an explicit `route` (link ids from src's GPU to dst's): after
  /// `software_latency_ps` (the collective's protocol latency) a flow over the route, then the route latency.
  /// Counted and recorded as send_message does; no symmetry images.
  void send_routed_message(int64_t src, int64_t dst, int64_t bytes, Phase phase, MessageOps ops,
                           std::vector<int64_t> route, TimePs software_latency_ps, Delivered delivered);

  /// Capacity for `messages` flow records (so that a large run does not regrow and copy them); nothing without
  /// SimOptions::record_flows.
  void reserve_flows(int64_t messages) {
    if (ctx_.options.record_flows) flows_.reserve(static_cast<size_t>(messages));
  }

  /// Messages of all ranks.
  [[nodiscard]] const MessageTable& totals() const { return totals_; }
  /// Messages `rank` sent (images included).
  [[nodiscard]] const MessageTable& sent_by(int64_t rank) const { return sent_[index_of(rank)]; }
  /// Every message's flow, in start order (none without SimOptions::record_flows); moves them out (the run is
  /// over).
  [[nodiscard]] std::vector<FlowRecord> take_flows() { return std::move(flows_); }
  /// Flows of all messages sent, recorded or not.
  [[nodiscard]] int64_t flow_count() const { return flow_count_; }
  [[nodiscard]] const FlowNetwork& network() const { return network_; }
  [[nodiscard]] const ShadowLinks& shadow() const { return shadow_; }

 private:
  /// A message's route and its latency (Topology::route_latency_s).
  struct Routed {
    SharedRoute route;
    double latency_s = 0;
  };
  /// The routes of one (source GPU, destination GPU) pair, built as its messages need them: a tree whose nodes are
  /// the vertices routes pass, each with its equal-cost next hops (Topology::next_hops) and the node each leads
  /// to; a leaf holds a whole route, shared by every message that takes it, and its latency. A walk takes, hop by
  /// hop, the link Topology::route takes for the same flow id (same choices, same hash), so it gives the same
  /// route, without a graph search or an allocation once the pair's routes are known. A ring sends P messages
  /// between a pair over a handful of distinct routes (one per equal-cost spine).
  class RouteTree {
   public:
    /// The route of flow `flow_id` from src_gpu to dst_gpu (the pair this tree serves, always the same).
    /// `only_path` is set to true when no hop of this route had a choice (Topology::route's only_path).
    const Routed& route(const Topology& topology, int64_t src_gpu, int64_t dst_gpu, uint64_t flow_id,
                        bool& only_path);

   private:
    /// Child of a node not built yet.
    static constexpr int32_t kUnbuilt = std::numeric_limits<int32_t>::max();
    struct Node {
      std::vector<int64_t> links;  ///< equal-cost next hops, ascending link id
      std::vector<int32_t> next;   ///< per link: node index, ~leaf index (< 0), or kUnbuilt
    };
    std::vector<Node> nodes_;    ///< nodes_[0]: the source GPU's vertex
    std::vector<Routed> leaves_;
  };
  /// Messages from one source rank to one destination rank so far (the ECMP flow id of the next one), the routes
  /// they took, and whether the pair has a single route (then `single` is it).
  struct PairState {
    int64_t peer = -1;
    int64_t count = 0;
    RouteTree routes;
    Routed single;
    bool single_path = false;
    /// Symmetry reduction, on the representative's pair: the routes of its messages' images on class positions
    /// 1 … A − 1, kept here once every image pair has a single route (each image pair only ever carries this
    /// pair's images, so its next_route would return that route for every later message); empty until then.
    /// Saves a search among a cold image rank's peers per image message.
    std::vector<Routed> image_routes;
  };

  /// The state of the pair src → dst (made on its first message).
  PairState& pair_state(int64_t src, int64_t dst);
  /// The route of the next message from src to dst, `ps` being pair_state(src, dst): Topology::route with flow id = the message's ordinal among
  /// those from src to dst (simulator.hpp). In a symmetry-reduced run the topology is the generated
  /// rail-optimised one with a NIC per GPU (symmetry_reduction_blocker), where a pair inside one node, or on one
  /// rail inside one scalable unit, has a single shortest path; its route is computed once and reused (the
  /// route of every image message made the reduced run spend a quarter of its time in Topology::route). In any
  /// run, a pair whose first route had no equal-cost choice at any hop (Topology::route's only_path) reuses it,
  /// and its latency.
  Routed next_route(PairState& ps, int64_t src, int64_t dst);
  /// True if the generated rail-optimised topology (one NIC per GPU) has one shortest path between the GPUs of
  /// two ranks: same node (GPU → NVSwitch → GPU), or same local GPU index (rail) and same scalable unit
  /// (GPU → NIC → leaf → NIC → GPU); any other path is longer. Only used in symmetry-reduced runs.
  [[nodiscard]] bool single_shortest_path(int64_t src, int64_t dst) const;
  void count_message(int64_t src, Phase phase, LinkLevel level, int64_t size_bytes);
  /// A free in-flight slot for a message with `images` image flows, its records not yet added.
  int32_t acquire_slot(int64_t images);
  /// Adds the next flow record of in-flight message `slot` (the message's own first, then its images): to the
  /// recorded flows (SimOptions::record_flows), else to the slot, which keeps it until the slot is reused.
  void add_record(int32_t slot, FlowRecord record);
  /// The flow records of in-flight message `slot`: its own, then its images'. Valid until a slot is acquired.
  FlowRecord* records(int32_t slot);
  /// Starts the flow of in-flight message `slot` after `software_latency_ps` and delivers route_latency_ps
  /// after it drains.
  void launch(int32_t slot, TimePs software_latency_ps, TimePs route_latency_ps, Delivered delivered);
  /// The software latency of in-flight message `slot` is over: its flow enters the network.
  void start_flow(int32_t slot);
  /// The flow of in-flight message `slot` has drained: it is delivered after its route latency.
  void flow_drained(int32_t slot);

  /// A message between launch and delivery. Its events capture only its slot here, so that they fit in
  /// std::function's small buffer instead of each copying `delivered` to the heap.
  struct InFlight {
    int64_t flow_index = -1;  ///< first record in flows_, or −1: the records are `records`
    int64_t images = 0;
    TimePs route_latency_ps = 0;
    Delivered delivered;
    std::vector<FlowRecord> records;  ///< without SimOptions::record_flows: the message's and its images'
  };

  SimContext& ctx_;
  FlowNetwork network_;
  ShadowLinks shadow_;
  std::vector<FlowRecord> flows_;
  int64_t flow_count_ = 0;
  MessageTable totals_{};
  std::vector<MessageTable> sent_;  ///< per source rank
  /// Per source rank; a rank has few peers, so a linear search is fastest.
  std::vector<std::vector<PairState>> pair_messages_;
  /// Messages in flight, in slots reused once delivered (memory follows the messages in flight).
  std::vector<InFlight> in_flight_;
  std::vector<int32_t> free_in_flight_;
};

}  // namespace hcpsim::sim::detail
