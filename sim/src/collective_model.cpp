#include "hcpsim/sim/collective_model.hpp"

#include <algorithm>
#include <map>

#include "hcpsim/core/error.hpp"

namespace hcpsim::sim {
namespace {

// NCCL's cost model, src/graph/tuning.cc (ncclTunerConstantsDefaults), in seconds, indexed by protocol
// (LL, LL128, Simple): ring base latency per operation, ring hardware latency per step over NVLink and over the
// network, and the network step latency NCCL uses when every node holds one rank (Tree's).
constexpr double kRingBaseLatencyS[] = {6.6e-6, 14.0e-6, 8.4e-6};
constexpr double kNvlinkStepLatencyS[] = {0.6e-6, 1.9e-6, 3.4e-6};
constexpr double kNetStepLatencyS[] = {2.7e-6, 4.0e-6, 14.0e-6};
constexpr double kNetStepLatencyOneRankPerNodeS[] = {5.0e-6, 8.5e-6, 14.0e-6};
// tuning.cc getNetOverhead: 1 µs per network step on x86 Intel hosts (DGX H100: Xeon), three times for Simple.
constexpr double kNetOverheadS = 1.0e-6;
// tuning.cc hwLatencies NET, NVLS Tree, Simple: 20.9 µs per tree level across nodes.
constexpr double kNvlsTreeNetLatencyS = 20.9e-6;
// tuning.cc ncclTopoTuneModel: LL bus bandwidth = min(llMaxBw, 0.5 · ring bandwidth) (LL moves 8 B of flags per
// 8 B of data); LL128 = 0.92 · ring bandwidth (120 of 128 bytes are data). Across nodes llMaxBws of x86 Intel
// hosts: 39.0 GB/s on 2 nodes, 20.4 GB/s on more.
constexpr double kLlFactor = 0.5;
constexpr double kLl128Factor = 0.92;
constexpr double kLlMaxTwoNodesBytesPerS = 39.0e9;
constexpr double kLlMaxManyNodesBytesPerS = 20.4e9;

constexpr NcclProtocol kProtocols[] = {NcclProtocol::ll, NcclProtocol::ll128, NcclProtocol::simple};

size_t pidx(NcclProtocol p) { return static_cast<size_t>(p); }

/// One (algorithm, protocol) candidate: time = latency + bytes · seconds_per_byte.
struct Candidate {
  CollectiveAlgorithm algorithm;
  NcclProtocol protocol;
  double latency_s;
  double seconds_per_byte;
};

/// The per-rank link rates a group can use: NVLink per GPU, and the node's NICs the group's members bring.
struct GroupRates {
  double nvlink = 0;       ///< per GPU per direction
  double node_network = 0; ///< the NICs of one node that the group's members use, together
  double gpu_network = 0;  ///< node_network / ranks on the node
};

GroupRates group_rates(const CollectiveGroupShape& g, const ClusterSpec& c) {
  GroupRates r;
  r.nvlink = c.nvlink.bandwidth_bytes_per_s;
  HCPSIM_ASSERT(r.nvlink > 0, "collective over NVLink without bandwidth");
  if (g.nodes == 1) return r;
  HCPSIM_ASSERT(c.network.bandwidth_bytes_per_s > 0, "collective across nodes without network bandwidth");
  const int64_t nics = c.nics_per_node > 0 ? c.nics_per_node : c.gpus_per_node;
  // NCCL builds one ring per channel and lets each leave through the NIC of one member (PXN): the members of
  // a node bring their own NICs, ceil(ranks_per_node · nics / gpus_per_node) of them.
  const int64_t used = std::min(nics, std::max<int64_t>(1, (g.ranks_per_node * nics + c.gpus_per_node - 1) /
                                                               c.gpus_per_node));
  r.node_network = static_cast<double>(used) * c.network.bandwidth_bytes_per_s;
  r.gpu_network = r.node_network / static_cast<double>(g.ranks_per_node);
  return r;
}

// Ring: every rank sends to the next; across nodes one ring per channel leaves each node through another NIC, so
// the ring's rate is bounded by NVLink per GPU and by the node's NICs together.
void add_ring(CollectiveOp op, const CollectiveGroupShape& g, const ClusterSpec& c, std::vector<Candidate>& out) {
  const GroupRates r = group_rates(g, c);
  const double ring_bw = g.nodes == 1 ? r.nvlink : g.ranks_per_node == 1 ? r.node_network
                                                                           : std::min(r.nvlink, r.node_network);
  const bool ar = op == CollectiveOp::all_reduce;
  const int64_t steps = ar ? 2 * (g.ranks - 1) : g.ranks - 1;
  const int64_t inter_steps = g.nodes == 1 ? 0 : ar ? 2 * (g.nodes - 1) : g.nodes - 1;
  const double ll_cap = g.nodes == 1 ? c.collectives.ll_max_bytes_per_s
                        : g.nodes == 2 ? kLlMaxTwoNodesBytesPerS : kLlMaxManyNodesBytesPerS;
  const double factor = bus_factor(op, g.ranks);
  for (NcclProtocol p : kProtocols) {
    const size_t k = pidx(p);
    double intra = kNvlinkStepLatencyS[k];
    if (g.nodes > 1) intra = std::max(intra, p == NcclProtocol::simple ? 3 * kNetOverheadS : kNetOverheadS);
    const double inter = g.ranks_per_node == 1 ? kNetStepLatencyOneRankPerNodeS[k] : kNetStepLatencyS[k];
    const double latency = kRingBaseLatencyS[k] + static_cast<double>(steps - inter_steps) * intra +
                           static_cast<double>(inter_steps) * inter;
    const double bw = p == NcclProtocol::ll ? std::min(ll_cap, kLlFactor * ring_bw)
                      : p == NcclProtocol::ll128 ? kLl128Factor * ring_bw : ring_bw;
    out.push_back({CollectiveAlgorithm::ring, p, latency, factor / bw});
  }
}

// NVLS (one node) and NVLS tree (across nodes): the NVSwitch reduces and multicasts inside a node; across nodes
// each GPU all-reduces its 1/ranks_per_node share over its NICs, pipelined with the node's part.
void add_nvls(const CollectiveGroupShape& g, const ClusterSpec& c, std::vector<Candidate>& out) {
  const CollectiveSpec& cs = c.collectives;
  if (!(cs.nvls_bus_bytes_per_s > 0) || g.ranks_per_node < 2) return;
  const double ppn = static_cast<double>(g.ranks_per_node);
  const GroupRates r = group_rates(g, c);
  // Whatever reduces, every GPU takes in the whole result, S bytes, over its NVLink ports: the algorithm
  // bandwidth cannot exceed one GPU's NVLink rate per direction. The fixed NVLS bus rate (fitted on 8 GPUs)
  // would break this at 2 GPUs (470 GB/s bus = algorithm bandwidth there).
  const double link_spb = 1 / r.nvlink;
  const double intra_spb = std::max(2 * (ppn - 1) / ppn / cs.nvls_bus_bytes_per_s, link_spb);
  if (g.nodes == 1) {
    out.push_back({CollectiveAlgorithm::nvls, NcclProtocol::simple, cs.nvls_latency_s,
                   std::max(bus_factor(CollectiveOp::all_reduce, g.ranks) / cs.nvls_bus_bytes_per_s, link_spb)});
    return;
  }
  const double nodes = static_cast<double>(g.nodes);
  const double inter_spb = 2 * (nodes - 1) / nodes / r.node_network;
  int64_t levels = 0;
  for (int64_t v = g.nodes; v > 1; v /= 2) ++levels;  // log2i, as tuning.cc
  out.push_back({CollectiveAlgorithm::nvls_tree, NcclProtocol::simple,
                 cs.nvls_latency_s + 2 * static_cast<double>(levels) * kNvlsTreeNetLatencyS,
                 std::max(intra_spb, inter_spb)});
}

// Alltoall (n − 1 concurrent sends of bytes/n) and send/recv (each rank sends `bytes` to the next): one step of
// NCCL's point-to-point latency; the slower of the NVLink and the network share sets the rate.
void add_point_to_point(CollectiveOp op, const CollectiveGroupShape& g, const ClusterSpec& c,
                        std::vector<Candidate>& out) {
  const GroupRates r = group_rates(g, c);
  const double n = static_cast<double>(g.ranks), ppn = static_cast<double>(g.ranks_per_node);
  double spb = 0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::p2p;
  if (op == CollectiveOp::alltoall) {
    algorithm = CollectiveAlgorithm::pairwise;
    spb = (ppn - 1) / n / r.nvlink;
    if (g.nodes > 1) spb = std::max(spb, (n - ppn) / n / r.gpu_network);
  } else {
    spb = g.nodes == 1 ? 1 / r.nvlink : 1 / r.gpu_network;
  }
  for (NcclProtocol p : kProtocols) {
    const size_t k = pidx(p);
    const double latency = kRingBaseLatencyS[k] + (g.nodes > 1 ? kNetStepLatencyS[k] : kNvlinkStepLatencyS[k]);
    const double f = p == NcclProtocol::ll ? kLlFactor : p == NcclProtocol::ll128 ? kLl128Factor : 1.0;
    out.push_back({algorithm, p, latency, spb / f});
  }
}

CollectiveEstimate fastest(const std::vector<Candidate>& candidates, CollectiveOp op, double bytes,
                           const CollectiveGroupShape& g) {
  HCPSIM_ASSERT(!candidates.empty(), "no collective algorithm for " + to_string(op));
  const Candidate* best = nullptr;
  double best_s = 0;
  for (const Candidate& cand : candidates) {
    const double s = cand.latency_s + bytes * cand.seconds_per_byte;
    if (best == nullptr || s < best_s) {
      best = &cand;
      best_s = s;
    }
  }
  return {best_s, best->latency_s, bus_factor(op, g.ranks) / best->seconds_per_byte, best->algorithm,
          best->protocol};
}

}  // namespace

std::string to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce: return "all_reduce";
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::reduce_scatter: return "reduce_scatter";
    case CollectiveOp::alltoall: return "alltoall";
    case CollectiveOp::sendrecv: return "sendrecv";
  }
  return "?";
}

