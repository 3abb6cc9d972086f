#pragma once
/// Collectives as NCCL runs them: the time of all-reduce, all-gather, reduce-scatter, alltoall and send/recv over
/// a group of global GPUs of a ClusterSpec, from NCCL's algorithms (ring; NVLink SHARP inside a node and NVLS
/// tree across nodes for all-reduce; pairwise exchange for alltoall) and its cost model (src/graph/tuning.cc:
/// per-protocol base and per-step hardware latencies, LL/LL128 bandwidth factors), with the achieved link
/// bandwidths of the cluster. Like NCCL's tuner, the model predicts every enabled (algorithm, protocol) and keeps
/// the fastest. Formulas: docs/simulator.md "Collectives".
///
/// Sizes follow nccl-tests: `bytes` is the send buffer of all-reduce, alltoall and send/recv, the output of
/// all-gather and the input of reduce-scatter (n × the per-rank part).

#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/sim/event_queue.hpp"

namespace hcpsim::sim {

/// The collective operations of the model.
enum class CollectiveOp { all_reduce, all_gather, reduce_scatter, alltoall, sendrecv };
/// "all_reduce" | "all_gather" | "reduce_scatter" | "alltoall" | "sendrecv".
std::string to_string(CollectiveOp op);

/// NCCL's algorithms that the model knows (pairwise = alltoall's n − 1 concurrent sends, p2p = one send/recv).
enum class CollectiveAlgorithm { ring, nvls, nvls_tree, pairwise, p2p };
/// "ring" | "nvls" | "nvls_tree" | "pairwise" | "p2p".
std::string to_string(CollectiveAlgorithm a);

/// NCCL's protocols.
enum class NcclProtocol { ll, ll128, simple };
/// "LL" | "LL128" | "Simple" (NCCL's spelling).
std::string to_string(NcclProtocol p);

/// Where a group's GPUs sit: ranks, nodes, and the most ranks on one node.
struct CollectiveGroupShape {
  int64_t ranks = 1;
  int64_t nodes = 1;
  int64_t ranks_per_node = 1;  ///< the largest count of group members on one node
};

/// The shape of a group of global GPU indices (node = gpu / cluster.gpus_per_node).
/// @throws nothing; HCPSIM_ASSERT on an empty group or a negative index.
CollectiveGroupShape group_shape(const std::vector<int64_t>& gpus, const ClusterSpec& cluster);

/// One prediction: the fastest (algorithm, protocol) and its time = latency + bytes · bus_factor / bus bandwidth.
struct CollectiveEstimate {
  double seconds = 0;
  double latency_s = 0;
  double bus_bytes_per_s = 0;  ///< the bus bandwidth of the chosen pair (nccl-tests busbw at infinite size)
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  NcclProtocol protocol = NcclProtocol::simple;
  [[nodiscard]] TimePs ps() const { return seconds_to_ps(seconds); }
};

/// nccl-tests' bus factor (doc/PERFORMANCE.md): all-reduce 2(n−1)/n; all-gather, reduce-scatter, alltoall
/// (n−1)/n; send/recv 1. @param ranks ≥ 1.
double bus_factor(CollectiveOp op, int64_t ranks);

/// Fastest (algorithm, protocol) for `op` of `bytes` over `shape` on `cluster`. A group of one rank costs 0.
/// Needs cluster.nvlink bandwidth > 0, and cluster.network bandwidth > 0 when the group spans nodes
/// (HCPSIM_ASSERT); bytes ≥ 0.
CollectiveEstimate collective_estimate(CollectiveOp op, double bytes, const CollectiveGroupShape& shape,
                                       const ClusterSpec& cluster);

/// collective_estimate over the group of global GPUs `gpus`.
CollectiveEstimate collective_estimate(CollectiveOp op, double bytes, const std::vector<int64_t>& gpus,
                                       const ClusterSpec& cluster);

/// The ring only (all-gather, reduce-scatter, all-reduce), fastest protocol: what the simulator's ring flows
/// take their latency from.
CollectiveEstimate ring_estimate(CollectiveOp op, double bytes, const CollectiveGroupShape& shape,
                                 const ClusterSpec& cluster);

}  // namespace hcpsim::sim
