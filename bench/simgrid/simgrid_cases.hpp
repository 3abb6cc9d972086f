#pragma once
// The cases of the SimGrid side-by-side harness (simgrid_bench.cpp): which schedule runs on which cluster.
// Included by that one translation unit only.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "../llama3_8b_shape.hpp"

namespace {

// Tokens per CP rank. Source: assumption, a typical long-context shard (as bench/sim_bench.cpp).
constexpr int64_t kSeqPerRank = 4096;

/// One comparison case: a schedule on a cluster with a placement.
struct Case {
  std::string name;
  std::string description;
  hcpsim::CpCommType cp_comm_type = hcpsim::CpCommType::a2a_p2p;
  int64_t a2a_size = 1;
  int64_t p2p_size = 1;
  hcpsim::ClusterSpec cluster;
  std::vector<int64_t> gpu_of_cp_rank;  ///< global GPU of each CP rank
};

/// A DGX H100 cluster of `nodes` nodes with `gpus_per_node` GPUs and `nics_per_node` NICs (0 = one per GPU).
hcpsim::ClusterSpec dgx_h100(int64_t nodes, int64_t gpus_per_node, int64_t nics_per_node) {
  hcpsim::ClusterSpec c = *hcpsim::cluster_preset("dgx-h100", nodes);
  c.gpus_per_node = gpus_per_node;
  c.nics_per_node = nics_per_node;
  return c;
}

/// One row of the case table: the cluster is `nodes` DGX H100 nodes of `gpus_per_node` GPUs and `nics_per_node`
/// NICs (0 = one per GPU); CP rank r sits on global GPU r · `gpu_stride` (1: Megatron's tp-cp-ep-dp-pp with TP = 1,
/// CP rank = global rank; 8: one rank per node, as with TP = 8).
struct CaseRow {
  const char* name;
  const char* description;
  hcpsim::CpCommType cp_comm_type;
  int64_t a2a_size, p2p_size, nodes, gpus_per_node, nics_per_node, gpu_stride;
};

constexpr hcpsim::CpCommType kA2a = hcpsim::CpCommType::a2a;
constexpr hcpsim::CpCommType kP2p = hcpsim::CpCommType::p2p;
constexpr hcpsim::CpCommType kHier = hcpsim::CpCommType::a2a_p2p;
const CaseRow kCases[] = {
    {"a2a8", "a2a CP=8 on 1 DGX H100 node (NVSwitch)", kA2a, 8, 1, 1, 8, 0, 1},
    {"ring4", "p2p CP=4, one rank per node on 4 DGX H100 nodes (TP=8 placement)", kP2p, 1, 4, 4, 8, 0, 8},
    {"shared_nic", "a2a+p2p [8,4] on 4 DGX H100 nodes, 2 NICs per node (4 ring flows per NIC)", kHier, 8, 4, 4, 8, 2, 1},
    {"a2a_nic", "a2a+p2p [8,2] on 4 nodes of 4 H100, 1 NIC per node (a2a and ring flows share NICs)", kHier, 8, 2, 4, 4,
     1, 1},
    {"large512", "a2a+p2p [8,64] on 64 DGX H100 nodes (CP=512, 2 scalable units, ring hops via spines)", kHier, 8, 64,
     64, 8, 0, 1},
    {"p2p512", "p2p CP=512 on 64 DGX H100 nodes (ring through NVLink and NICs)", kP2p, 1, 512, 64, 8, 0, 1},
};

/// The cases, by name. @return empty name for an unknown one.
Case make_case(const std::string& name) {
  Case k;
  for (const CaseRow& row : kCases) {
    if (name != row.name) continue;
    k.name = name;
    k.description = row.description;
    k.cp_comm_type = row.cp_comm_type;
    k.a2a_size = row.a2a_size;
    k.p2p_size = row.p2p_size;
    k.cluster = dgx_h100(row.nodes, row.gpus_per_node, row.nics_per_node);
    for (int64_t r = 0; r < row.a2a_size * row.p2p_size; ++r) k.gpu_of_cp_rank.push_back(r * row.gpu_stride);
  }
  return k;
}

/// Llama-3-8B attention per TP rank with kSeqPerRank tokens per CP rank (bench/llama3_8b_shape.hpp).
hcpsim::AttentionShape llama3_8b_shape(int64_t cp) { return hcpsim::bench::llama3_8b_shape(cp, kSeqPerRank); }

}  // namespace
