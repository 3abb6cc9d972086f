// Closed-form tests of the flow-level network model and of the simulator on top of it.

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "catch_compat.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/sim/cost_model.hpp"
#include "hcpsim/sim/flow_network.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "hcpsim/sim/trace_writer.hpp"
#include "sim_test_util.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;
using hcpsim::sim::test::empty_schedule;
using hcpsim::sim::test::ProgramWriter;
using hcpsim::sim::test::round_cluster;

namespace {

// Priorities as the simulator uses them: drains first, the batched recomputation last.
constexpr int kDrain = 0;
constexpr int kRecompute = 2;

const TimelineEntry& entry(const SimResult& r, int64_t rank, const std::string& label) {
  for (const auto& e : r.timeline)
    if (e.cp_rank == rank && e.label == label) return e;
  FAIL("no timeline entry '" << label << "' on rank " << rank);
  return r.timeline.front();
}

// A ring of P ranks, P − 1 steps: in step i every rank computes one 20 µs kernel (a copy of 17e6 B at 1e12 B/s
// plus the 3 µs launch) on the compute stream while it sends its current 1e6 B block to rank + 1 and receives
// the next from rank − 1 on the comm stream; step i's kernel waits for step i − 1's message. Then one last
// kernel (P kernels in all), as in TE's ring.
Schedule ring(int64_t P) {
  Schedule s = empty_schedule(1, P);
  for (int64_t r = 0; r < P; ++r) {
    ProgramWriter w(s.ranks[static_cast<size_t>(r)]);
    std::vector<BufferId> kv;
    for (int64_t i = 0; i < P; ++i) kv.push_back(w.input("kv" + std::to_string(i), 500, 1, 1000));  // 1e6 B
    const BufferId src = w.input("src", 500, 1, 1000);
    const BufferId dst = w.input("dst", 500, 1, 1000);
    OpIndex prev_msg = -1;
    for (int64_t i = 0; i < P; ++i) {
      std::vector<OpIndex> deps;
      if (prev_msg >= 0) deps.push_back(prev_msg);
      w.copy(dst, src, 17'000'000, Stream::compute, deps, "step " + std::to_string(i));
      if (i + 1 < P) {
        prev_msg = w.add(SendRecvOp{(r + 1) % P, (r + P - 1) % P, {kv[static_cast<size_t>(i)]},
                                    {kv[static_cast<size_t>(i + 1)]}, i, i},
                         Stream::comm, deps, "msg " + std::to_string(i));
      }
    }
  }
  return s;
}

}  // namespace

TEST_CASE("net: one flow on one link drains at bytes / bandwidth", "[sim][net]") {
  EventQueue q;
  FlowNetwork net(q, {1e11}, kDrain, kRecompute);
  TimePs drained = -1;
  net.start_flow({0}, 1'000'000, [&] { drained = q.now(); });
  q.run();
  // 1e6 B / 1e11 B/s = 10 µs.
  REQUIRE(drained == 10'000'000);
  REQUIRE(net.usage()[0].bytes == 1'000'000);
  REQUIRE(net.usage()[0].busy_ps == 10'000'000);
  REQUIRE(net.usage()[0].flows == 1);
}

TEST_CASE("net: two flows sharing a link get half the bandwidth each; the survivor speeds up", "[sim][net]") {
  EventQueue q;
  FlowNetwork net(q, {1e11}, kDrain, kRecompute);
  TimePs a = -1;
  TimePs b = -1;
  net.start_flow({0}, 1'000'000, [&] { a = q.now(); });
  net.start_flow({0}, 2'000'000, [&] { b = q.now(); });
  q.run();
  // Both at 5e10 B/s: A's 1e6 B drain at 20 µs; B has 1e6 B left, alone at 1e11 B/s: + 10 µs = 30 µs.
  REQUIRE(a == 20'000'000);
  REQUIRE(b == 30'000'000);
  REQUIRE(net.usage()[0].busy_ps == 30'000'000);
  // The two starts at t = 0 are one batch, then A's end (B speeds up); B's end leaves its link empty, so no rate
  // can change and it asks for no recomputation.
  REQUIRE(net.recompute_count() == 2);
}