std::string to_string(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::ring: return "ring";
    case CollectiveAlgorithm::nvls: return "nvls";
    case CollectiveAlgorithm::nvls_tree: return "nvls_tree";
    case CollectiveAlgorithm::pairwise: return "pairwise";
    case CollectiveAlgorithm::p2p: return "p2p";
  }
  return "?";
}

std::string to_string(NcclProtocol p) {
  switch (p) {
    case NcclProtocol::ll: return "LL";
    case NcclProtocol::ll128: return "LL128";
    case NcclProtocol::simple: return "Simple";
  }
  return "?";
}

CollectiveGroupShape group_shape(const std::vector<int64_t>& gpus, const ClusterSpec& cluster) {
  HCPSIM_ASSERT(!gpus.empty(), "collective over an empty group");
  HCPSIM_ASSERT(cluster.gpus_per_node >= 1, "cluster without GPUs per node");
  std::map<int64_t, int64_t> per_node;
  for (int64_t g : gpus) {
    HCPSIM_ASSERT(g >= 0, "negative GPU index in a collective group");
    ++per_node[g / cluster.gpus_per_node];
  }
  CollectiveGroupShape s;
  s.ranks = static_cast<int64_t>(gpus.size());
  s.nodes = static_cast<int64_t>(per_node.size());
  s.ranks_per_node = 0;
  for (const auto& [node, count] : per_node) s.ranks_per_node = std::max(s.ranks_per_node, count);
  return s;
}

