#pragma once
// Helpers for tests that compare two simulations result by result (a symmetry-reduced run against the full run):
// doubles bit for bit and the flows in an order that does not depend on how the run interleaved the ranks.

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/sim/simulator.hpp"

namespace hcpsim::sim::test {

// Doubles compared bit for bit ("byte-identical"), not by value.
inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// One flow's (source, destination, bytes, phase, start, drain, route).
using FlowKey = std::tuple<int64_t, int64_t, int64_t, int, TimePs, TimePs, std::vector<int64_t>>;

// Every flow of `r`, sorted (SimResult::flows is in start order, which a reduced run changes).
inline std::vector<FlowKey> sorted_flows(const SimResult& r) {
  std::vector<FlowKey> v;
  for (const FlowRecord& f : r.flows)
    v.emplace_back(f.src_cp_rank, f.dst_cp_rank, f.bytes, static_cast<int>(f.phase), f.start_ps, f.drained_ps,
                   f.route);
  std::sort(v.begin(), v.end());
  return v;
}

// Link usage of `a` and `b`, link by link: bytes, busy time and flows carried.
inline void require_same_links(const SimResult& a, const SimResult& b) {
  REQUIRE(a.links.size() == b.links.size());
  for (size_t l = 0; l < b.links.size(); ++l) {
    INFO("link " << l << " " << b.links[l].from << " -> " << b.links[l].to);
    REQUIRE(a.links[l].bytes == b.links[l].bytes);
    REQUIRE(a.links[l].busy_ps == b.links[l].busy_ps);
    REQUIRE(a.links[l].flows == b.links[l].flows);
  }
}

// Link usage of `a` and `b`, and every flow (routes included; in sorted order, since a reduced run starts them in
// another order).
inline void require_same_links_and_flows(const SimResult& a, const SimResult& b) {
  require_same_links(a, b);
  REQUIRE(sorted_flows(a) == sorted_flows(b));
}

}  // namespace hcpsim::sim::test
