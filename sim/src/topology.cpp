#include "hcpsim/sim/topology.hpp"

#include <algorithm>
#include <limits>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

namespace {

// Edge property: the link id (index into Topology::links()).
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                    boost::property<boost::edge_index_t, int64_t>>;

size_t idx(int64_t i) { return static_cast<size_t>(i); }

[[noreturn]] void bad(const std::string& key, const std::string& problem, const std::string& fix) {
  throw InputError(SourceLoc{}, key, problem, fix);
}

}  // namespace

std::string to_string(VertexKind k) {
  switch (k) {
    case VertexKind::gpu: return "gpu";
    case VertexKind::nvswitch: return "nvswitch";
    case VertexKind::nic: return "nic";
    case VertexKind::leaf: return "leaf";
    case VertexKind::spine: return "spine";
  }
  return "?";
}

std::string to_string(LinkClass c) {
  switch (c) {
    case LinkClass::nvlink: return "nvlink";
    case LinkClass::pcie: return "pcie";
    case LinkClass::network: return "network";
  }
  return "?";
}

uint64_t ecmp_pair_key(int64_t src_gpu, int64_t dst_gpu) {
  return static_cast<uint64_t>(src_gpu) * 0x100000000ULL + static_cast<uint64_t>(dst_gpu);
}

uint64_t ecmp_hash(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = 0;
  for (uint64_t v : {a, b, c}) {
    x ^= v + 0x9e3779b97f4a7c15ULL + (x << 6) + (x >> 2);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
  }
  return x;
}

/// Hop distances of every vertex to one destination vertex, 16 bits each when the graph has fewer than 65535
/// vertices (every distance is below the vertex count; 0xffff marks unreachable), else 32: a generated cluster
/// of CP = 4096 GPUs has about 9000 vertices and a table per destination GPU, 74 MB instead of 147 MB.
class DistanceTable {
 public:
  static constexpr int32_t kUnreachable = std::numeric_limits<int32_t>::max();
  /// Holds `dist` (kUnreachable where no path), narrowed when every finite value fits.
  explicit DistanceTable(const std::vector<int32_t>& dist) {
    if (dist.size() < kNarrowUnreachable) {
      narrow_.reserve(dist.size());
      for (int32_t d : dist) narrow_.push_back(d == kUnreachable ? kNarrowUnreachable : static_cast<uint16_t>(d));
    } else {
      wide_ = dist;
    }
  }
  /// Hop distance of vertex v, kUnreachable if none.
  int32_t operator[](size_t v) const {
    if (wide_.empty()) return narrow_[v] == kNarrowUnreachable ? kUnreachable : static_cast<int32_t>(narrow_[v]);
    return wide_[v];
  }

 private:
  static constexpr uint16_t kNarrowUnreachable = 0xffff;
  std::vector<uint16_t> narrow_;
  std::vector<int32_t> wide_;
};

struct Topology::Impl {
  std::vector<TopologyVertex> vertices;
  std::vector<TopologyLink> links;
  std::vector<int64_t> gpus;  ///< vertex of each global GPU
  std::vector<int64_t> gpu_rails;  ///< Topology::gpu_rail of each global GPU
  Graph graph;
  /// Hop distance of every vertex to a destination vertex, computed on first use.
  mutable std::map<int64_t, DistanceTable> distance_to;

  /// Fills gpu_rails: per vertex, the rank of each NIC among its node's NICs, then each GPU's first NIC link.
  void find_rails() {
    std::vector<int64_t> nic_rank(vertices.size(), -1);
    std::map<int64_t, int64_t> nics_seen;  // node → NICs numbered so far
    for (size_t u = 0; u < vertices.size(); ++u)
      if (vertices[u].kind == VertexKind::nic) nic_rank[u] = nics_seen[vertices[u].node]++;
    std::vector<int64_t> rail_of_vertex(vertices.size(), -1);
    for (const TopologyLink& l : links) {
      const auto from = static_cast<size_t>(l.from), to = static_cast<size_t>(l.to);
      if (vertices[from].kind == VertexKind::gpu && nic_rank[to] >= 0 && rail_of_vertex[from] < 0)
        rail_of_vertex[from] = nic_rank[to];
    }
    gpu_rails.clear();
    for (int64_t v : gpus) gpu_rails.push_back(rail_of_vertex[static_cast<size_t>(v)]);
  }

