#pragma once
/// The cluster as a directed graph: GPUs, NVSwitches, NICs and leaf/spine switches joined by links, each
/// physical full-duplex link being two directed edges with a bandwidth and a latency. Routes are shortest paths
/// (fewest hops) with deterministic ECMP. Boost.Graph (vecS) stays inside topology.cpp.
///
/// Generated graph (ClusterSpec without an explicit topology), per node n:
///   gpu n.g ↔ nvswitch n                 ClusterSpec::nvlink bandwidth, latency nvlink.latency_s / 2
///   gpu n.g ↔ nic n.(g / gpus_per_nic)   PCIe (kPcieBytesPerS, latency 0)
///   nic ↔ its leaf                       ClusterSpec::network bandwidth, latency network.latency_s / 2
///   leaf ↔ every spine                   leaf_downlinks · network bandwidth / oversubscription / spines, latency 0
/// so that a GPU→GPU route inside a node costs nvlink.latency_s and one across nodes network.latency_s (switch
/// hop latencies are folded into the two link latencies). The NVSwitch domain of a node is one vertex (a
/// non-blocking crossbar); a GPU's NVLink bandwidth is its port to it. Spines exist when there are ≥ 2 leaves.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hcpsim/config/cluster_spec.hpp"

namespace hcpsim {

/// What a vertex is.
enum class VertexKind { gpu, nvswitch, nic, leaf, spine };
/// "gpu" | "nvswitch" | "nic" | "leaf" | "spine".
std::string to_string(VertexKind k);

/// The level a link belongs to, for utilisation reports: nvlink (GPU ↔ NVSwitch), pcie (GPU ↔ NIC),
/// network (NIC ↔ leaf, leaf ↔ spine, or any other switch link).
enum class LinkClass { nvlink = 0, pcie = 1, network = 2 };
/// Number of LinkClass values.
constexpr int kLinkClassCount = 3;
/// "nvlink" | "pcie" | "network".
std::string to_string(LinkClass c);

/// One directed edge.
struct TopologyLink {
  int64_t from = 0;                  ///< vertex index
  int64_t to = 0;                    ///< vertex index
  double bandwidth_bytes_per_s = 0;  ///< capacity in this direction, > 0
  double latency_s = 0;              ///< one-way propagation + switching, ≥ 0
  LinkClass link_class = LinkClass::network;
};

/// One vertex.
struct TopologyVertex {
  std::string name;  ///< e.g. "n0.gpu3", "n0.nvswitch", "n0.nic3", "leaf5", "spine0"
  VertexKind kind = VertexKind::gpu;
  int64_t node = -1;  ///< node index of GPUs, NVSwitches and NICs; −1 for leaf/spine switches
};

/// PCIe Gen5 x16 bandwidth per direction between a GPU and its NIC.
/// Source: PCI-SIG PCIe 5.0: 32 GT/s × 16 lanes, 128b/130b ≈ 63 GB/s per direction.
constexpr double kPcieBytesPerS = 63e9;

/// The graph. Immutable after construction except for the route cache (not thread-safe).
class Topology {
 public:
  /// Builds the graph of `cluster`: the explicit topology when cluster.topology has vertices, otherwise the
  /// generated node/fabric graph above.
  /// @throws InputError (key "cluster…") if the description is inconsistent: nics_per_node not dividing
  ///   gpus_per_node, leaf_downlinks or spines < 1, oversubscription < 1, a link naming a missing vertex or
  ///   with bandwidth ≤ 0, an unknown vertex kind, or a GPU that cannot reach every other GPU.
  static Topology from_cluster(const ClusterSpec& cluster);

  /// An empty graph (no vertices); use from_cluster().
  Topology();
  ~Topology();
  /// Copies vertices and links and rebuilds the graph (the route cache starts empty).
  Topology(const Topology&);
  /// As the copy constructor.
  Topology& operator=(const Topology&);
  /// Moves the graph and its cache.
  Topology(Topology&&) noexcept;
  /// Moves the graph and its cache.
  Topology& operator=(Topology&&) noexcept;

  /// Vertices; a vertex's index is its id (GPUs of node n come first in the generated graph, node-major).
  [[nodiscard]] const std::vector<TopologyVertex>& vertices() const;
  /// Directed links; a link's index is its id. Links 2k and 2k+1 are the two directions of one cable.
  [[nodiscard]] const std::vector<TopologyLink>& links() const;
  /// Number of GPUs (global GPU indices 0 … gpu_count()−1, node-major).
  [[nodiscard]] int64_t gpu_count() const;
  /// Vertex index of global GPU `gpu`. HCPSIM_ASSERT on a bad index.
  [[nodiscard]] int64_t gpu_vertex(int64_t gpu) const;
  /// Node of global GPU `gpu`.
  [[nodiscard]] int64_t gpu_node(int64_t gpu) const;
  /// Rail of global GPU `gpu`: the index, among its node's NICs in vertex order, of the NIC it is cabled to (its
  /// first by link id if several); −1 when it has none (a single-node cluster). GPUs of different nodes on one
  /// rail reach each other through one leaf of a rail-optimised fabric, which is what PXN routes towards (NCCL
  /// NCCL_PXN_DISABLE=0: data moves over NVLink to the GPU on the destination's rail, then out through its NIC).
  [[nodiscard]] int64_t gpu_rail(int64_t gpu) const;

  /// Link ids from GPU `src_gpu` to GPU `dst_gpu` along a shortest path (fewest hops). Among equal-cost next
  /// hops, the one at position hash(src, dst, flow_id, hop) mod count (hop order = link id order) is taken, so
  /// one flow always takes the same path and different flows spread. Empty when src == dst.
  /// only_path (optional): set to true when no hop had a choice, i.e. this is the one shortest path and every
  /// flow_id gives it (a caller may then reuse it for the pair).
  [[nodiscard]] std::vector<int64_t> route(int64_t src_gpu, int64_t dst_gpu, uint64_t flow_id,
                                           bool* only_path = nullptr) const;

  /// The links leaving vertex `vertex` on a shortest path to GPU `dst_gpu`, in ascending link id order: the
  /// equal-cost next hops route() chooses among at that vertex (it takes the one at
  /// ecmp_hash(ecmp_pair_key(src, dst), flow_id, hop) mod count). Empty when `vertex` is dst_gpu's vertex.
  /// HCPSIM_ASSERT on a bad vertex or GPU index, or when dst_gpu cannot be reached from `vertex`.
  [[nodiscard]] std::vector<int64_t> next_hops(int64_t vertex, int64_t dst_gpu) const;

  /// Sum of the latencies of `route`'s links, in seconds.
  [[nodiscard]] double route_latency_s(const std::vector<int64_t>& route) const;

  /// Opaque implementation (Boost graph, route cache); defined in topology.cpp.
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// 64-bit mix of three values (splitmix64 finaliser over a running combination); deterministic.
/// Source: Steele, Lea, Flood, "Fast splittable pseudorandom number generators" (OOPSLA 2014), mix constants.
uint64_t ecmp_hash(uint64_t a, uint64_t b, uint64_t c);

/// The first ecmp_hash argument of Topology::route for a message from GPU src_gpu to GPU dst_gpu: src · 2³² + dst.
uint64_t ecmp_pair_key(int64_t src_gpu, int64_t dst_gpu);

}  // namespace hcpsim
