#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "sim_compare.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;
using hcpsim::sim::test::same_bits;
using hcpsim::sim::test::require_same_links_and_flows;

namespace {

// Llama-3-8B attention per TP rank (32 heads, 8 KV groups, d = 128, bf16), as bench/sim_bench.cpp.
AttentionShape llama_shape(int64_t seq_length, bool causal) {
  AttentionShape shape;
  shape.batch = 1;
  shape.seq_length = seq_length;
  shape.heads_q = 32;
  shape.heads_kv = 8;
  shape.head_dim_qk = 128;
  shape.head_dim_v = 128;
  shape.causal = causal;
  shape.softmax_scale = 1.0 / 11.313708498984761;  // 128^-0.5
  shape.dtype = Dtype::bf16;
  return shape;
}

/// Simulates the a2a+p2p schedule [A = 8, P] on P DGX H100 nodes (cp rank g on GPU g) in full and reduced, and
/// checks that every result the reduction promises is identical.
void check_reduction_is_exact(int64_t p2p_size, int64_t seq_length, bool causal, const ClusterSpec& cluster) {
  constexpr int64_t kA = 8;
  const AttentionShape shape = llama_shape(seq_length, causal);
  const CpLayout layout(kA, p2p_size, seq_length);
  std::vector<int64_t> gpus;
  for (int64_t g = 0; g < kA * p2p_size; ++g) gpus.push_back(g);
  REQUIRE(symmetry_reduction_blocker(CpCommType::a2a_p2p, kA, p2p_size, cluster, gpus).empty());
  const Topology topology = Topology::from_cluster(cluster);

  const Schedule full_schedule = build_schedule(CpCommType::a2a_p2p, layout, shape);
  const SimResult full = simulate(full_schedule, cluster, topology, gpus);
  const Schedule reps = build_schedule_ranks(CpCommType::a2a_p2p, layout, shape,
                                             symmetry_representatives(kA, p2p_size));
  // The representatives' programs are build_schedule's, the others are empty.
  for (size_t g = 0; g < reps.ranks.size(); ++g) {
    INFO("cp rank " << g);
    REQUIRE(reps.ranks[g].ops.size() == (g % kA == 0 ? full_schedule.ranks[g].ops.size() : 0));
  }
  SimOptions reduced_options;
  reduced_options.symmetry_reduction = true;
  const SimResult reduced = simulate(reps, cluster, topology, gpus, reduced_options);

  REQUIRE(reduced.symmetry_reduced);
  REQUIRE(reduced.symmetry_exact);
  REQUIRE(reduced.simulated_ranks == p2p_size);
  REQUIRE(full.simulated_ranks == kA * p2p_size);
  // Not vacuous: the layer takes time, moves bytes on both levels and computes.
  REQUIRE(full.total_ps > 0);
  REQUIRE(full.message_totals(Phase::forward, LinkLevel::intra_node).bytes > 0);
  if (p2p_size > 1) REQUIRE(full.message_totals(Phase::forward, LinkLevel::inter_node).bytes > 0);
  REQUIRE(full.phase_flops(Phase::backward) > 0);

  REQUIRE(reduced.forward_ps == full.forward_ps);
  REQUIRE(reduced.backward_start_ps == full.backward_start_ps);
  REQUIRE(reduced.backward_ps == full.backward_ps);
  REQUIRE(reduced.total_ps == full.total_ps);
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    REQUIRE(same_bits(reduced.flops[static_cast<size_t>(ph)], full.flops[static_cast<size_t>(ph)]));
    REQUIRE(same_bits(full.flops[static_cast<size_t>(ph)], full_schedule.total_flops(static_cast<Phase>(ph))));
    for (int lv = 0; lv < kLinkLevelCount; ++lv) {
      REQUIRE(reduced.messages[static_cast<size_t>(ph)][static_cast<size_t>(lv)].count ==
              full.messages[static_cast<size_t>(ph)][static_cast<size_t>(lv)].count);
      REQUIRE(reduced.messages[static_cast<size_t>(ph)][static_cast<size_t>(lv)].bytes ==
              full.messages[static_cast<size_t>(ph)][static_cast<size_t>(lv)].bytes);
    }
  }
  REQUIRE(reduced.ranks.size() == full.ranks.size());
  for (size_t g = 0; g < full.ranks.size(); ++g) {
    INFO("cp rank " << g);
    const RankStats& a = reduced.ranks[g];
    const RankStats& b = full.ranks[g];
    REQUIRE(a.cp_rank == b.cp_rank);
    REQUIRE(a.node == b.node);
    REQUIRE(a.gpu == b.gpu);
    REQUIRE(a.end_ps == b.end_ps);
    REQUIRE(a.compute_busy_ps == b.compute_busy_ps);
    REQUIRE(a.comm_busy_ps == b.comm_busy_ps);
    REQUIRE(a.exposed_comm_ps == b.exposed_comm_ps);
    REQUIRE(a.compute_kernel_ps == b.compute_kernel_ps);
    REQUIRE(a.input_bytes == b.input_bytes);
    REQUIRE(a.peak_memory_bytes == b.peak_memory_bytes);
    REQUIRE(a.phase_peak_memory_bytes == b.phase_peak_memory_bytes);
    REQUIRE(a.final_memory_bytes == b.final_memory_bytes);
    for (int ph = 0; ph < kPhaseCount; ++ph)
      for (int lv = 0; lv < kLinkLevelCount; ++lv) {
        REQUIRE(a.messages_sent[static_cast<size_t>(ph)][static_cast<size_t>(lv)].count ==
                b.messages_sent[static_cast<size_t>(ph)][static_cast<size_t>(lv)].count);
        REQUIRE(a.messages_sent[static_cast<size_t>(ph)][static_cast<size_t>(lv)].bytes ==
                b.messages_sent[static_cast<size_t>(ph)][static_cast<size_t>(lv)].bytes);
      }
  }
  require_same_links_and_flows(reduced, full);
  // The timeline, entry by entry (same (cp_rank, op_index) order).
  REQUIRE(reduced.timeline.size() == full.timeline.size());
  for (size_t k = 0; k < full.timeline.size(); ++k) {
    const TimelineEntry& a = reduced.timeline[k];
    const TimelineEntry& b = full.timeline[k];
    INFO("timeline entry " << k << " cp rank " << b.cp_rank << " op " << b.op_index);
    REQUIRE(a.cp_rank == b.cp_rank);
    REQUIRE(a.op_index == b.op_index);
    REQUIRE(a.start_ps == b.start_ps);
    REQUIRE(a.end_ps == b.end_ps);
  }
  for (LinkClass lc : {LinkClass::nvlink, LinkClass::pcie, LinkClass::network}) {
    REQUIRE(same_bits(reduced.link_class_utilisation(lc).max_utilisation,
                      full.link_class_utilisation(lc).max_utilisation));
    REQUIRE(same_bits(reduced.link_class_utilisation(lc).mean_utilisation,
                      full.link_class_utilisation(lc).mean_utilisation));
  }
  // The reduced run executes one rank in A.
  REQUIRE(reduced.event_count < full.event_count);
}

}  // namespace

