#include <string>

#include "catch_compat.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/sim/attention_simulation.hpp"
#include "hcpsim/sim/cost_model.hpp"
#include "hcpsim/sim/trace_writer.hpp"
#include "sim_test_util.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;

TEST_CASE("sim: wave quantization of attention blocks, normalised to the published benchmark shape", "[sim]") {
  // 2048 tiles on 132 SMs: 15.52 waves → 16; busy fraction 2048 / (16 · 132) = 2048 / 2112.
  REQUIRE(attention_wave_factor(2048, 132) == 2048.0 / 2112);
  REQUIRE(attention_wave_factor(264, 132) == 1.0);
  // The reference shape (16K tokens, 16 heads: 2048 tiles) reproduces the table exactly.
  REQUIRE(kAttentionReferenceTiles == 2048);
  REQUIRE(attention_wave_correction(2048, 132) == 1.0);
  // A 1024-row block of batch 1 and 8 heads: 8 · 8 = 64 tiles, one wave 64 / 132 busy:
  // (64 / 132) / (2048 / 2112) = (64 · 2112) / (132 · 2048) = 0.5.
  REQUIRE(attention_wave_correction(64, 132) == Approx(0.5).epsilon(1e-15));
  // 132 tiles fill one wave: 1 / (2048 / 2112) = 1.03125 (the cap at efficiency 1 is the caller's).
  REQUIRE(attention_wave_correction(132, 132) == Approx(2112.0 / 2048).epsilon(1e-15));
  // A100: 2048 tiles on 108 SMs = 19 waves, 2048 / 2052 busy; 0 SMs = no quantization.
  REQUIRE(attention_wave_factor(2048, 108) == 2048.0 / 2052);
  REQUIRE(attention_wave_correction(7, 0) == 1.0);
}

