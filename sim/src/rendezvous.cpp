#include "rendezvous.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "hcpsim/core/lowering.hpp"
#include "hcpsim/sim/collective_model.hpp"
#include "hcpsim/sim/cost_model.hpp"
#include "ring_collective.hpp"

namespace hcpsim::sim::detail {

CollectiveView collective_of(const Op& op) {
  if (const auto* a = std::get_if<AllToAllOp>(&op.payload)) return {&a->group, a->tag, a->input};
  if (const auto* g = std::get_if<AllGatherOp>(&op.payload)) return {&g->group, g->tag, g->input};
  if (const auto* r = std::get_if<ReduceScatterOp>(&op.payload)) return {&r->group, r->tag, r->input};
  HCPSIM_ASSERT(false, "not a collective: " + op.label.str());
  return {};
}

Rendezvous::Rendezvous(SimContext& ctx, MessageTransport& transport) : ctx_(ctx), transport_(transport) {}

// ---- send/recv ----

void Rendezvous::start_send_recv(int64_t rank, OpIndex i) {
  const auto& sr = std::get<SendRecvOp>(ctx_.op_of(rank, i).payload);
  OpRuntime& o = ctx_.op_runtime(rank, i);
  o.pending_transfers = static_cast<int16_t>((sr.send_peer >= 0 ? 1 : 0) + (sr.recv_peer >= 0 ? 1 : 0));
  if (o.pending_transfers == 0) {
    ctx_.finish_after(0, rank, i);
    return;
  }
  // Register the send before the receive: with a self-message (peer == rank) the op matches itself.
  if (sr.send_peer >= 0) {
    check_peer(rank, i, sr.send_peer);
    arrive_message(MessageKey{rank, sr.send_peer, sr.send_tag}, /*is_sender=*/true,
                   HalfMessage{{rank, i}, message_send_bytes(ctx_.program(rank), sr)});
  }
  if (sr.recv_peer >= 0) {
    check_peer(rank, i, sr.recv_peer);
    arrive_message(MessageKey{sr.recv_peer, rank, sr.recv_tag}, /*is_sender=*/false,
                   HalfMessage{{rank, i}, message_recv_bytes(ctx_.program(rank), sr)});
  }
}

void Rendezvous::check_peer(int64_t rank, OpIndex i, int64_t peer) const {
  HCPSIM_ASSERT(peer < ctx_.rank_count(),
                fmt::format("cp rank {} op {} '{}': peer {} out of range", rank, i, ctx_.op_of(rank, i).label.str(), peer));
}

void Rendezvous::arrive_message(const MessageKey& key, bool is_sender, HalfMessage half) {
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

void Rendezvous::start_transfer(const MessageKey& key, const HalfMessage& sender, const HalfMessage& receiver) {
  const auto [src, dst, tag] = key;
  HCPSIM_ASSERT(sender.size_bytes == receiver.size_bytes,
                fmt::format("message {}→{} tag {}: sender op {} '{}' sends {} B, receiver op {} '{}' takes {} B",
                            src, dst, tag, sender.endpoint.op, ctx_.op_of(src, sender.endpoint.op).label.str(),
                            sender.size_bytes, receiver.endpoint.op, ctx_.op_of(dst, receiver.endpoint.op).label.str(),
                            receiver.size_bytes));
  const Phase phase = ctx_.op_of(src, sender.endpoint.op).phase;
  const Endpoint s = sender.endpoint;
  const Endpoint r = receiver.endpoint;
  HCPSIM_ASSERT(ctx_.classes.represented(src) && ctx_.classes.represented(dst),
                fmt::format("symmetry reduction: message {}→{} tag {} leaves the representatives", src, dst, tag));
  transport_.send_message(src, dst, sender.size_bytes, phase, MessageOps{s.op, r.op}, [this, s, r] {
    transfer_done(s);
    transfer_done(r);
  }, /*with_images=*/ctx_.options.symmetry_reduction);
}

void Rendezvous::transfer_done(const Endpoint& e) {
  OpRuntime& o = ctx_.op_runtime(e.cp_rank, e.op);
  HCPSIM_ASSERT(o.pending_transfers > 0, fmt::format("cp rank {} op {}: extra transfer", e.cp_rank, e.op));
  if (--o.pending_transfers == 0) ctx_.finisher.finish_op(e.cp_rank, e.op);
}

// ---- collectives: all-to-all, all-gather, reduce-scatter ----

void Rendezvous::arrive_collective(int64_t rank, OpIndex i) {
  const Op& op = ctx_.op_of(rank, i);
  const OpKind kind = op.kind();
  const CollectiveView c = collective_of(op);
  const std::vector<int64_t>& group = *c.group;
  HCPSIM_ASSERT(std::find(group.begin(), group.end(), rank) != group.end(),
                fmt::format("cp rank {} op {} '{}': rank is not a member of its {} group", rank, i, op.label.str(),
                            to_string(kind)));
  if (ctx_.options.symmetry_reduction) {
    // Every member is an image of `rank` and reaches this op at the same time (docs/simulator.md).
    std::vector<Endpoint> all;
    for (int64_t member : group) {
      HCPSIM_ASSERT(ctx_.classes.representative(member) == rank,
                    fmt::format("symmetry reduction: {} tag {} of cp rank {} has member {} outside its class",
                                to_string(kind), c.tag, rank, member));
      all.push_back(Endpoint{member, i});
    }
    collectives_[CollectiveKey{static_cast<int>(kind), c.tag, group}] = std::move(all);
    launch_collective(rank, i);
    return;
  }
  CollectiveKey key{static_cast<int>(kind), c.tag, group};
  std::vector<Endpoint>& arrived = collectives_[key];
  for (const Endpoint& e : arrived) {
    HCPSIM_ASSERT(e.cp_rank != rank, fmt::format("cp rank {} op {} '{}': reached {} tag {} twice", rank, i,
                                                 op.label.str(), to_string(kind), c.tag));
  }
  arrived.push_back(Endpoint{rank, i});
  if (arrived.size() < group.size()) return;
  launch_collective(rank, i);
}

Rendezvous::CollectiveMessages Rendezvous::size_collective(int64_t rank, const Op& op,
                                                           const std::vector<Endpoint>& arrived) const {
  const OpKind kind = op.kind();
  const CollectiveView c = collective_of(op);
  CollectiveMessages out;
  for (int64_t member : *c.group) {
    HCPSIM_ASSERT(member >= 0, "negative cp rank in a collective group");
    HCPSIM_ASSERT(member < ctx_.rank_count(), "collective group member out of range");
    const auto it =
        std::find_if(arrived.begin(), arrived.end(), [member](const Endpoint& e) { return e.cp_rank == member; });
    HCPSIM_ASSERT(it != arrived.end(), fmt::format("{} tag {}: member {} missing", to_string(kind), c.tag, member));
    out.members.push_back(*it);
    const int64_t executed = ctx_.options.symmetry_reduction ? rank : member;  // an image reads its representative
    // The lowered bytes (lowering.hpp): all_gather the whole input to every other member, all_to_all and
    // reduce_scatter 1/group of it.
    out.bytes_per_peer.push_back(collective_peer_bytes(ctx_.program(executed), ctx_.op_of(executed, it->op)));
  }
  return out;
}

void Rendezvous::launch_collective(int64_t rank, OpIndex i) {
  const Op& op = ctx_.op_of(rank, i);
  const CollectiveView c = collective_of(op);
  const CollectiveKey key{static_cast<int>(op.kind()), c.tag, *c.group};
  // Everyone is here: order the members by group position and size each member's message to each peer.
  const CollectiveMessages msgs = size_collective(rank, op, collectives_[key]);
  collectives_.erase(key);

  const auto group_size = static_cast<int64_t>(c.group->size());
  const auto pending = std::make_shared<int64_t>(group_size * (group_size - 1));
  auto finish_all = [this, members = msgs.members] {
    for (const Endpoint& e : members)
      if (ctx_.classes.represented(e.cp_rank)) ctx_.finisher.finish_op(e.cp_rank, e.op);
  };
  if (*pending == 0) {
    ctx_.queue.schedule_after(0, kPriorityCompletion, finish_all);
    return;
  }
  const std::vector<Endpoint>& members = msgs.members;
  // All-gather and reduce-scatter run as NCCL's rings. A symmetry-reduced run keeps all-pairs messages (their
  // images are counted by representative): only a2a layouts are reduced (symmetry_reduction_blocker), and
  // their schedules hold no all-gather or reduce-scatter.
  if (op.kind() != OpKind::all_to_all && !ctx_.options.symmetry_reduction) {
    launch_ring(op, msgs, finish_all);
    return;
  }
  for (size_t m = 0; m < members.size(); ++m) {
    const Phase phase =
        ctx_.options.symmetry_reduction ? op.phase : ctx_.op_of(members[m].cp_rank, members[m].op).phase;
    for (size_t n = 0; n < members.size(); ++n) {
      if (n == m) continue;
      transport_.send_message(members[m].cp_rank, members[n].cp_rank, msgs.bytes_per_peer[m], phase,
                              MessageOps{members[m].op, members[n].op}, [pending, finish_all] {
                                if (--*pending == 0) finish_all();
                              });
    }
  }
}

void Rendezvous::launch_ring(const Op& op, const CollectiveMessages& msgs, const std::function<void()>& finish_all) {
  const std::vector<Endpoint>& members = msgs.members;
  std::vector<int64_t> gpus;
  for (const Endpoint& e : members) gpus.push_back(ctx_.gpus[index_of(e.cp_rank)]);
  const auto n = static_cast<int64_t>(members.size());
  const std::vector<std::vector<RingHop>> channels = ring_channels(gpus, ctx_.topology);
  // nccl-tests' size of the collective (all-gather output, reduce-scatter input) sets the protocol latency.
  const CollectiveOp cop = op.kind() == OpKind::all_gather ? CollectiveOp::all_gather : CollectiveOp::reduce_scatter;
  const CollectiveEstimate est = ring_estimate(cop, static_cast<double>(n * msgs.bytes_per_peer.front()),
                                               group_shape(gpus, ctx_.cluster), ctx_.cluster);
  const auto pending = std::make_shared<int64_t>(n * static_cast<int64_t>(channels.size()));
  const auto c_count = static_cast<int64_t>(channels.size());
  for (int64_t c = 0; c < c_count; ++c) {
    for (const RingHop& hop : channels[index_of(c)]) {
      // A member forwards n − 1 parts over the ring, one channel's share of them on this hop.
      const int64_t total = (n - 1) * msgs.bytes_per_peer[hop.from];
      const int64_t bytes = total / c_count + (c < total % c_count ? 1 : 0);
      const double software_s = std::max(0.0, est.latency_s - ctx_.topology.route_latency_s(hop.route));
      const Endpoint& from = members[hop.from];
      const Phase phase = ctx_.op_of(from.cp_rank, from.op).phase;
      transport_.send_routed_message(from.cp_rank, members[hop.to].cp_rank, bytes, phase,
                                     MessageOps{from.op, members[hop.to].op}, hop.route,
                                     seconds_to_ps(software_s), [pending, finish_all] {
                                       if (--*pending == 0) finish_all();
                                     });
    }
  }
}

// ---- deadlock reports ----

std::string Rendezvous::blocked_reason(int64_t rank, OpIndex i) const {
  const Op& op = ctx_.op_of(rank, i);
  if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) return send_recv_blocked_reason(rank, i, *sr);
  if (op.kind() == OpKind::all_to_all || op.kind() == OpKind::all_gather || op.kind() == OpKind::reduce_scatter)
    return collective_blocked_reason(rank, i);
  return "";
}

std::string Rendezvous::send_recv_blocked_reason(int64_t rank, OpIndex i, const SendRecvOp& sr) const {
  // A side is unmatched while its half message still waits in the queue of its key.
  auto waiting = [this, rank, i](const MessageKey& key, bool sender) {
    const auto it = messages_.find(key);
    if (it == messages_.end()) return false;
    for (const HalfMessage& h : sender ? it->second.senders : it->second.receivers)
      if (h.endpoint.cp_rank == rank && h.endpoint.op == i) return true;
    return false;
  };
  std::string sides;
  if (sr.send_peer >= 0 && waiting(MessageKey{rank, sr.send_peer, sr.send_tag}, true))
    sides += fmt::format(" send to cp rank {} tag {} (receiver not there);", sr.send_peer, sr.send_tag);
  if (sr.recv_peer >= 0 && waiting(MessageKey{sr.recv_peer, rank, sr.recv_tag}, false))
    sides += fmt::format(" recv from cp rank {} tag {} (sender not there);", sr.recv_peer, sr.recv_tag);
  return fmt::format("started at {} ps; waiting for a rendezvous:{}", ctx_.op_runtime(rank, i).start_ps, sides);
}

std::string Rendezvous::collective_blocked_reason(int64_t rank, OpIndex i) const {
  const Op& op = ctx_.op_of(rank, i);
  const CollectiveView c = collective_of(op);
  std::string missing;
  const auto it = collectives_.find(CollectiveKey{static_cast<int>(op.kind()), c.tag, *c.group});
  for (int64_t m : *c.group) {
    bool here = false;
    if (it != collectives_.end()) {
      for (const Endpoint& e : it->second) here = here || e.cp_rank == m;
    }
    if (!here) missing += (missing.empty() ? "" : ", ") + std::to_string(m);
  }
  return fmt::format("started at {} ps; {} tag {} waiting for members [{}]", ctx_.op_runtime(rank, i).start_ps,
                     to_string(op.kind()), c.tag, missing);
}

}  // namespace hcpsim::sim::detail