TEST_CASE("net: classic max-min example, three flows on two links", "[sim][net]") {
  // Link 0: 1e11 B/s, flows A and B. Link 1: 3e11 B/s, flows A and C.
  // Progressive filling: link 0's share 5e10 < link 1's 1.5e11 → A = B = 5e10; C gets 3e11 − 5e10 = 2.5e11.
  EventQueue q;
  FlowNetwork net(q, {1e11, 3e11}, kDrain, kRecompute);
  TimePs ta = -1;
  TimePs tb = -1;
  TimePs tc = -1;
  const int64_t a = net.start_flow({0, 1}, 1'000'000, [&] { ta = q.now(); });
  const int64_t b = net.start_flow({0}, 1'000'000, [&] { tb = q.now(); });
  const int64_t c = net.start_flow({1}, 10'000'000, [&] { tc = q.now(); });
  REQUIRE(q.step());  // the batched recomputation at t = 0
  REQUIRE(net.rate(a) == 5e10);
  REQUIRE(net.rate(b) == 5e10);
  REQUIRE(net.rate(c) == 2.5e11);
  q.run();
  // A and B: 1e6 / 5e10 = 20 µs. C: 2.5e11 · 20 µs = 5e6 B by then, 5e6 left alone at 3e11 →
  // 16.6667 µs more: 36.666667 µs = 36,666,667 ps (rounded once).
  REQUIRE(ta == 20'000'000);
  REQUIRE(tb == 20'000'000);
  REQUIRE(tc == 36'666'667);
}

// Progressive filling as one plain scan over every link of a batch (the model's definition, and the network's
// arithmetic before it split batches into components and kept links in a heap): repeatedly the link with the
// smallest max(0, cap) / unfrozen, ties → lowest link id; its unfrozen flows (ascending id) take that share off
// every link of their route. @return the rate of every flow.
static std::vector<double> scan_filling(const std::vector<double>& capacity, const std::vector<std::vector<int64_t>>& routes) {
  std::vector<double> cap = capacity;
  std::vector<int64_t> unfrozen(capacity.size(), 0);
  for (const auto& r : routes)
    for (int64_t l : r) ++unfrozen[static_cast<size_t>(l)];
  std::vector<double> rate(routes.size(), -1);
  size_t left = routes.size();
  while (left > 0) {
    size_t best = cap.size();
    double best_share = 0;
    for (size_t l = 0; l < cap.size(); ++l) {
      if (unfrozen[l] == 0) continue;
      const double share = std::max(0.0, cap[l]) / static_cast<double>(unfrozen[l]);
      if (best == cap.size() || share < best_share) {
        best = l;
        best_share = share;
      }
    }
    for (size_t f = 0; f < routes.size(); ++f) {
      const auto& r = routes[f];
      if (rate[f] >= 0 || std::find(r.begin(), r.end(), static_cast<int64_t>(best)) == r.end()) continue;
      rate[f] = best_share;
      --left;
      for (int64_t l : r) {
        cap[static_cast<size_t>(l)] -= best_share;
        --unfrozen[static_cast<size_t>(l)];
      }
    }
  }
  return rate;
}

TEST_CASE("net: a batch of independent components gets the rates of one filling over all its links", "[sim][net]") {
  // 24 links in 3 capacity classes that make many exact ties (1e11, 2e11, 3e11 B/s); per seed 40 flows over
  // 1–4 distinct random links, all started in one picosecond (one batch, several components). Every rate must
  // equal the plain scan's bit for bit: same bottleneck order (lowest link id among equal shares) and the same
  // subtractions in the same order.
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    // Random values from the seed: the splitmix-based mix of (seed, draw index).
    auto next = [seed, k = uint64_t{0}](uint64_t n) mutable { return hcpsim::ecmp_hash(seed, k++, 0) % n; };
    std::vector<double> capacity;
    for (int l = 0; l < 24; ++l) capacity.push_back(1e11 * static_cast<double>(1 + next(3)));
    std::vector<std::vector<int64_t>> routes;
    for (int f = 0; f < 40; ++f) {
      std::vector<int64_t> r;
      const uint64_t n = 1 + next(4);
      while (r.size() < n) {
        const auto l = static_cast<int64_t>(next(24));
        if (std::find(r.begin(), r.end(), l) == r.end()) r.push_back(l);
      }
      routes.push_back(r);
    }
    EventQueue q;
    FlowNetwork net(q, capacity, kDrain, kRecompute);
    std::vector<int64_t> ids;
    for (const auto& r : routes) ids.push_back(net.start_flow(r, 1'000'000, [] {}));
    REQUIRE(q.step());  // the batched recomputation at t = 0
    REQUIRE(net.recompute_count() == 1);
    const std::vector<double> expected = scan_filling(capacity, routes);
    for (size_t f = 0; f < routes.size(); ++f) {
      INFO("seed " << seed << " flow " << f);
      REQUIRE(expected[f] > 0);
      REQUIRE(net.rate(ids[f]) == expected[f]);
    }
    q.run();
  }
}

