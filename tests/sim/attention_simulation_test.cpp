#include <string>

#include "catch_compat.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/sim/attention_simulation.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;

namespace {

Scenario bundled(const std::string& name, const std::vector<std::string>& overrides = {}) {
  return load_scenario(std::string(HCPSIM_SOURCE_DIR) + "/scenarios/" + name, overrides);
}

}  // namespace

TEST_CASE("sim: simulate_attention's reduced run equals the full run and says which it used", "[sim]") {
  // Llama-3-8B 128K at a2a+p2p [8, 2] on 4 DGX H100 nodes: CP ranks 0..15 on GPUs 0..15, the a2a inside a node.
  const Scenario s = bundled("llama3_8b_128k_cp16_4xdgx_h100.yaml");
  const auto report = validate_scenario(s, ValidationScope::placement);
  const Topology topology = Topology::from_cluster(s.cluster);
  REQUIRE(scenario_cp_gpus(s, report.data_parallel_size, topology) ==
          std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  SimOptions options;
  options.record_timeline = false;
  const AttentionSimulation reduced =
      simulate_attention(s, CpCommType::a2a_p2p, report.data_parallel_size, topology, options);
  const AttentionSimulation full =
      simulate_attention(s, CpCommType::a2a_p2p, report.data_parallel_size, topology, options, "a test asks for it");
  REQUIRE(reduced.reduced);
  REQUIRE(reduced.result.simulated_ranks == 2);  // one representative per p2p rank
  REQUIRE(reduced.note ==
          "symmetry reduction: simulated 2 representative CP ranks (a2a_rank 0), each standing for its 8 a2a "
          "peers; exact");
  REQUIRE_FALSE(full.reduced);
  REQUIRE(full.note == "full simulation (symmetry reduction does not apply: a test asks for it)");
  REQUIRE(full.result.forward_ps > 0);
  REQUIRE(reduced.result.forward_ps == full.result.forward_ps);
  REQUIRE(reduced.result.backward_ps == full.result.backward_ps);
  REQUIRE(reduced.result.total_ps == full.result.total_ps);
  REQUIRE(reduced.result.ranks.size() == full.result.ranks.size());
  for (size_t r = 0; r < full.result.ranks.size(); ++r) {
    REQUIRE(reduced.result.ranks[r].exposed_comm_ps == full.result.ranks[r].exposed_comm_ps);
    REQUIRE(reduced.result.ranks[r].peak_memory_bytes == full.result.ranks[r].peak_memory_bytes);
  }
}

TEST_CASE("sim: simulate_attention names why the reduction does not apply, and checks the placement", "[sim]") {
  // Plain p2p: the reduction needs an a2a level (A > 1), so the full schedule is simulated.
  const Scenario s = bundled("llama3_8b_128k_cp16_4xdgx_h100.yaml",
                             {"parallel.cp_comm_type=p2p", "parallel.hierarchical_context_parallel_sizes=null"});
  const auto report = validate_scenario(s, ValidationScope::placement);
  const Topology topology = Topology::from_cluster(s.cluster);
  const AttentionSimulation p2p = simulate_attention(s, CpCommType::p2p, report.data_parallel_size, topology, {});
  REQUIRE_FALSE(p2p.reduced);
  REQUIRE(p2p.note.rfind("full simulation (symmetry reduction does not apply: ", 0) == 0);
  REQUIRE(p2p.result.simulated_ranks == 16);
  // A topology with fewer GPUs than the placement needs is bad input naming the cluster and the fix.
  const Scenario one_node = bundled("llama32_1b_cp4_a2a_p2p.yaml");
  const Topology small = Topology::from_cluster(one_node.cluster);
  try {
    scenario_cp_gpus(s, report.data_parallel_size, small);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string m = e.what();
    CHECK(m.find("cluster") != std::string::npos);
    CHECK(m.find("CP rank placement needs GPU") != std::string::npos);
    CHECK(m.find("add GPUs to cluster.topology") != std::string::npos);
  }
}

TEST_CASE("sim: no rank starts a backward op, memory included, before its own forward has ended", "[sim]") {
  // The backward of one attention layer runs after the rest of the model's forward: its buffers are allocated,
  // and its first op starts, only once the rank's forward is done. all_gather allocated dq, dk.ag and dv.ag as
  // soon as its compute stream was free, while the forward's second chunk still ran on the cp stream: the
  // backward "started" at 118.5 us of a 286.3 us forward in the default scenario (and the forward's exposed comm
  // moved into the backward's).
  for (const char* type : {"p2p", "a2a", "all_gather", "a2a+p2p"}) {
    for (const char* mask : {"causal", "no_mask"}) {
      INFO(type << " " << mask);
      std::vector<std::string> overrides{std::string("model.attn_mask_type=") + mask};
      if (std::string(type) != "a2a+p2p") {
        overrides.push_back(std::string("parallel.cp_comm_type=") + type);
        overrides.emplace_back("parallel.hierarchical_context_parallel_sizes=null");
      }
      const Scenario s = bundled("llama32_1b_cp4_a2a_p2p.yaml", overrides);
      const auto report = validate_scenario(s, ValidationScope::placement);
      const Topology topology = Topology::from_cluster(s.cluster);
      const CpCommType t = s.parallel.cp_comm_type.front();
      const SimResult r = simulate_attention(s, t, report.data_parallel_size, topology, {}).result;
      std::vector<TimePs> forward_end(r.ranks.size(), 0);
      for (const TimelineEntry& e : r.timeline)
        if (e.phase == Phase::forward)
          forward_end[static_cast<size_t>(e.cp_rank)] = std::max(forward_end[static_cast<size_t>(e.cp_rank)], e.end_ps);
      int64_t backward_ops = 0;
      for (const TimelineEntry& e : r.timeline) {
        if (e.phase != Phase::backward) continue;
        ++backward_ops;
        INFO("cp rank " << e.cp_rank << " op " << e.op_index << " '" << e.label << "'");
        REQUIRE(e.start_ps >= forward_end[static_cast<size_t>(e.cp_rank)]);
      }
      REQUIRE(backward_ops > 0);
      TimePs first_forward_end = forward_end[0];
      for (TimePs f : forward_end) first_forward_end = std::min(first_forward_end, f);
      REQUIRE(r.backward_start_ps >= first_forward_end);
    }
  }
}