TEST_CASE("sim: symmetry reduction equals the full simulation at CP = 64 ([8, 8] on 8 DGX H100 nodes)",
          "[sim][symmetry]") {
  // 8 nodes fit one scalable unit: rail a of every node is on leaf a, the ring never crosses a spine.
  check_reduction_is_exact(8, 64 * 4096, true, *cluster_preset("dgx-h100", 8));
}

TEST_CASE("sim: symmetry reduction equals the full simulation with ring hops across spines ([8, 6], no mask)",
          "[sim][symmetry]") {
  // Two nodes per leaf: 3 scalable units, so every third ring hop goes leaf → spine → leaf with an ECMP choice of
  // spine that differs between rails; the reduction still matches because no leaf–spine link is a bottleneck.
  ClusterSpec cluster = *cluster_preset("dgx-h100", 6);
  cluster.fabric.leaf_downlinks = 2;
  cluster.fabric.spines = 4;
  cluster.message_latency_s = 7e-6;
  check_reduction_is_exact(6, 48 * 1024, false, cluster);
}

TEST_CASE("sim: symmetry reduction of a pure a2a layer on one node", "[sim][symmetry]") {
  check_reduction_is_exact(1, 8 * 2048, true, *cluster_preset("dgx-h100", 1));
}

TEST_CASE("sim: symmetry reduction applies only where the ranks of an a2a group are identical", "[sim][symmetry]") {
  std::vector<int64_t> gpus;
  for (int64_t g = 0; g < 64; ++g) gpus.push_back(g);
  const ClusterSpec h100 = *cluster_preset("dgx-h100", 8);
  REQUIRE(symmetry_reduction_blocker(CpCommType::a2a_p2p, 8, 8, h100, gpus).empty());
  ClusterSpec fat = h100;
  fat.fabric.kind = FabricSpec::Kind::fat_tree;
  REQUIRE(symmetry_reduction_blocker(CpCommType::a2a_p2p, 8, 8, fat, gpus) == "fabric is not rail-optimised");
  ClusterSpec shared_nic = h100;
  shared_nic.nics_per_node = 4;
  REQUIRE(symmetry_reduction_blocker(CpCommType::a2a_p2p, 8, 8, shared_nic, gpus) == "not one NIC per GPU");
  REQUIRE(symmetry_reduction_blocker(CpCommType::a2a_p2p, 4, 16, h100, gpus) ==
          "A != gpus_per_node (an a2a group is not one whole node)");
  REQUIRE(symmetry_reduction_blocker(CpCommType::p2p, 1, 64, h100, gpus) == "cp_comm_type has no a2a level");
  std::vector<int64_t> swapped = gpus;
  std::swap(swapped[1], swapped[2]);
  REQUIRE(symmetry_reduction_blocker(CpCommType::a2a_p2p, 8, 8, h100, swapped) ==
          "cp rank 1 is not on GPU 1 of its a2a group's node");
  REQUIRE(symmetry_representatives(8, 3) == std::vector<int64_t>{0, 8, 16});
}