TEST_CASE("net: equal fair shares: the lowest link id is the bottleneck", "[sim][net]") {
  // Link 0 (3e11 B/s: flows A, B, X) and link 1 (2e11 B/s: flows X, C) both offer 1e11. Link 0, the lower id,
  // is taken first: A, B, X get 1e11; link 1 keeps 2e11 − 1e11 = 1e11 for C.
  EventQueue q;
  FlowNetwork net(q, {3e11, 2e11}, kDrain, kRecompute);
  const int64_t a = net.start_flow({0}, 1'000'000, [] {});
  const int64_t b = net.start_flow({0}, 4'000'000, [] {});
  const int64_t x = net.start_flow({0, 1}, 4'000'000, [] {});
  const int64_t c = net.start_flow({1}, 4'000'000, [] {});
  REQUIRE(q.step());
  REQUIRE(net.rate(a) == 1e11);
  REQUIRE(net.rate(b) == 1e11);
  REQUIRE(net.rate(x) == 1e11);
  REQUIRE(net.rate(c) == 1e11);
  // A drains at 10 µs; then link 0 offers 3e11 / 2 = 1.5e11 and link 1 still 1e11: link 1 is the bottleneck,
  // X and C get 1e11, B gets 3e11 − 1e11 = 2e11.
  while (net.rate(a) != 0) REQUIRE(q.step());
  REQUIRE(q.step());  // the recomputation after A's drain
  REQUIRE(q.now() == 10'000'000);
  REQUIRE(net.rate(x) == 1e11);
  REQUIRE(net.rate(c) == 1e11);
  REQUIRE(net.rate(b) == 2e11);
  q.run();
}

TEST_CASE("net: a flow alone on its route runs at the route's smallest capacity; a link listed twice halves it",
          "[sim][net]") {
  // Links 0..3: 4e11, 1.5e11, 3e11, 2e11 B/s. A flow over 0 → 1 → 2 alone on them takes 1.5e11 (link 1); after it
  // drains, a flow over 3 → 0 takes 2e11 (link 3). A route that lists link 2 twice puts two shares of the one
  // flow on it (the filling counts each entry): 3e11 / 2 = 1.5e11, below link 3's 2e11.
  EventQueue q;
  FlowNetwork net(q, {4e11, 1.5e11, 3e11, 2e11}, kDrain, kRecompute);
  TimePs first = -1;
  const int64_t a = net.start_flow({0, 1, 2}, 3'000'000, [&] { first = q.now(); });
  REQUIRE(q.step());
  REQUIRE(net.rate(a) == 1.5e11);
  q.run();
  REQUIRE(first == 20'000'000);  // 3e6 B / 1.5e11 B/s = 20 µs
  const int64_t b = net.start_flow({3, 0}, 1'000'000, [] {});
  REQUIRE(q.step());
  REQUIRE(net.rate(b) == 2e11);
  q.run();
  const int64_t c = net.start_flow({3, 2, 2}, 1'000'000, [] {});
  REQUIRE(q.step());
  REQUIRE(net.rate(c) == 1.5e11);
  q.run();
  REQUIRE(net.usage()[2].flows == 3);  // a once, c twice (one count per route entry)
}

