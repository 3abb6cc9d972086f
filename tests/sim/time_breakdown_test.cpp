#include <string>

#include "catch_compat.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/sim/attention_simulation.hpp"
#include "hcpsim/sim/cost_model.hpp"

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
    busiest = std::max(busiest, st.compute_kernel_ps);
  }
  REQUIRE(r.ranks[static_cast<size_t>(r.busiest_cp_rank)].compute_kernel_ps == busiest);
}