TEST_CASE("sim: the time breakdown's categories add up to each rank's compute kernel time", "[sim]") {
  const Scenario s = load_scenario(std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  const auto report = validate_scenario(s, ValidationScope::placement);
  const Topology topology = Topology::from_cluster(s.cluster);
  SimOptions options;
  options.record_timeline = false;
  const SimResult r = simulate_attention(s, CpCommType::a2a_p2p, report.data_parallel_size, topology, options).result;
  REQUIRE(!r.ranks.empty());
  TimePs busiest = 0;
  for (const RankStats& st : r.ranks) {
    const TimeBreakdown& f = st.time_breakdown[0];
    const TimeBreakdown& b = st.time_breakdown[1];
    REQUIRE(f.attention_kernel_ps > 0);
    REQUIRE(b.attention_kernel_ps > 0);
    REQUIRE(f.merge_correction_ps > 0);  // P = 2 ring: the forward merges partial outputs
    REQUIRE(f.compute_ps() + b.compute_ps() == st.compute_kernel_ps);
    REQUIRE(f.exposed_comm_ps >= 0);
    REQUIRE(b.exposed_comm_ps >= 0);
    busiest = std::max(busiest, st.compute_busy_ps);
  }
  // The busiest GPU is the one with the most busy time (kernels on two streams at once count once), the GPU whose
  // idle time is the exposed-comm split's, not the largest summed kernel time.
  REQUIRE(r.ranks[static_cast<size_t>(r.busiest_cp_rank)].compute_busy_ps == busiest);
  REQUIRE(r.busiest_cp_rank == r.most_busy_rank()->cp_rank);
  // The P = 2 ring's KV transfers overlap the attention kernels: they lose GPU time to the communication, a part
  // of their summed time; with no slowdown during communication they lose none (the two compute streams sharing
  // the GPU lose nothing in total).
  for (const RankStats& st : r.ranks)
    for (const TimeBreakdown& t : st.time_breakdown) REQUIRE(t.comm_slowdown_ps <= t.compute_ps());
  REQUIRE(r.ranks[0].time_breakdown[0].comm_slowdown_ps > 0);
  Scenario plain = s;
  plain.cluster.gpu.compute_slowdown_during_comm = 1.0;
  const SimResult p = simulate_attention(plain, CpCommType::a2a_p2p, report.data_parallel_size, topology, options).result;
  for (const RankStats& st : p.ranks)
    for (const TimeBreakdown& t : st.time_breakdown) REQUIRE(t.comm_slowdown_ps == 0);
  // The summary JSON carries the busiest GPU's breakdown (and every rank's).
  const std::string json = summary_json(r);
  const TimeBreakdown& top = r.ranks[static_cast<size_t>(r.busiest_cp_rank)].time_breakdown[0];
  REQUIRE(json.find("\"time_breakdown\"", json.find("\"busiest_cp_rank\"")) != std::string::npos);
  REQUIRE(json.find("\"attention_kernel_ps\": " + std::to_string(top.attention_kernel_ps)) != std::string::npos);
  REQUIRE(json.find("\"busiest_cp_rank\": " + std::to_string(r.busiest_cp_rank)) != std::string::npos);
}

TEST_CASE("sim: a small attention block runs at the wave-corrected table efficiency", "[sim]") {
  const auto h100 = cluster_preset("dgx-h100", 1);
  REQUIRE(h100.has_value());
  RankProgram prog;
  test::ProgramWriter w(prog);
  const BufferId q = w.input("q", 1024, 8, 128);  // [1, 1024, 8, 128]: batch 1, 8 heads
  const BufferId k = w.input("k", 1024, 8, 128);
  const BufferId v = w.input("v", 1024, 8, 128);
  const BufferId out = w.declare("out", 1024, 8, 128);
  prog.buffers.push_back(BufferDecl{"lse", 1, 1024, 8, 1, Dtype::fp32});
  const auto lse = static_cast<BufferId>(prog.buffers.size() - 1);
  w.add(AttnFwdBlockOp{q, k, v, {0, 1024}, {0, 1024}, BlockMask::none, Section::full, out, lse}, Stream::compute, {},
        "fwd");
  // Table: cuDNN forward, no mask, 1K = 574 / 989.4 (published). Tiles: ceil(1024 / 128) · 1 · 8 = 64 on 132 SMs,
  // a correction of 0.5 (hand computation above): 287 / 989.4.
  REQUIRE(attention_block_efficiency(prog.ops[0], prog, h100->gpu) == Approx(287 / 989.4).epsilon(1e-12));
  // Without an SM count the table value stands.
  GpuSpec plain = h100->gpu;
  plain.sm_count = 0;
  REQUIRE(attention_block_efficiency(prog.ops[0], prog, plain) == Approx(574 / 989.4).epsilon(1e-12));
}

TEST_CASE("sim: the worst GPU's idle time splits into the busiest GPU's exposed comm and the load imbalance", "[sim]") {
  // By hand: a 10 ps run whose GPUs compute 5, 8 and 6 ps: the busiest (8) idles 2 ps, the least busy (5) idles
  // 5 ps, 3 of them waiting for the busiest one's extra work.
  SimResult hand;
  hand.total_ps = 10;
  for (TimePs busy : {5, 8, 6}) {
    RankStats st;
    st.compute_busy_ps = busy;
    st.exposed_comm_ps = hand.total_ps - busy;
    hand.ranks.push_back(st);
  }
  CHECK(hand.critical_exposed_comm_ps() == 2);
  CHECK(hand.load_imbalance_ps() == 3);
  CHECK(SimResult{}.critical_exposed_comm_ps() == 0);
  CHECK(SimResult{}.load_imbalance_ps() == 0);

  // The default scenario: the ring's GPUs do not all compute alike; the split is exact and in the summary JSON.
  const Scenario s = load_scenario(std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  const auto report = validate_scenario(s, ValidationScope::placement);
  SimOptions options;
  options.record_timeline = false;
  const SimResult r =
      simulate_attention(s, CpCommType::a2a_p2p, report.data_parallel_size, Topology::from_cluster(s.cluster), options)
          .result;
  TimePs worst_idle = 0, most_busy = 0;
  for (const RankStats& st : r.ranks) {
    worst_idle = std::max(worst_idle, st.exposed_comm_ps);
    most_busy = std::max(most_busy, st.compute_busy_ps);
  }
  CHECK(r.critical_exposed_comm_ps() == r.total_ps - most_busy);
  CHECK(r.load_imbalance_ps() > 0);
  CHECK(r.critical_exposed_comm_ps() + r.load_imbalance_ps() == worst_idle);
  const std::string json = summary_json(r);
  CHECK(json.find("\"critical_exposed_comm_ps\": " + std::to_string(r.critical_exposed_comm_ps())) != std::string::npos);
  CHECK(json.find("\"load_imbalance_ps\": " + std::to_string(r.load_imbalance_ps())) != std::string::npos);
}
