#pragma once
// Private to sim/: the rendezvous of communication ops (simulator.hpp) — a SendRecvOp's sides are matched by
// (source, destination, tag) in issue order, and a collective (all-to-all, all-gather, reduce-scatter) starts
// when every member of its group has reached it; the messages then go to the MessageTransport, and the ops
// finish (SimContext::finisher) when their messages have been delivered.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "message_transport.hpp"
#include "sim_context.hpp"

namespace hcpsim::sim::detail {

/// The group, tag and input buffer of a collective op.
struct CollectiveView {
  const std::vector<int64_t>* group = nullptr;
  int64_t tag = 0;
  BufferId input = -1;
};

/// The CollectiveView of an AllToAllOp, AllGatherOp or ReduceScatterOp (HCPSIM_ASSERT for any other op).
CollectiveView collective_of(const Op& op);

/// Matches the sides of every communication of one run.
class Rendezvous {
 public:
  Rendezvous(SimContext& ctx, MessageTransport& transport);

  /// SendRecvOp i of `rank` starts now: each of its sides waits for the opposite side (or matches it).
  void start_send_recv(int64_t rank, OpIndex i);
  /// Collective op i of `rank` is reached now; the last member to arrive launches the messages.
  void arrive_collective(int64_t rank, OpIndex i);

  /// For a deadlock report: what started communication op i of `rank` waits for; "" for any other op.
  [[nodiscard]] std::string blocked_reason(int64_t rank, OpIndex i) const;

 private:
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
  using MessageKey = std::tuple<int64_t, int64_t, int64_t>;            // (src cp rank, dst cp rank, tag)
  using CollectiveKey = std::tuple<int, int64_t, std::vector<int64_t>>;  // (op kind, tag, group)
  /// The members of a launched collective in group order, and what each sends to each other member.
  struct CollectiveMessages {
    std::vector<Endpoint> members;
    std::vector<int64_t> bytes_per_peer;
  };

  void check_peer(int64_t rank, OpIndex i, int64_t peer) const;
  void arrive_message(const MessageKey& key, bool is_sender, HalfMessage half);
  void start_transfer(const MessageKey& key, const HalfMessage& sender, const HalfMessage& receiver);
  void transfer_done(const Endpoint& e);
  /// Every member of the collective of (rank, op i) has arrived (collectives_ holds them): start its messages.
  void launch_collective(int64_t rank, OpIndex i);
  /// The messages of an all-gather or reduce-scatter as NCCL's ring channels (ring_collective.hpp): one flow per
  /// ring hop and channel carrying the channel's share of the (n − 1) parts a member forwards, started after the
  /// ring's protocol latency (collective_model.hpp ring_estimate) less the hop's route latency.
  void launch_ring(const Op& op, const CollectiveMessages& msgs, const std::function<void()>& finish_all);
  /// Orders the arrived members by group position and sizes each member's message to each peer.
  [[nodiscard]] CollectiveMessages size_collective(int64_t rank, const Op& op,
                                                   const std::vector<Endpoint>& arrived) const;
  [[nodiscard]] std::string send_recv_blocked_reason(int64_t rank, OpIndex i, const SendRecvOp& sr) const;
  [[nodiscard]] std::string collective_blocked_reason(int64_t rank, OpIndex i) const;

  SimContext& ctx_;
  MessageTransport& transport_;
  std::map<MessageKey, MessageQueue> messages_;
  std::map<CollectiveKey, std::vector<Endpoint>> collectives_;
};

}  // namespace hcpsim::sim::detail