TEST_CASE("net: flow slots are reused; ids, rates and drains stay per flow", "[sim][net]") {
  // 1000 flows one after another on one 1e11 B/s link, each started when the previous one drains (a slot is
  // reused every time): flow k (1e6 B) drains at (k + 1) · 10 µs, and ids count 0, 1, 2, …
  EventQueue q;
  FlowNetwork net(q, {1e11}, kDrain, kRecompute);
  std::vector<TimePs> drained;
  std::vector<int64_t> ids;
  std::function<void()> start = [&] {
    ids.push_back(net.start_flow({0}, 1'000'000, [&] {
      drained.push_back(q.now());
      if (drained.size() < 1000) start();
    }));
  };
  start();
  q.run();
  REQUIRE(drained.size() == 1000);
  for (size_t k = 0; k < drained.size(); ++k) {
    REQUIRE(ids[k] == static_cast<int64_t>(k));
    REQUIRE(drained[k] == static_cast<TimePs>(k + 1) * 10'000'000);
  }
  REQUIRE(net.usage()[0].flows == 1000);
  REQUIRE(net.usage()[0].busy_ps == 10'000'000'000);
}

TEST_CASE("net: a message costs software latency + route latency + bytes at the flow's rate", "[sim][net]") {
  // Two GPUs on two nodes of the round cluster: route gpu → nic (PCIe 63e9) → leaf (2.5e10, 2 µs) → nic (2 µs)
  // → gpu; the NIC link is the bottleneck. 5 µs + 4 µs + 1e6 / 2.5e10 (40 µs) = 49 µs.
  Schedule s = empty_schedule(1, 2);
  {
    ProgramWriter w(s.ranks[0]);
    w.add(SendRecvOp{1, -1, {w.input("x", 500, 1, 1000)}, {}, 1, 0}, Stream::comm, {}, "send");
  }
  {
    ProgramWriter w(s.ranks[1]);
    w.add(SendRecvOp{-1, 0, {}, {w.input("y", 500, 1, 1000)}, 0, 1}, Stream::comm, {}, "recv");
  }
  const SimResult r = simulate(s, round_cluster(2, 1), {0, 1});
  REQUIRE(entry(r, 1, "recv").end_ps == 49'000'000);
  REQUIRE(r.flows.size() == 1);
  REQUIRE(r.flows[0].start_ps == 5'000'000);
  REQUIRE(r.flows[0].drained_ps == 45'000'000);
  REQUIRE(r.flows[0].route.size() == 4);
}

TEST_CASE("net: messages over a pair's single route share one route record", "[sim][net]") {
  // Two messages between the same two GPUs, whose route has no equal-cost choice: computed once and held once by
  // both flow records (SharedRoute); an empty route is held as none.
  Schedule s = empty_schedule(1, 2);
  {
    ProgramWriter w(s.ranks[0]);
    w.add(SendRecvOp{1, -1, {w.input("x", 500, 1, 1000)}, {}, 1, 0}, Stream::comm, {}, "send x");
    w.add(SendRecvOp{1, -1, {w.input("z", 500, 1, 1000)}, {}, 2, 0}, Stream::comm, {}, "send z");
  }
  {
    ProgramWriter w(s.ranks[1]);
    w.add(SendRecvOp{-1, 0, {}, {w.input("y", 500, 1, 1000)}, 0, 1}, Stream::comm, {}, "recv x");
    w.add(SendRecvOp{-1, 0, {}, {w.input("u", 500, 1, 1000)}, 0, 2}, Stream::comm, {}, "recv z");
  }
  const ClusterSpec cluster = round_cluster(1, 2);
  const SimResult r = simulate(s, cluster, {0, 1});
  REQUIRE(r.flows.size() == 2);
  REQUIRE(r.flows[0].route.size() == 4);  // GPU → NIC → leaf → NIC → GPU links of the round cluster
  REQUIRE(r.flows[1].route == r.flows[0].route);
  REQUIRE(&r.flows[0].route.links() == &r.flows[1].route.links());
  REQUIRE(SharedRoute(std::vector<int64_t>{}).empty());
  REQUIRE(SharedRoute{}.links().empty());
}

TEST_CASE("net: messages over equal-cost routes take Topology::route's path for their ordinal", "[sim][net]") {
  // GPU 0 of node 0 and GPU 9 (node 1, rail 1) of two DGX H100 nodes: different rails, so every route has
  // equal-cost choices (a spine, or NVLink to the node's rail-1 GPU first), taken by ECMP from (src, dst, ordinal). 24 messages one after the other: message i must
  // take t.route(0, 9, i), and messages taking the same spine share one route record.
  constexpr int64_t kMessages = 24;
  Schedule s = empty_schedule(1, 2);
  {
    ProgramWriter w(s.ranks[0]);
    for (int64_t i = 0; i < kMessages; ++i)
      w.add(SendRecvOp{1, -1, {w.input(fmt::format("x{}", i), 8, 1, 64)}, {}, i, 0}, Stream::comm, {},
            fmt::format("send {}", i));
  }
  {
    ProgramWriter w(s.ranks[1]);
    for (int64_t i = 0; i < kMessages; ++i)
      w.add(SendRecvOp{-1, 0, {}, {w.input(fmt::format("y{}", i), 8, 1, 64)}, 0, i}, Stream::comm, {},
            fmt::format("recv {}", i));
  }
  const auto cluster = cluster_preset("dgx-h100", 2);
  REQUIRE(cluster.has_value());
  const Topology t = Topology::from_cluster(*cluster);
  const SimResult r = simulate(s, *cluster, t, {0, 9});
  REQUIRE(r.flows.size() == static_cast<size_t>(kMessages));
  std::vector<const std::vector<int64_t>*> records;
  std::vector<std::vector<int64_t>> routes;
  for (int64_t i = 0; i < kMessages; ++i) {
    const FlowRecord& f = r.flows[static_cast<size_t>(i)];
    const std::vector<int64_t> expected = t.route(0, 9, static_cast<uint64_t>(i));
    REQUIRE(f.route.links() == expected);
    REQUIRE(f.route.size() == 6);
    records.push_back(&f.route.links());
    routes.push_back(expected);
  }
  std::sort(records.begin(), records.end());
  std::sort(routes.begin(), routes.end());
  const auto distinct_records = std::unique(records.begin(), records.end()) - records.begin();
  const auto distinct_routes = std::unique(routes.begin(), routes.end()) - routes.begin();
  REQUIRE(distinct_routes > 1);
  REQUIRE(distinct_records == distinct_routes);
  // next_hops lists the equal-cost choices in link id order. Out of GPU 0 there are two 6-hop ways: its own NIC
  // (then a spine) and NVLink to GPU 1 of its node, whose NIC is on GPU 9's rail (the PXN way, no spine).
  const std::vector<int64_t> first = t.next_hops(t.gpu_vertex(0), 9);
  REQUIRE(first.size() == 2);
  REQUIRE(first[0] < first[1]);
  REQUIRE(t.next_hops(t.gpu_vertex(9), 9).empty());
}

TEST_CASE("net: two ranks of a node sharing one NIC get half the rate each", "[sim][net]") {
  // Ranks 0, 1 on node 0 send 1e6 B each to ranks 2, 3 on node 1 at t = 0.
  Schedule s = empty_schedule(1, 4);
  for (int64_t r = 0; r < 2; ++r) {
    ProgramWriter w(s.ranks[static_cast<size_t>(r)]);
    w.add(SendRecvOp{r + 2, -1, {w.input("x", 500, 1, 1000)}, {}, 1, 0}, Stream::comm, {}, "send");
    ProgramWriter v(s.ranks[static_cast<size_t>(r + 2)]);
    v.add(SendRecvOp{-1, r, {}, {v.input("y", 500, 1, 1000)}, 0, 1}, Stream::comm, {}, "recv");
  }
  ClusterSpec shared = round_cluster(2, 2);
  shared.nics_per_node = 1;
  ClusterSpec own = round_cluster(2, 2);
  own.nics_per_node = 2;
  const SimResult a = simulate(s, shared, {0, 0, 1, 1});
  const SimResult b = simulate(s, own, {0, 0, 1, 1});
  // Shared NIC: both flows cross nic → leaf at 2.5e10 B/s → 1.25e10 each: 5 + 4 + 1e6 / 1.25e10 (80) = 89 µs.
  REQUIRE(entry(a, 2, "recv").end_ps == 89'000'000);
  REQUIRE(entry(a, 3, "recv").end_ps == 89'000'000);
  // One NIC per GPU: 5 + 4 + 40 = 49 µs.
  REQUIRE(entry(b, 2, "recv").end_ps == 49'000'000);
  REQUIRE(entry(b, 3, "recv").end_ps == 49'000'000);
}

TEST_CASE("net: an all-to-all of A = 8 GPUs on one NVSwitch moves (A−1)/A of the payload at the port rate", "[sim][net]") {
  Schedule s = empty_schedule(8, 1);
  std::vector<int64_t> group{0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<int64_t> order{0, 2, 4, 6, 8, 10, 12, 14, 15, 13, 11, 9, 7, 5, 3, 1};
  for (int64_t g = 0; g < 8; ++g) {
    ProgramWriter w(s.ranks[static_cast<size_t>(g)]);
    const BufferId in = w.input("x", 8, 8, 62'500);  // 8·8·62500·2 = 8e6 B
    const BufferId out = w.declare("x.a2a", 64, 1, 62'500);
    const OpIndex a = w.alloc(out, Stream::comm);
    w.add(AllToAllOp{AllToAllOp::Direction::scatter_heads, group, order, in, out, 3}, Stream::comm, {a}, "a2a");
  }
  const SimResult r = simulate(s, round_cluster(1, 8), std::vector<int64_t>(8, 0));
  // Each GPU sends 7 · 1e6 B through its 1e11 B/s NVSwitch port, 7 flows sharing it equally:
  // 5 µs + 1 µs + (7/8 · 8e6 B) / 1e11 B/s (70 µs) = 76 µs.
  for (int64_t g = 0; g < 8; ++g) REQUIRE(entry(r, g, "a2a").end_ps == 76'000'000);
  REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).count == 56);
  REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).bytes == 56'000'000);
  // NVLink utilisation: 16 port directions, each carried 7e6 B over 76 µs at 1e11 B/s → 7e6 / 7.6e6.
  const auto u = r.link_class_utilisation(LinkClass::nvlink);
  REQUIRE(u.links == 16);
  REQUIRE(u.bytes == 16 * 7'000'000);
  REQUIRE(u.max_utilisation == Approx(7.0 / 7.6).epsilon(1e-12));
}

