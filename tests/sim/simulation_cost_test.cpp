// The closed-form op count of admission control (sim/simulation_cost.hpp) against the schedules the builders
// really produce, on several comm types and shapes.
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/config/scenario_loader.hpp"
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
  CHECK(c.bytes > 8e27);  // 320 bytes per op of ~2.8e25 ops
  CHECK(std::isfinite(c.bytes));
}

TEST_CASE("simulation cost: simulate counts the whole-step layer, on the representatives where it is reduced",
          "[sim][admission]") {
  // a2a+p2p [8, 512] on 512 DGX nodes (A = gpus_per_node, one a2a group per node: the reduction applies), full
  // recompute, 4096 tokens per GPU. Ops per rank 23·512 + 47 = 11823.
  const std::vector<std::string> o{"parallel.context_parallel_size=4096",
                                   "parallel.hierarchical_context_parallel_sizes=[8,512]", "cluster.nodes=512",
                                   "model.seq_length=16777216"};
  const Scenario s = load_scenario(HCPSIM_SOURCE_DIR "/scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml", o);
  const double per_rank = 23.0 * 512 + 47;
  const sim::SimulationCost c = sim::estimate_simulate_cost(s, 1, false, false);
  // Attention on the 512 representatives, then the layer on them: 512·(2·11823 + 130) ops.
  CHECK(c.ops == 512 * per_rank + 512 * (2 * per_rank + 130));
  CHECK(c.bytes == 320 * 512 * (2 * per_rank + 130) + 96 * 16777216.0 + 16.0 * 1024 * 1024);
  CHECK(c.bytes < 8e9);  // admitted by the default limit of a 24 GiB machine; the measured peak is 4.1 GB
  // --trace keeps the attention's timeline: it runs on every GPU, and its bytes add to the layer's.
  const sim::SimulationCost t = sim::estimate_simulate_cost(s, 1, true, false);
  CHECK(t.ops == 4096 * per_rank + 512 * (2 * per_rank + 130));
  CHECK(t.bytes == 4000 * 4096 * per_rank + 320 * 512 * (2 * per_rank + 130) + 96 * 16777216.0 + 16.0 * 1024 * 1024);
  // TP = 2 puts each a2a group of 8 CP ranks on 16 GPUs (2 nodes): neither run is reduced, the attention runs on
  // its A·P GPUs and the layer on TP·A·P; without model.vocab_size only the attention runs.
  std::vector<std::string> tp2 = o;
  tp2.push_back("parallel.tensor_model_parallel_size=2");
  tp2.push_back("cluster.nodes=1024");
  const sim::SimulationCost c2 = sim::estimate_simulate_cost(load_scenario(
      HCPSIM_SOURCE_DIR "/scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml", tp2), 1, false, false);
  CHECK(c2.ops == 4096 * per_rank + 2 * 4096 * (2 * per_rank + 130));
  std::vector<std::string> attention_only = o;
  attention_only.push_back("model.vocab_size=null");
  const sim::SimulationCost a = sim::estimate_simulate_cost(
      load_scenario(HCPSIM_SOURCE_DIR "/scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml", attention_only), 1, false, false);
  CHECK(a.ops == 512 * per_rank);
}

TEST_CASE("simulation cost: seconds are 1.5 us per op (30 us with a timeline)", "[sim][admission]") {
  // The measured 0.61-1.06 us per op (bench/RESULTS.md) with the host's variation on top.
  const auto plain = sim::estimate_simulation_cost(CpCommType::a2a_p2p, 8, 64, 262144, false);
  CHECK(plain.seconds == Approx(1.5e-6 * plain.ops).epsilon(1e-12));
  const auto traced = sim::estimate_simulation_cost(CpCommType::a2a_p2p, 8, 64, 262144, true);
  CHECK(traced.seconds == Approx(3e-5 * traced.ops).epsilon(1e-12));
}