TEST_CASE("sim: a run without flow records gives every other result of the run with them", "[sim][symmetry]") {
  // [8, 6] with two nodes per leaf (ring hops across spines, image messages with their own routes), in full and
  // reduced: record_flows = false keeps a message's records only while it is in flight.
  ClusterSpec cluster = *cluster_preset("dgx-h100", 6);
  cluster.fabric.leaf_downlinks = 2;
  cluster.fabric.spines = 4;
  constexpr int64_t kA = 8, kP = 6;
  const AttentionShape shape = llama_shape(48 * 1024, true);
  const CpLayout layout(kA, kP, shape.seq_length);
  std::vector<int64_t> gpus;
  for (int64_t g = 0; g < kA * kP; ++g) gpus.push_back(g);
  const Topology topology = Topology::from_cluster(cluster);
  for (const bool reduce : {false, true}) {
    INFO((reduce ? "reduced" : "full") << " run");
    const Schedule schedule = reduce ? build_schedule_ranks(CpCommType::a2a_p2p, layout, shape,
                                                            symmetry_representatives(kA, kP))
                                     : build_schedule(CpCommType::a2a_p2p, layout, shape);
    SimOptions with;
    with.symmetry_reduction = reduce;
    SimOptions without = with;
    without.record_flows = false;
    const SimResult a = simulate(schedule, cluster, topology, gpus, with);
    const SimResult b = simulate(schedule, cluster, topology, gpus, without);
    // Every ring message and its images: 3 per (rank, step) — forward KV, backward KV and dKV — plus the a2as.
    REQUIRE(a.flow_count == static_cast<int64_t>(a.flows.size()));
    REQUIRE(a.flow_count > 3 * kA * (kP - 1));
    REQUIRE(b.flows.empty());
    REQUIRE(b.flow_count == a.flow_count);
    REQUIRE(b.forward_ps == a.forward_ps);
    REQUIRE(b.backward_ps == a.backward_ps);
    REQUIRE(b.total_ps == a.total_ps);
    REQUIRE(b.event_count == a.event_count);
    REQUIRE(b.network_recomputes == a.network_recomputes);
    REQUIRE(b.symmetry_exact == a.symmetry_exact);
    REQUIRE(b.ranks.size() == a.ranks.size());
    for (size_t g = 0; g < a.ranks.size(); ++g) {
      INFO("cp rank " << g);
      REQUIRE(b.ranks[g].end_ps == a.ranks[g].end_ps);
      REQUIRE(b.ranks[g].exposed_comm_ps == a.ranks[g].exposed_comm_ps);
      REQUIRE(b.ranks[g].peak_memory_bytes == a.ranks[g].peak_memory_bytes);
    }
    hcpsim::sim::test::require_same_links(b, a);
  }
}