  int64_t add_vertex(std::string name, VertexKind kind, int64_t node) {
    vertices.push_back(TopologyVertex{std::move(name), kind, node});
    if (kind == VertexKind::gpu) gpus.push_back(static_cast<int64_t>(vertices.size() - 1));
    return static_cast<int64_t>(vertices.size() - 1);
  }
  void add_cable(int64_t a, int64_t b, double bandwidth, double latency, LinkClass c) {
    links.push_back(TopologyLink{a, b, bandwidth, latency, c});
    links.push_back(TopologyLink{b, a, bandwidth, latency, c});
  }
  void build_graph() {
    // Called once on a fresh Impl; vertices are added one by one because copying or swapping a Boost graph
    // instantiates copy_impl, which trips -Wmaybe-uninitialized on g++ 12.
    HCPSIM_ASSERT(boost::num_vertices(graph) == 0, "build_graph called twice");
    for (size_t v = 0; v < vertices.size(); ++v) boost::add_vertex(graph);
    for (size_t l = 0; l < links.size(); ++l)
      boost::add_edge(idx(links[l].from), idx(links[l].to), static_cast<int64_t>(l), graph);
  }

  const DistanceTable& distances(int64_t dst) const {
    auto it = distance_to.find(dst);
    if (it != distance_to.end()) return it->second;
    // Every link has a reverse twin, so hop distances *to* dst equal distances *from* dst.
    thread_local std::vector<int32_t> dist;  // the search's scratch; the table keeps it narrowed
    dist.assign(vertices.size(), DistanceTable::kUnreachable);
    dist[idx(dst)] = 0;
    auto rec = boost::record_distances(boost::make_iterator_property_map(dist.begin(),
                                                                         boost::get(boost::vertex_index, graph)),
                                       boost::on_tree_edge());
    boost::breadth_first_search(graph, boost::vertex(idx(dst), graph), boost::visitor(boost::make_bfs_visitor(rec)));
    return distance_to.emplace(dst, DistanceTable(dist)).first->second;
  }

  /// The links out of v on a shortest path to vertex dst (v != dst, dst reachable), ascending by link id, into out.
  void next_hops(int64_t v, int64_t dst, std::vector<int64_t>& out) const {
    const auto& dist = distances(dst);
    out.clear();
    for (auto [e, end] = boost::out_edges(idx(v), graph); e != end; ++e) {
      const auto t = boost::target(*e, graph);
      if (dist[t] + 1 == dist[idx(v)]) out.push_back(boost::get(boost::edge_index, graph, *e));
    }
    HCPSIM_ASSERT(!out.empty(), "no next hop on a shortest path");
    std::sort(out.begin(), out.end());
  }
};

Topology::Topology() : impl_(std::make_unique<Impl>()) {}
Topology::~Topology() = default;
Topology::Topology(const Topology& o) : impl_(std::make_unique<Impl>()) {
  // Rebuild the graph rather than copy it (the route cache is not copied either).
  impl_->vertices = o.impl_->vertices;
  impl_->links = o.impl_->links;
  impl_->gpus = o.impl_->gpus;
  impl_->gpu_rails = o.impl_->gpu_rails;
  impl_->build_graph();
}
Topology& Topology::operator=(const Topology& o) {
  if (this != &o) *this = Topology(o);
  return *this;
}
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

const std::vector<TopologyVertex>& Topology::vertices() const { return impl_->vertices; }
const std::vector<TopologyLink>& Topology::links() const { return impl_->links; }
int64_t Topology::gpu_count() const { return static_cast<int64_t>(impl_->gpus.size()); }
int64_t Topology::gpu_vertex(int64_t gpu) const {
  HCPSIM_ASSERT(gpu >= 0, "negative GPU index");
  HCPSIM_ASSERT(gpu < gpu_count(), "GPU index " + std::to_string(gpu) + " beyond the topology's GPUs");
  return impl_->gpus[idx(gpu)];
}
int64_t Topology::gpu_node(int64_t gpu) const { return impl_->vertices[idx(gpu_vertex(gpu))].node; }

int64_t Topology::gpu_rail(int64_t gpu) const {
  (void)gpu_vertex(gpu);  // checks the index
  return impl_->gpu_rails[idx(gpu)];
}

std::vector<int64_t> Topology::route(int64_t src_gpu, int64_t dst_gpu, uint64_t flow_id, bool* only_path) const {
  const int64_t src = gpu_vertex(src_gpu);
  const int64_t dst = gpu_vertex(dst_gpu);
  std::vector<int64_t> path;
  if (only_path != nullptr) *only_path = true;
  if (src == dst) return path;
  const auto& dist = impl_->distances(dst);
  HCPSIM_ASSERT(dist[idx(src)] != std::numeric_limits<int32_t>::max(), "GPU unreachable");
  int64_t v = src;
  path.reserve(static_cast<size_t>(dist[idx(src)]));  // one link per hop of a shortest path
  // Reused across calls (a route per message): no allocation once it has grown to the largest out-degree.
  thread_local std::vector<int64_t> candidates;
  for (uint64_t hop = 0; v != dst; ++hop) {
    impl_->next_hops(v, dst, candidates);
    if (only_path != nullptr && candidates.size() > 1) *only_path = false;
    const uint64_t h = ecmp_hash(ecmp_pair_key(src_gpu, dst_gpu), flow_id, hop);
    const int64_t link = candidates[static_cast<size_t>(h % candidates.size())];
    path.push_back(link);
    v = impl_->links[idx(link)].to;
  }
  return path;
}

