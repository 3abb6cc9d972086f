// The closed-form op count of admission control (sim/simulation_cost.hpp) against the schedules the builders
// really produce, on several comm types and shapes.
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/simulation_cost.hpp"

using namespace hcpsim;

TEST_CASE("simulation cost: estimated ops match the built schedules within 5%", "[sim][admission]") {
  const std::vector<std::tuple<CpCommType, int64_t, int64_t>> layouts{
      {CpCommType::p2p, 1, 1},     {CpCommType::p2p, 1, 2},     {CpCommType::p2p, 1, 8},
      {CpCommType::p2p, 1, 32},    {CpCommType::a2a, 4, 1},     {CpCommType::a2a, 8, 1},
      {CpCommType::a2a_p2p, 2, 4}, {CpCommType::a2a_p2p, 4, 8}, {CpCommType::a2a_p2p, 8, 16},
      {CpCommType::all_gather, 1, 8}};
  for (const auto& [type, a2a, p2p] : layouts) {
    for (bool causal : {true, false}) {
      AttentionShape shape;
      shape.seq_length = 2 * a2a * p2p * 64;
      shape.heads_q = shape.heads_kv = 8 * a2a;
      shape.head_dim_qk = shape.head_dim_v = 64;
      shape.causal = causal;
      const Schedule s = build_schedule(type, CpLayout(a2a, p2p, shape.seq_length), shape);
      int64_t ops = 0;
      for (const RankProgram& r : s.ranks) ops += static_cast<int64_t>(r.ops.size());
      const double estimate = sim::estimate_simulation_cost(type, a2a, p2p, shape.seq_length).ops;
      INFO(to_string(type) << " A=" << a2a << " P=" << p2p << " causal=" << causal << ": " << ops << " ops, estimate "
                           << estimate);
      CHECK(estimate >= static_cast<double>(ops));         // an upper bound ...
      CHECK(estimate <= 1.05 * static_cast<double>(ops));  // ... within 5% (the busiest rank times A·P)
    }
  }
}

TEST_CASE("simulation cost: an absurd context parallel size estimates without overflow", "[sim][admission]") {
  const auto c = sim::estimate_simulation_cost(CpCommType::p2p, 1, int64_t{1} << 40, int64_t{1} << 50);
  CHECK(c.ops > 1e25);
  CHECK(c.bytes > 1e28);
  CHECK(std::isfinite(c.bytes));
}