TEST_CASE("net: all-gather and reduce-scatter run as NCCL's ring", "[sim][net]") {
  auto make = [](bool gather) {
    Schedule s = empty_schedule(1, 4);
    s.cp_comm_type = CpCommType::all_gather;
    const std::vector<int64_t> group{0, 1, 2, 3};
    const std::vector<int64_t> order{0, 2, 4, 6, 7, 5, 3, 1};
    for (int64_t g = 0; g < 4; ++g) {
      ProgramWriter w(s.ranks[static_cast<size_t>(g)]);
      if (gather) {
        const BufferId in = w.input("x", 500, 1, 1000);  // 1e6 B
        const BufferId out = w.declare("x.ag", 2000, 1, 1000);
        const OpIndex a = w.alloc(out, Stream::comm);
        w.add(AllGatherOp{group, order, in, out, 5}, Stream::comm, {a}, "coll");
      } else {
        const BufferId in = w.input("x", 2000, 1, 1000);  // 4e6 B
        const BufferId out = w.declare("x.rs", 500, 1, 1000);
        const OpIndex a = w.alloc(out, Stream::comm);
        w.add(ReduceScatterOp{group, order, in, out, 5}, Stream::comm, {a}, "coll");
      }
    }
    return s;
  };
  // One ring inside the node: each member forwards the 3 other parts (3e6 B) to its successor in one flow.
  // Latency: NCCL ring Simple, 8.4 µs + 3 steps · 3.4 µs = 18.6 µs (LL128: 19.7 µs + 3e6 / 0.92e11 is slower),
  // of which the 1 µs NVLink route latency is paid after the flow: 17.6 + 3e6 / 1e11 (30) + 1 = 48.6 µs.
  SECTION("all-gather: each member forwards the other 3 parts of 1e6 B to the next") {
    const SimResult r = simulate(make(true), round_cluster(1, 8), {0, 0, 0, 0});
    for (int64_t g = 0; g < 4; ++g) REQUIRE(entry(r, g, "coll").end_ps == 48'600'000);
    REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).count == 4);
    REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).bytes == 12'000'000);
  }
  SECTION("reduce-scatter: each member sends (n−1)/n of its 4e6 B input") {
    const SimResult r = simulate(make(false), round_cluster(1, 8), {0, 0, 0, 0});
    // 3 · 1e6 B per member: 48.6 µs again.
    for (int64_t g = 0; g < 4; ++g) REQUIRE(entry(r, g, "coll").end_ps == 48'600'000);
    REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).bytes == 12'000'000);
  }
}

