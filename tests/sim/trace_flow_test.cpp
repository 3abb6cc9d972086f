// The Chrome trace in the form viewers draw: send -> receive flow arrows, memory counters instead of zero-length
// alloc/free slices (sim/trace_writer.hpp).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch_compat.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "hcpsim/sim/trace_writer.hpp"
#include "sim_test_util.hpp"
#include "trace_checks.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;

using hcpsim::sim::test::small_attention_shape;

TEST_CASE("sim: trace flow arrows pair up inside the send and receive slices of every comm type", "[sim]") {
  const int64_t S = 64;
  struct Case {
    CpCommType type;
    int64_t a2a, p2p;
    std::vector<int64_t> nodes;  ///< node of each CP rank
  };
  // a2a over A = 2 (heads_kv = 2), across the two nodes.
  for (const Case& c : {Case{CpCommType::p2p, 1, 4, {0, 0, 1, 1}}, Case{CpCommType::a2a, 2, 1, {0, 1}},
                        Case{CpCommType::all_gather, 1, 4, {0, 0, 1, 1}}, Case{CpCommType::a2a_p2p, 2, 2, {0, 0, 1, 1}}}) {
    INFO(to_string(c.type));
    const Schedule s = build_schedule(c.type, CpLayout(c.a2a, c.p2p, S), small_attention_shape(S));
    const SimResult r = simulate(s, hcpsim::sim::test::round_cluster(2, 2), c.nodes);
    REQUIRE(!r.flows.empty());
    // Every message knows its two ops: the simulator matched them.
    for (const FlowRecord& f : r.flows) {
      REQUIRE(f.src_op >= 0);
      REQUIRE(f.dst_op >= 0);
      REQUIRE(is_communication(s.ranks[static_cast<size_t>(f.src_cp_rank)].ops[static_cast<size_t>(f.src_op)].kind()));
      REQUIRE(is_communication(s.ranks[static_cast<size_t>(f.dst_cp_rank)].ops[static_cast<size_t>(f.dst_op)].kind()));
    }
    const auto trace = nlohmann::json::parse(chrome_trace_json(r));
    const hcpsim::test::TraceFormCounts n = hcpsim::test::check_trace_viewer_form(trace, r);
    REQUIRE(n.arrows == r.flows.size());
    // One counter sample per alloc and free plus the inputs at 0, per GPU.
    size_t changes = 0;
    for (const TimelineEntry& e : r.timeline) {
      const bool memory_op = e.kind == OpKind::alloc || e.kind == OpKind::free;
      REQUIRE((e.live_bytes >= 0) == memory_op);
      changes += memory_op ? 1 : 0;
    }
    REQUIRE(changes > 0);
    REQUIRE(n.counters == changes + r.ranks.size());
    REQUIRE(n.slices + changes == r.timeline.size() + [&r] {
      size_t hops = 0;
      for (const FlowRecord& f : r.flows) hops += f.route.size();
      return hops;
    }());
  }
}

TEST_CASE("sim: a send/recv arrow goes from the sender's op to the receiver's op of the same message", "[sim]") {
  const int64_t S = 64;
  const Schedule s = build_schedule(CpCommType::p2p, CpLayout(1, 2, S), small_attention_shape(S));
  const SimResult r = simulate(s, hcpsim::sim::test::round_cluster(1, 2), {0, 0});
  const TraceTimeline t = trace_timeline(r);
  REQUIRE(t.flows.size() == 2 * r.flows.size());
  for (size_t k = 0; k < r.flows.size(); ++k) {
    const FlowRecord& f = r.flows[k];
    const TraceFlowEnd& tail = t.flows[2 * k];
    const TraceFlowEnd& head = t.flows[2 * k + 1];
    REQUIRE(tail.start);
    REQUIRE_FALSE(head.start);
    REQUIRE(tail.id == static_cast<int64_t>(k));
    REQUIRE(head.id == tail.id);
    // p2p ring of 2: each message goes to the other rank, from a send_recv op to a send_recv op.
    REQUIRE(f.dst_cp_rank == 1 - f.src_cp_rank);
    const auto& sop = s.ranks[static_cast<size_t>(f.src_cp_rank)].ops[static_cast<size_t>(f.src_op)];
    const auto& dop = s.ranks[static_cast<size_t>(f.dst_cp_rank)].ops[static_cast<size_t>(f.dst_op)];
    const auto& ssr = std::get<SendRecvOp>(sop.payload);
    const auto& dsr = std::get<SendRecvOp>(dop.payload);
    REQUIRE(ssr.send_peer == f.dst_cp_rank);
    REQUIRE(dsr.recv_peer == f.src_cp_rank);
    REQUIRE(ssr.send_tag == dsr.recv_tag);
    REQUIRE(tail.tid == stream_tid(r.ranks[static_cast<size_t>(f.src_cp_rank)].gpu, sop.stream));
    REQUIRE(head.tid == stream_tid(r.ranks[static_cast<size_t>(f.dst_cp_rank)].gpu, dop.stream));
  }
}

TEST_CASE("sim: without a timeline the trace has neither arrows nor counters", "[sim]") {
  const int64_t S = 64;
  const Schedule s = build_schedule(CpCommType::p2p, CpLayout(1, 2, S), small_attention_shape(S));
  SimOptions o;
  o.record_timeline = false;
  const SimResult r = simulate(s, hcpsim::sim::test::round_cluster(1, 2), {0, 0}, o);
  const TraceTimeline t = trace_timeline(r);
  REQUIRE(t.flows.empty());
  REQUIRE(t.counters.empty());
  REQUIRE(!t.slices.empty());  // the link slices of the flows remain
}