std::vector<int64_t> Topology::next_hops(int64_t vertex, int64_t dst_gpu) const {
  HCPSIM_ASSERT(vertex >= 0 && vertex < static_cast<int64_t>(impl_->vertices.size()), "vertex index out of range");
  const int64_t dst = gpu_vertex(dst_gpu);
  std::vector<int64_t> out;
  if (vertex == dst) return out;
  HCPSIM_ASSERT(impl_->distances(dst)[idx(vertex)] != std::numeric_limits<int32_t>::max(), "GPU unreachable");
  impl_->next_hops(vertex, dst, out);
  return out;
}

double Topology::route_latency_s(const std::vector<int64_t>& route) const {
  double s = 0;
  for (int64_t l : route) s += impl_->links[idx(l)].latency_s;
  return s;
}

namespace {

void build_explicit(const ExplicitTopology& t, Topology::Impl& g) {
  for (size_t i = 0; i < t.vertices.size(); ++i) {
    const auto& v = t.vertices[i];
    const std::string key = "cluster.topology.vertices[" + std::to_string(i) + "]";
    VertexKind kind{};
    if (v.kind == "gpu") kind = VertexKind::gpu;
    else if (v.kind == "nvswitch") kind = VertexKind::nvswitch;
    else if (v.kind == "nic") kind = VertexKind::nic;
    else if (v.kind == "leaf") kind = VertexKind::leaf;
    else if (v.kind == "spine") kind = VertexKind::spine;
    else bad(key + ".kind", "unknown vertex kind '" + v.kind + "'", "use gpu, nvswitch, nic, leaf or spine");
    if (kind == VertexKind::gpu && v.node < 0) bad(key + ".node", "a gpu vertex needs its node", "add 'node: <index>'");
    g.add_vertex(v.name, kind, v.node);
  }
  const auto n = static_cast<int64_t>(t.vertices.size());
  for (size_t i = 0; i < t.links.size(); ++i) {
    const auto& l = t.links[i];
    const std::string key = "cluster.topology.links[" + std::to_string(i) + "]";
    if (l.a < 0 || l.a >= n || l.b < 0 || l.b >= n || l.a == l.b)
      bad(key, "link joins missing or identical vertices", "name two different vertices listed under vertices");
    if (!(l.bandwidth_bytes_per_s > 0)) bad(key + ".bandwidth_GB_per_s", "must be > 0", "give the per-direction rate");
    if (!(l.latency_s >= 0)) bad(key + ".latency_us", "must be ≥ 0", "give the one-way latency");
    const VertexKind ka = g.vertices[idx(l.a)].kind;
    const VertexKind kb = g.vertices[idx(l.b)].kind;
    LinkClass c = LinkClass::network;
    if (ka == VertexKind::nvswitch || kb == VertexKind::nvswitch ||
        (ka == VertexKind::gpu && kb == VertexKind::gpu))
      c = LinkClass::nvlink;
    else if (ka == VertexKind::gpu || kb == VertexKind::gpu)
      c = LinkClass::pcie;
    g.add_cable(l.a, l.b, l.bandwidth_bytes_per_s, l.latency_s, c);
  }
  if (g.gpus.empty()) bad("cluster.topology.vertices", "no gpu vertex", "list the GPUs with kind: gpu");
}

void build_generated(const ClusterSpec& cluster, Topology::Impl& g) {
  ClusterSpec c = cluster;
  if (c.nics_per_node == 0) c.nics_per_node = c.gpus_per_node;  // 0 = one NIC per GPU
  const FabricSpec& f = c.fabric;
  if (c.nics_per_node < 1 || c.gpus_per_node % c.nics_per_node != 0)
    bad("cluster.nics_per_node", "must be ≥ 1 and divide gpus_per_node (" + std::to_string(c.gpus_per_node) + ")",
        "set nics_per_node to a divisor of gpus_per_node, e.g. " + std::to_string(c.gpus_per_node));
  if (f.leaf_downlinks < 1) bad("cluster.fabric.leaf_downlinks", "must be ≥ 1", "give the NIC ports per leaf, e.g. 32");
  if (f.spines < 1) bad("cluster.fabric.spines", "must be ≥ 1", "give the spine switch count, e.g. 8");
  if (!(f.oversubscription >= 1))
    bad("cluster.fabric.oversubscription", "must be ≥ 1", "use 1 for a non-blocking fabric, 2 for 2:1, ...");
  const int64_t gpus_per_nic = c.gpus_per_node / c.nics_per_node;
  std::vector<int64_t> nic_vertex;  // global NIC index → vertex
  for (int64_t n = 0; n < c.nodes; ++n) {
    std::string p = "n";  // not "n" + std::string: g++ 12 -Wrestrict false positive
    p += std::to_string(n);
    p += '.';
    const int64_t first_gpu = static_cast<int64_t>(g.vertices.size());
    for (int64_t k = 0; k < c.gpus_per_node; ++k) g.add_vertex(p + "gpu" + std::to_string(k), VertexKind::gpu, n);
    const int64_t sw = g.add_vertex(p + "nvswitch", VertexKind::nvswitch, n);
    for (int64_t k = 0; k < c.gpus_per_node; ++k)
      g.add_cable(first_gpu + k, sw, c.nvlink.bandwidth_bytes_per_s, c.nvlink.latency_s / 2, LinkClass::nvlink);
    if (c.nodes == 1) continue;  // a single node needs no NICs
    for (int64_t r = 0; r < c.nics_per_node; ++r) {
      const int64_t nic = g.add_vertex(p + "nic" + std::to_string(r), VertexKind::nic, n);
      nic_vertex.push_back(nic);
      for (int64_t k = r * gpus_per_nic; k < (r + 1) * gpus_per_nic; ++k)
        g.add_cable(first_gpu + k, nic, kPcieBytesPerS, 0, LinkClass::pcie);
    }
  }
  if (c.nodes == 1) return;
  // Leaves: rail-optimised = one per (scalable unit, rail); fat tree = consecutive NICs.
  const auto nic_count = static_cast<int64_t>(nic_vertex.size());
  std::vector<int64_t> leaf_of_nic(idx(nic_count));
  int64_t leaves = 0;
  if (f.kind == FabricSpec::Kind::rail_optimized) {
    const int64_t units = (c.nodes + f.leaf_downlinks - 1) / f.leaf_downlinks;
    leaves = units * c.nics_per_node;
    for (int64_t i = 0; i < nic_count; ++i) {
      const int64_t node = i / c.nics_per_node;
      const int64_t rail = i % c.nics_per_node;
      leaf_of_nic[idx(i)] = (node / f.leaf_downlinks) * c.nics_per_node + rail;
    }
  } else {
    leaves = (nic_count + f.leaf_downlinks - 1) / f.leaf_downlinks;
    for (int64_t i = 0; i < nic_count; ++i) leaf_of_nic[idx(i)] = i / f.leaf_downlinks;
  }
  const auto first_leaf = static_cast<int64_t>(g.vertices.size());
  for (int64_t l = 0; l < leaves; ++l) g.add_vertex(std::string("leaf").append(std::to_string(l)), VertexKind::leaf, -1);
  for (int64_t i = 0; i < nic_count; ++i)
    g.add_cable(nic_vertex[idx(i)], first_leaf + leaf_of_nic[idx(i)], c.network.bandwidth_bytes_per_s,
                c.network.latency_s / 2, LinkClass::network);
  if (leaves < 2) return;
  const auto first_spine = static_cast<int64_t>(g.vertices.size());
  for (int64_t s = 0; s < f.spines; ++s) g.add_vertex(std::string("spine").append(std::to_string(s)), VertexKind::spine, -1);
  const double uplink = static_cast<double>(f.leaf_downlinks) * c.network.bandwidth_bytes_per_s /
                        f.oversubscription / static_cast<double>(f.spines);
  for (int64_t l = 0; l < leaves; ++l)
    for (int64_t s = 0; s < f.spines; ++s) g.add_cable(first_leaf + l, first_spine + s, uplink, 0, LinkClass::network);
}

}  // namespace

Topology Topology::from_cluster(const ClusterSpec& cluster) {
  Topology t;
  if (!cluster.topology.vertices.empty()) {
    build_explicit(cluster.topology, *t.impl_);
  } else {
    build_generated(cluster, *t.impl_);
  }
  t.impl_->build_graph();
  t.impl_->find_rails();
  const auto& dist = t.impl_->distances(t.impl_->gpus.front());
  for (size_t k = 0; k < t.impl_->gpus.size(); ++k)
    if (dist[idx(t.impl_->gpus[k])] == std::numeric_limits<int32_t>::max())
      bad("cluster.topology", "GPU '" + t.impl_->vertices[idx(t.impl_->gpus[k])].name + "' cannot reach GPU '" +
                                  t.impl_->vertices[idx(t.impl_->gpus.front())].name + "'",
          "add links so that every GPU is connected");
  return t;
}

}  // namespace hcpsim