TEST_CASE("sim: a P-rank ring whose compute covers every transfer has exposure exactly 0", "[sim][net]") {
  const int64_t P = 4;
  // NVLink message 5 + 1 + 10 = 16 µs < 20 µs kernel: step i's kernel starts at 20·i µs; layer = 4 · 20 µs.
  const SimResult r = simulate(ring(P), round_cluster(1, 8), {0, 0, 0, 0});
  REQUIRE(r.total_ps == 80'000'000);
  for (const RankStats& st : r.ranks) {
    REQUIRE(st.compute_busy_ps == 80'000'000);
    REQUIRE(st.exposed_comm_ps == 0);
  }
}

TEST_CASE("sim: a ring whose transfers are longer exposes transfer − compute per step", "[sim][net]") {
  const int64_t P = 4;
  // One GPU per node, one leaf: each message 5 + 4 + 40 = 49 µs on its own NIC links (no sharing). Kernel i
  // starts at 49·i µs; the last ends at 3·49 + 20 = 167 µs. Exposed = 167 − 4·20 = 87 = 3·(49 − 20) µs.
  const SimResult r = simulate(ring(P), round_cluster(4, 1), {0, 1, 2, 3});
  REQUIRE(r.total_ps == 167'000'000);
  for (const RankStats& st : r.ranks) {
    REQUIRE(st.compute_busy_ps == 80'000'000);
    REQUIRE(st.exposed_comm_ps == (P - 1) * (49'000'000 - 20'000'000));
  }
}

