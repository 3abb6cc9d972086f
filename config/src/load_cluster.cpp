// The `cluster:` section: a preset or an explicit node (GPU, NVLink, network), the node count, NICs, the
// inter-node fabric and an explicit topology graph. The GPU keys are read by load_gpu.cpp.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "scenario_sections.hpp"

namespace hcpsim {
namespace {

/// cluster.nvlink / cluster.network over `base` (the preset's link); `all_required` (no preset) asks for both keys.
LinkSpec read_link(YamlReader& r, const YAML::Node& m, const std::string& P, bool all_required, LinkSpec base) {
  r.check_map(m, P, {"bandwidth_GB_per_s", "latency_us"});
  LinkSpec l = std::move(base);
  if (all_required)
    for (const char* k : {"bandwidth_GB_per_s", "latency_us"})
      if (!m[k]) r.fail(m, P, std::string("explicit link without '") + k + "'", "add '" + P + "." + k + "'");
  if (m["bandwidth_GB_per_s"])
    l.bandwidth_bytes_per_s = r.plausible(m["bandwidth_GB_per_s"], P + ".bandwidth_GB_per_s", plausible::kLinkBandwidth) * 1e9;
  if (m["latency_us"]) l.latency_s = r.plausible(m["latency_us"], P + ".latency_us", plausible::kLatency) / 1e6;
  return l;
}

void read_fabric(YamlReader& r, const YAML::Node& m, const std::string& P, FabricSpec& f) {
  r.check_map(m, P, {"kind", "leaf_downlinks", "spines", "oversubscription"});
  if (m["kind"]) {
    const std::string k = r.get_string(m["kind"], P + ".kind");
    if (k == "rail_optimized") f.kind = FabricSpec::Kind::rail_optimized;
    else if (k == "fat_tree") f.kind = FabricSpec::Kind::fat_tree;
    else r.fail(m["kind"], P + ".kind", "unknown fabric '" + k + "'", "use one of: rail_optimized, fat_tree");
  }
  for (const char* key : {"leaf_downlinks", "spines"}) {
    if (!m[key]) continue;
    const int64_t v = r.get_int(m[key], P + "." + key);
    if (v < 1) r.fail(m[key], P + "." + key, "must be at least 1", "give a positive count, e.g. 32");
    (std::string(key) == "spines" ? f.spines : f.leaf_downlinks) = v;
  }
  if (m["oversubscription"]) {
    f.oversubscription = r.plausible(m["oversubscription"], P + ".oversubscription", plausible::kOversubscription);
  }
}

/// cluster.topology.vertices into `t`: one gpu vertex per GPU of the `world_size`. Returns name → vertex index.
std::map<std::string, int64_t> read_vertices(YamlReader& r, const YAML::Node& m, const std::string& P,
                                             int64_t world_size, ExplicitTopology& t) {
  if (!m["vertices"] || !m["vertices"].IsSequence() || m["vertices"].size() == 0)
    r.fail(m, P + ".vertices", "expected a non-empty list of vertices",
           "write '" + P + ".vertices: [{name: g0, kind: gpu, node: 0}, ...]'");
  std::map<std::string, int64_t> index;
  const YAML::Node vs = m["vertices"];
  for (size_t i = 0; i < vs.size(); ++i) {
    const std::string vp = P + ".vertices[" + std::to_string(i) + "]";
    r.check_map(vs[i], vp, {"name", "kind", "node"});
    if (!vs[i]["name"] || !vs[i]["kind"]) r.fail(vs[i], vp, "a vertex needs 'name' and 'kind'", "add both keys");
    ExplicitTopology::Vertex v;
    v.name = r.get_string(vs[i]["name"], vp + ".name");
    v.kind = r.get_string(vs[i]["kind"], vp + ".kind");
    const std::vector<std::string> kinds{"gpu", "nvswitch", "nic", "leaf", "spine"};
    if (std::find(kinds.begin(), kinds.end(), v.kind) == kinds.end())
      r.fail(vs[i]["kind"], vp + ".kind", "unknown vertex kind '" + v.kind + "'",
             "use one of: gpu, nvswitch, nic, leaf, spine");
    if (vs[i]["node"]) v.node = r.get_int(vs[i]["node"], vp + ".node");
    if (v.kind == "gpu" && v.node < 0) r.fail(vs[i], vp + ".node", "a gpu vertex needs its node", "add 'node: <index>'");
    if (!index.emplace(v.name, static_cast<int64_t>(t.vertices.size())).second)
      r.fail(vs[i]["name"], vp + ".name", "duplicate vertex name '" + v.name + "'", "give every vertex its own name");
    t.vertices.push_back(v);
  }
  int64_t gpus = 0;
  for (const auto& v : t.vertices) gpus += v.kind == "gpu" ? 1 : 0;
  if (gpus != world_size)
    r.fail(m["vertices"], P + ".vertices",
           "lists " + std::to_string(gpus) + " gpu vertices but nodes · gpus_per_node = " + std::to_string(world_size),
           "list one gpu vertex per GPU, or fix cluster.nodes / cluster.gpus_per_node");
  return index;
}

/// cluster.topology.links into `t`, their ends looked up by name in `index`.
void read_links(YamlReader& r, const YAML::Node& m, const std::string& P, const std::map<std::string, int64_t>& index,
                ExplicitTopology& t) {
  const YAML::Node ls = m["links"];
  if (!ls || !ls.IsSequence())
    r.fail(m, P + ".links", "expected a list of links",
           "write '" + P + ".links: [{a: g0, b: sw0, bandwidth_GB_per_s: 450, latency_us: 0.5}, ...]'");
  for (size_t i = 0; i < ls.size(); ++i) {
    const std::string lp = P + ".links[" + std::to_string(i) + "]";
    r.check_map(ls[i], lp, {"a", "b", "bandwidth_GB_per_s", "latency_us"});
    ExplicitTopology::Link l;
    for (const char* end : {"a", "b"}) {
      if (!ls[i][end]) r.fail(ls[i], lp, std::string("a link needs '") + end + "'", "name both end vertices");
      const std::string name = r.get_string(ls[i][end], lp + "." + end);
      const auto it = index.find(name);
      if (it == index.end())
        r.fail(ls[i][end], lp + "." + end, "unknown vertex '" + name + "'", "use a name listed under " + P + ".vertices");
      (std::string(end) == "a" ? l.a : l.b) = it->second;
    }
    if (l.a == l.b) r.fail(ls[i], lp, "a link joins a vertex to itself", "name two different vertices");
    if (!ls[i]["bandwidth_GB_per_s"]) r.fail(ls[i], lp, "a link needs 'bandwidth_GB_per_s'", "add the per-direction rate");
    l.bandwidth_bytes_per_s =
        r.plausible(ls[i]["bandwidth_GB_per_s"], lp + ".bandwidth_GB_per_s", plausible::kLinkBandwidth) * 1e9;
    if (ls[i]["latency_us"]) l.latency_s = r.plausible(ls[i]["latency_us"], lp + ".latency_us", plausible::kLatency) / 1e6;
    t.links.push_back(l);
  }
}

/// cluster.topology: {vertices: [{name, kind, node}], links: [{a, b, bandwidth_GB_per_s, latency_us}]}.
void read_topology(YamlReader& r, const YAML::Node& m, const std::string& P, int64_t world_size, ExplicitTopology& t) {
  r.check_map(m, P, {"vertices", "links"});
  t = ExplicitTopology{};
  const auto index = read_vertices(r, m, P, world_size, t);
  read_links(r, m, P, index, t);
}

}  // namespace

void read_cluster(YamlReader& r, const YAML::Node& m, AttentionBackend backend,
                  const std::optional<std::string>& te_version, ClusterSpec& c) {
  const std::string P = "cluster";
  const auto use_kernel = [&](GpuSpec& g) {
    apply_attention_kernel(g, resolve_attention_kernel(g.name, te_version, backend).kernel);
  };
  if (!m) {  // default: one DGX H100 node
    c = *cluster_preset("dgx-h100", 1);
    use_kernel(c.gpu);
    return;
  }
  r.check_map(m, P, kClusterKeys);
  const int64_t nodes = m["nodes"] ? r.plausible_int(m["nodes"], P + ".nodes", plausible::kNodes) : 1;
  std::string names;
  for (const auto& n : cluster_preset_names()) names += (names.empty() ? "" : ", ") + n;
  if (m["preset"]) {
    const std::string name = r.get_string(m["preset"], P + ".preset");
    auto preset = cluster_preset(name, nodes);
    if (!preset) r.fail(m["preset"], P + ".preset", "unknown preset '" + name + "'", "use one of: " + names);
    c = *preset;
    use_kernel(c.gpu);
  } else {
    for (const char* key : {"gpus_per_node", "gpu", "nvlink", "network", "message_latency_us"})
      if (!m[key])
        r.fail(m, P, std::string("explicit cluster without '") + key + "'",
               std::string("add 'cluster.") + key + "', or use 'cluster.preset' (" + names + ")");
    c = ClusterSpec{};
    c.nodes = nodes;
  }
  if (m["gpus_per_node"])
    c.gpus_per_node = r.plausible_int(m["gpus_per_node"], P + ".gpus_per_node", plausible::kGpusPerNode);
  if (m["gpu"]) read_gpu(r, m["gpu"], P + ".gpu", !m["preset"], c.gpu);
  if (m["nvlink"]) c.nvlink = read_link(r, m["nvlink"], P + ".nvlink", !m["preset"], c.nvlink);
  if (m["network"]) c.network = read_link(r, m["network"], P + ".network", !m["preset"], c.network);
  if (m["message_latency_us"])
    c.message_latency_s = r.plausible(m["message_latency_us"], P + ".message_latency_us", plausible::kLatency) / 1e6;
  if (m["nics_per_node"]) {
    c.nics_per_node = r.get_int(m["nics_per_node"], P + ".nics_per_node");
    if (c.nics_per_node < 1 || c.gpus_per_node % c.nics_per_node != 0)
      r.fail(m["nics_per_node"], P + ".nics_per_node",
             "must be ≥ 1 and divide gpus_per_node (" + std::to_string(c.gpus_per_node) + ")",
             "give a divisor of gpus_per_node, e.g. " + std::to_string(c.gpus_per_node) + " (one NIC per GPU)");
  }
  if (m["fabric"]) read_fabric(r, m["fabric"], P + ".fabric", c.fabric);
  if (m["topology"]) read_topology(r, m["topology"], P + ".topology", c.world_size(), c.topology);
}

}  // namespace hcpsim