double bus_factor(CollectiveOp op, int64_t ranks) {
  HCPSIM_ASSERT(ranks >= 1, "collective needs at least one rank");
  const double n = static_cast<double>(ranks);
  if (op == CollectiveOp::all_reduce) return 2 * (n - 1) / n;
  if (op == CollectiveOp::sendrecv) return 1;
  return (n - 1) / n;
}

CollectiveEstimate ring_estimate(CollectiveOp op, double bytes, const CollectiveGroupShape& shape,
                                 const ClusterSpec& cluster) {
  HCPSIM_ASSERT(op == CollectiveOp::all_reduce || op == CollectiveOp::all_gather ||
                    op == CollectiveOp::reduce_scatter,
                "no ring for " + to_string(op));
  HCPSIM_ASSERT(bytes >= 0, "negative collective size");
  if (shape.ranks == 1) return {};
  std::vector<Candidate> candidates;
  add_ring(op, shape, cluster, candidates);
  return fastest(candidates, op, bytes, shape);
}

CollectiveEstimate collective_estimate(CollectiveOp op, double bytes, const CollectiveGroupShape& shape,
                                       const ClusterSpec& cluster) {
  HCPSIM_ASSERT(bytes >= 0, "negative collective size");
  if (shape.ranks == 1 && op != CollectiveOp::sendrecv) return {};
  std::vector<Candidate> candidates;
  if (op == CollectiveOp::alltoall || op == CollectiveOp::sendrecv) {
    add_point_to_point(op, shape, cluster, candidates);
  } else {
    add_ring(op, shape, cluster, candidates);
    if (op == CollectiveOp::all_reduce) add_nvls(shape, cluster, candidates);
  }
  return fastest(candidates, op, bytes, shape);
}

CollectiveEstimate collective_estimate(CollectiveOp op, double bytes, const std::vector<int64_t>& gpus,
                                       const ClusterSpec& cluster) {
  return collective_estimate(op, bytes, group_shape(gpus, cluster), cluster);
}

}  // namespace hcpsim::sim