TEST_CASE("sim: compute slows down while a communication op runs on the same GPU", "[sim][net]") {
  // Rank 0: a 20 µs copy kernel (17e6 B) and, concurrently, a 16 µs NVLink message. Slowdown 2: during
  // [0, 16) µs the kernel does 8 µs of work; the remaining 12 µs run at full speed → ends at 28 µs.
  Schedule s = empty_schedule(1, 2);
  {
    ProgramWriter w(s.ranks[0]);
    const BufferId src = w.input("src", 500, 1, 1000);
    const BufferId dst = w.input("dst", 500, 1, 1000);
    w.copy(dst, src, 17'000'000, Stream::compute, {}, "kernel");
    w.add(SendRecvOp{1, -1, {w.input("x", 500, 1, 1000)}, {}, 1, 0}, Stream::comm, {}, "send");
  }
  {
    ProgramWriter w(s.ranks[1]);
    w.add(SendRecvOp{-1, 0, {}, {w.input("y", 500, 1, 1000)}, 0, 1}, Stream::comm, {}, "recv");
  }
  ClusterSpec c = round_cluster(1, 8);
  c.gpu.compute_slowdown_during_comm = 2.0;
  const SimResult slow = simulate(s, c, {0, 0});
  REQUIRE(entry(slow, 0, "send").end_ps == 16'000'000);
  REQUIRE(entry(slow, 0, "kernel").end_ps == 28'000'000);
  const SimResult plain = simulate(s, round_cluster(1, 8), {0, 0});
  REQUIRE(entry(plain, 0, "kernel").end_ps == 20'000'000);
  // Every preset carries the measured slowdown 1.189 (Lee et al. 2025, arXiv:2507.03114: 18.9% average compute
  // slowdown under overlapped collectives): during [0, 16) µs the kernel does 16 / 1.189 = 13.456 µs of work,
  // the remaining 6.544 µs at full speed → ends at 22.544 µs (the engine's rate is rounded once to
  // round(6000 / 1.189) = 5046 of 6000 share units per ps: 16 µs · 5046 / 6000 = 13.456 µs exactly).
  for (const auto& name : cluster_preset_names()) REQUIRE(cluster_preset(name, 1)->gpu.compute_slowdown_during_comm == 1.189);
  c.gpu.compute_slowdown_during_comm = cluster_preset("dgx-h100", 1)->gpu.compute_slowdown_during_comm;
  const SimResult measured = simulate(s, c, {0, 0});
  REQUIRE(entry(measured, 0, "kernel").end_ps == 22'544'000);
  // The time breakdown says what the communication took: over the 16 µs of overlap the kernel progressed
  // 13.456 µs instead of 16, so 2.544 µs were lost ("lost to comm", comm_slowdown_ps); with slowdown 2, 8 µs;
  // without a slowdown, nothing. The kernel's summed time (copy_ps) still holds the whole stretched duration.
  const TimeBreakdown& m = measured.ranks[0].time_breakdown[0];
  REQUIRE(m.comm_slowdown_ps == 2'544'000);
  REQUIRE(m.copy_ps == 22'544'000);
  REQUIRE(slow.ranks[0].time_breakdown[0].comm_slowdown_ps == 8'000'000);
  REQUIRE(plain.ranks[0].time_breakdown[0].comm_slowdown_ps == 0);
}

TEST_CASE("sim: attention efficiency is interpolated from the GPU's table", "[sim][net]") {
  std::vector<EfficiencyPoint> t;
  for (int64_t hd : {64, 128})
    for (int64_t r : {1024, 4096})
      for (int64_t c : {1024, 4096}) {
        // 0.2 at the small corner, +0.2 for 4096 rows, +0.1 for 4096 cols, +0.05 for head dim 128.
        const double e = 0.2 + (r == 4096 ? 0.2 : 0) + (c == 4096 ? 0.1 : 0) + (hd == 128 ? 0.05 : 0);
        t.push_back({hd, r, c, false, e});
      }
  // Exact grid points.
  REQUIRE(table_efficiency(t, 64, 1024, 1024, false) == 0.2);
  REQUIRE(table_efficiency(t, 128, 4096, 4096, false) == Approx(0.55).epsilon(1e-15));
  // 2048 is halfway between 1024 and 4096 in log2: 0.2 + 0.1 + 0.05 = 0.35 (head dim 64).
  REQUIRE(table_efficiency(t, 64, 2048, 2048, false) == Approx(0.35).epsilon(1e-15));
  // Head dim 96 is halfway between 64 and 128: + 0.025.
  REQUIRE(table_efficiency(t, 96, 2048, 2048, false) == Approx(0.375).epsilon(1e-15));
  // Clamped outside the grid; no causal points → the non-causal ones are used.
  REQUIRE(table_efficiency(t, 256, 100000, 16, true) == Approx(0.45).epsilon(1e-15));
  // The H100 preset carries the table of the kernel `auto` resolves to (cuDNN fused attention); long causal blocks
  // are more efficient than short ones: the published 315 and 539 TFLOP/s of 989.4 (PUBLISHED curves,
  // config/src/attention_tables.cpp).
  const auto h100 = cluster_preset("dgx-h100", 1);
  REQUIRE(h100.has_value());
  REQUIRE(!h100->gpu.attn_fwd_table.empty());
  const double shortb = table_efficiency(h100->gpu.attn_fwd_table, 128, 512, 512, true);
  const double longb = table_efficiency(h100->gpu.attn_fwd_table, 128, 16384, 16384, true);
  REQUIRE(shortb == Approx(315 / 989.4).epsilon(1e-12));
  REQUIRE(longb == Approx(539 / 989.4).epsilon(1e-12));
}

TEST_CASE("sim: two runs give byte-identical summary, trace and link CSV", "[sim][net]") {
  const Schedule s = ring(4);
  const SimResult a = simulate(s, round_cluster(2, 2), {0, 0, 1, 1});
  const SimResult b = simulate(s, round_cluster(2, 2), {0, 0, 1, 1});
  REQUIRE(!a.flows.empty());
  REQUIRE(summary_json(a) == summary_json(b));
  REQUIRE(chrome_trace_json(a) == chrome_trace_json(b));
  REQUIRE(links_csv(a) == links_csv(b));
  REQUIRE(links_csv(a).rfind("link,from,to,class,bandwidth_bytes_per_s,bytes,busy_ps,flows,utilisation\n", 0) == 0);
}

TEST_CASE("sim: all_gather schedule: simulated messages, bytes and FLOPs equal the schedule's", "[sim][net]") {
  const int64_t S = 64;
  const AttentionShape sh = hcpsim::sim::test::small_attention_shape(S);
  const Schedule s = build_schedule(CpCommType::all_gather, CpLayout(1, 4, S), sh);
  const SimResult r = simulate(s, round_cluster(2, 2), {0, 0, 1, 1});
  // Expected from the schedule's buffers, independently of the simulator: over n members an all-gather member
  // forwards n − 1 inputs, a reduce-scatter member n − 1 parts of input / n, to its ring successor, split over
  // the ring's channels (2 here: the group has 2 members on each of 2 nodes), one message per member and channel.
  std::array<int64_t, 2> count{0, 0};
  std::array<int64_t, 2> bytes{0, 0};
  int64_t collectives = 0;
  for (const RankProgram& prog : s.ranks) {
    for (const Op& op : prog.ops) {
      const auto p = static_cast<size_t>(op.phase);
      if (const auto* ag = std::get_if<AllGatherOp>(&op.payload)) {
        const auto n = static_cast<int64_t>(ag->group.size());
        count[p] += 2;  // this member's message on each channel
        bytes[p] += (n - 1) * prog.buffers[static_cast<size_t>(ag->input)].size_bytes();
        ++collectives;
      } else if (const auto* rs = std::get_if<ReduceScatterOp>(&op.payload)) {
        const auto n = static_cast<int64_t>(rs->group.size());
        count[p] += 2;
        bytes[p] += (n - 1) * (prog.buffers[static_cast<size_t>(rs->input)].size_bytes() / n);
        ++collectives;
      }
    }
  }
  REQUIRE(collectives > 0);
  for (Phase ph : {Phase::forward, Phase::backward}) {
    const auto p = static_cast<size_t>(ph);
    const auto& intra = r.message_totals(ph, LinkLevel::intra_node);
    const auto& inter = r.message_totals(ph, LinkLevel::inter_node);
    REQUIRE(intra.count + inter.count == count[p]);
    REQUIRE(intra.bytes + inter.bytes == bytes[p]);
    REQUIRE(bytes[p] > 0);
  }
  // Causal S = 64: 2080 pairs per head, 4 heads; forward 64 flop per pair, backward 160.
  REQUIRE(r.phase_flops(Phase::forward) == 2080.0 * 4 * 64);
  REQUIRE(r.phase_flops(Phase::backward) == 2080.0 * 4 * 160);
}

TEST_CASE("sim: without a recorded timeline every other result is unchanged", "[sim][net]") {
  const Schedule s = ring(4);
  SimOptions lean;
  lean.record_timeline = false;
  const SimResult full = simulate(s, round_cluster(2, 2), {0, 0, 1, 1});
  const SimResult short_ = simulate(s, round_cluster(2, 2), {0, 0, 1, 1}, lean);
  REQUIRE(!full.timeline.empty());
  REQUIRE(short_.timeline.empty());
  REQUIRE(summary_json(full) == summary_json(short_));
  REQUIRE(links_csv(full) == links_csv(short_));
}
