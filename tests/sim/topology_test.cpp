#include <set>
#include <string>

#include "catch_compat.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/sim/topology.hpp"

using namespace hcpsim;

namespace {

ClusterSpec h100(int64_t nodes) {
  auto c = cluster_preset("dgx-h100", nodes);
  REQUIRE(c.has_value());
  return *c;
}

const char* kScenario = R"(schema_version: 1
model: {num_attention_heads: 8, num_query_groups: 8, kv_channels: 64, seq_length: 1024}
parallel: {context_parallel_size: 2, cp_comm_type: p2p}
)";

std::string load_error(const std::string& text) {
  try {
    (void)load_scenario_text(text, "t.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("topology: two DGX H100 nodes on a rail-optimised fabric", "[core][topology]") {
  const Topology t = Topology::from_cluster(h100(2));
  // Per node 8 GPUs + 1 NVSwitch + 8 NICs = 17; 1 scalable unit × 8 rails = 8 leaves; 8 spines: 34 + 16 = 50.
  REQUIRE(t.vertices().size() == 50);
  // Cables: per node 8 NVLink + 8 PCIe; 16 NIC–leaf; 8 × 8 leaf–spine: 32 + 16 + 64 = 112 → 224 directed links.
  REQUIRE(t.links().size() == 224);
  REQUIRE(t.gpu_count() == 16);
  REQUIRE(t.gpu_node(9) == 1);
  // Inside a node: gpu → nvswitch → gpu, NVLink4 450 GB/s, latency 2 · 0.5 µs.
  const auto in = t.route(0, 1, 0);
  REQUIRE(in.size() == 2);
  for (int64_t l : in) {
    REQUIRE(t.links()[static_cast<size_t>(l)].link_class == LinkClass::nvlink);
    REQUIRE(t.links()[static_cast<size_t>(l)].bandwidth_bytes_per_s == 18 * 20.6e9);
  }
  REQUIRE(t.route_latency_s(in) == Approx(3.4e-6).epsilon(1e-12));  // NCCL ring Simple NVLink step
  // Same rail across nodes: gpu → nic → leaf → nic → gpu, no spine.
  REQUIRE(t.route(0, 8, 0).size() == 4);
  REQUIRE(t.route_latency_s(t.route(0, 8, 0)) == Approx(14e-6).epsilon(1e-12));  // NCCL ring Simple network step
  // Different rails: through a spine (6 links); ECMP spreads flow ids over the 8 spines, deterministically.
  std::set<int64_t> spines;
  for (uint64_t f = 0; f < 64; ++f) {
    const auto r = t.route(0, 9, f);
    REQUIRE(r.size() == 6);
    REQUIRE(r == t.route(0, 9, f));
    spines.insert(t.links()[static_cast<size_t>(r[2])].to);
  }
  REQUIRE(spines.size() > 1);
  REQUIRE(t.route(3, 3, 0).empty());
}

TEST_CASE("topology: fat tree with 2:1 oversubscription sizes the leaf–spine links", "[core][topology]") {
  ClusterSpec c = h100(8);
  c.fabric.kind = FabricSpec::Kind::fat_tree;
  c.fabric.leaf_downlinks = 16;
  c.fabric.spines = 4;
  c.fabric.oversubscription = 2;
  const Topology t = Topology::from_cluster(c);
  // 64 NICs / 16 per leaf = 4 leaves. Leaf–spine link: 16 · 48 GB/s / 2 / 4 spines = 96 GB/s.
  int64_t leaves = 0;
  for (const auto& v : t.vertices()) leaves += v.kind == VertexKind::leaf ? 1 : 0;
  REQUIRE(leaves == 4);
  bool found = false;
  for (const auto& l : t.links()) {
    if (t.vertices()[static_cast<size_t>(l.from)].kind == VertexKind::leaf &&
        t.vertices()[static_cast<size_t>(l.to)].kind == VertexKind::spine) {
      REQUIRE(l.bandwidth_bytes_per_s == 96e9);
      found = true;
    }
  }
  REQUIRE(found);
  // NICs 0–15 (nodes 0, 1) share leaf 0: node 0 → node 1 stays below the spines.
  REQUIRE(t.route(0, 8, 0).size() == 4);
  REQUIRE(t.route(0, 63, 0).size() == 6);
}

TEST_CASE("topology: explicit vertex and link list", "[core][topology]") {
  ClusterSpec c;
  c.topology.vertices = {{"a", "gpu", 0}, {"b", "gpu", 0}, {"sw", "nvswitch", 0}, {"c", "gpu", 1}};
  c.topology.links = {{0, 2, 100e9, 1e-6}, {1, 2, 100e9, 1e-6}, {1, 3, 10e9, 2e-6}};
  const Topology t = Topology::from_cluster(c);
  REQUIRE(t.gpu_count() == 3);
  REQUIRE(t.gpu_node(2) == 1);
  // a → sw → b → c: 3 links, 4 µs.
  const auto r = t.route(0, 2, 0);
  REQUIRE(r.size() == 3);
  REQUIRE(t.route_latency_s(r) == Approx(4e-6).epsilon(1e-15));
  REQUIRE(t.links()[static_cast<size_t>(r[2])].link_class == LinkClass::nvlink);  // gpu–gpu is NVLink
}

TEST_CASE("topology: inconsistent descriptions are InputErrors with key and fix", "[core][topology]") {
  ClusterSpec c;
  c.topology.vertices = {{"a", "gpu", 0}, {"b", "gpu", 0}};
  c.topology.links = {{0, 5, 1e9, 0}};
  try {
    (void)Topology::from_cluster(c);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "cluster.topology.links[0]");
    REQUIRE(e.fix().find("vertices") != std::string::npos);
  }
  c.topology.links = {};
  try {
    (void)Topology::from_cluster(c);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "cluster.topology");
    REQUIRE(e.fix().find("connected") != std::string::npos);
  }
  ClusterSpec d = h100(2);
  d.nics_per_node = 3;
  try {
    (void)Topology::from_cluster(d);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "cluster.nics_per_node");
  }
}

TEST_CASE("topology: cluster.fabric, nics_per_node, gpu constants and an explicit topology load from YAML",
          "[core][topology]") {
  const auto s = load_scenario_text(std::string(kScenario) + R"(cluster:
  preset: dgx-h100
  nodes: 4
  nics_per_node: 4
  fabric: {kind: fat_tree, leaf_downlinks: 8, spines: 2, oversubscription: 2}
  gpu: {attn_fwd_efficiency: 0.5, kernel_launch_overhead_us: 2, compute_slowdown_during_comm: 1.25}
)", "t.yaml");
  REQUIRE(s.cluster.nics_per_node == 4);
  REQUIRE(s.cluster.fabric.kind == FabricSpec::Kind::fat_tree);
  REQUIRE(s.cluster.fabric.leaf_downlinks == 8);
  REQUIRE(s.cluster.fabric.spines == 2);
  REQUIRE(s.cluster.fabric.oversubscription == 2);
  REQUIRE(s.cluster.gpu.attn_fwd_efficiency == 0.5);
  REQUIRE(s.cluster.gpu.attn_fwd_table.empty());     // the scalar replaces the preset's forward table
  REQUIRE(!s.cluster.gpu.attn_bwd_table.empty());    // the backward table stays
  REQUIRE(s.cluster.gpu.kernel_launch_overhead_s == 2e-6);
  REQUIRE(s.cluster.gpu.compute_slowdown_during_comm == 1.25);

  const auto e = load_scenario_text(std::string(kScenario) + R"(cluster:
  preset: dgx-h100
  gpus_per_node: 2
  topology:
    vertices: [{name: g0, kind: gpu, node: 0}, {name: g1, kind: gpu, node: 0}, {name: sw, kind: nvswitch, node: 0}]
    links: [{a: g0, b: sw, bandwidth_GB_per_s: 100, latency_us: 0.5}, {a: g1, b: sw, bandwidth_GB_per_s: 100}]
)", "t.yaml");
  REQUIRE(e.cluster.topology.vertices.size() == 3);
  REQUIRE(e.cluster.topology.links.size() == 2);
  REQUIRE(e.cluster.topology.links[0].bandwidth_bytes_per_s == 100e9);
  REQUIRE(e.cluster.topology.links[0].latency_s == 0.5e-6);
  REQUIRE(Topology::from_cluster(e.cluster).route(0, 1, 0).size() == 2);
}

TEST_CASE("topology: bad cluster YAML names file:line:col, key and fix", "[core][topology]") {
  REQUIRE(load_error(std::string(kScenario) + "cluster: {preset: dgx-h100, fabric: {kind: torus}}\n")
              .find("t.yaml:4:") != std::string::npos);
  REQUIRE(load_error(std::string(kScenario) + "cluster: {preset: dgx-h100, fabric: {kind: torus}}\n")
              .find("cluster.fabric.kind: unknown fabric 'torus'; fix: use one of: rail_optimized, fat_tree") !=
          std::string::npos);
  REQUIRE(load_error(std::string(kScenario) + "cluster: {preset: dgx-h100, fabric: {spine: 2}}\n")
              .find("did you mean 'cluster.fabric.spines'?") != std::string::npos);
  REQUIRE(load_error(std::string(kScenario) + "cluster: {preset: dgx-h100, nics_per_node: 3}\n")
              .find("cluster.nics_per_node: must be ≥ 1 and divide gpus_per_node (8)") != std::string::npos);
  REQUIRE(load_error(std::string(kScenario) + "cluster: {preset: dgx-h100, fabric: {oversubscription: 0.5}}\n")
              .find("0.5 is outside the plausible range [1, 1000] (1:1 (non-blocking) to 1000:1); fix: give a value in "
                    "[1, 1000]") != std::string::npos);
  const std::string bad_link = std::string(kScenario) + R"(cluster:
  preset: dgx-h100
  gpus_per_node: 1
  topology:
    vertices: [{name: g0, kind: gpu, node: 0}]
    links: [{a: g0, b: gx, bandwidth_GB_per_s: 1}]
)";
  REQUIRE(load_error(bad_link).find("cluster.topology.links[0].b: unknown vertex 'gx'; fix: use a name listed under "
                                    "cluster.topology.vertices") != std::string::npos);
  const std::string count = std::string(kScenario) + R"(cluster:
  preset: dgx-h100
  topology:
    vertices: [{name: g0, kind: gpu, node: 0}]
    links: []
)";
  REQUIRE(load_error(count).find("lists 1 gpu vertices but nodes · gpus_per_node = 8") != std::string::npos);
}

TEST_CASE("topology: an attention efficiency table loads from cluster.gpu and must be a full grid", "[core][topology]") {
  const auto s = load_scenario_text(std::string(kScenario) + R"(cluster:
  preset: dgx-a100
  gpu:
    attn_fwd_table:
      - {head_dim: 64, q_rows: 1024, kv_rows: 1024, efficiency: 0.3}
      - {head_dim: 64, q_rows: 1024, kv_rows: 4096, efficiency: 0.4}
      - {head_dim: 64, q_rows: 4096, kv_rows: 1024, efficiency: 0.4}
      - {head_dim: 64, q_rows: 4096, kv_rows: 4096, causal: false, efficiency: 0.5}
)", "t.yaml");
  REQUIRE(s.cluster.gpu.attn_fwd_table.size() == 4);
  REQUIRE(s.cluster.gpu.attn_fwd_table[3].efficiency == 0.5);
  // The scenario's forward table replaces the preset's; the A100 preset's FlashAttention-2 backward table stays.
  REQUIRE(s.cluster.gpu.attn_bwd_table.size() == cluster_preset("dgx-a100", 1)->gpu.attn_bwd_table.size());
  REQUIRE(!s.cluster.gpu.attn_bwd_table.empty());
  const std::string holey = std::string(kScenario) + R"(cluster:
  preset: dgx-a100
  gpu:
    attn_bwd_table:
      - {head_dim: 64, q_rows: 1024, kv_rows: 1024, efficiency: 0.3}
      - {head_dim: 64, q_rows: 4096, kv_rows: 4096, efficiency: 0.5}
)";
  const std::string e = load_error(holey);
  REQUIRE(e.find("t.yaml:8:7:") != std::string::npos);  // the list itself (its first item)
  REQUIRE(e.find("cluster.gpu.attn_bwd_table: the points of head_dim 64 do not form a full q_rows x kv_rows grid") !=
          std::string::npos);
  REQUIRE(e.find("fix: give one point for every combination") != std::string::npos);
}

TEST_CASE("topology: a GPU's rail is the index of its NIC within its node", "[core][topology]") {
  // DGX H100: one NIC per GPU, so GPU k of every node is on rail k.
  const Topology two = Topology::from_cluster(h100(2));
  CHECK(two.gpu_rail(0) == 0);
  CHECK(two.gpu_rail(5) == 5);
  CHECK(two.gpu_rail(13) == 5);
  // Four NICs for eight GPUs: GPUs 2k and 2k+1 share NIC k.
  ClusterSpec shared = h100(2);
  shared.nics_per_node = 4;
  const Topology t = Topology::from_cluster(shared);
  CHECK(t.gpu_rail(2) == 1);
  CHECK(t.gpu_rail(3) == 1);
  CHECK(t.gpu_rail(15) == 3);
  // A single node has no NICs.
  CHECK(Topology::from_cluster(h100(1)).gpu_rail(3) == -1);
}

TEST_CASE("topology: a copy keeps every GPU's rail, vertices, links and routes", "[core][topology]") {
  // A copy's rails were left empty, so gpu_rail() (the all_gather ring channels) read past an empty vector.
  const Topology t = Topology::from_cluster(h100(2));
  const Topology copy = t;  // NOLINT(performance-unnecessary-copy-initialization): the copy is under test
  Topology assigned;
  assigned = t;
  for (const Topology* c : {&copy, static_cast<const Topology*>(&assigned)}) {
    REQUIRE(c->gpu_count() == t.gpu_count());
    REQUIRE(c->vertices().size() == t.vertices().size());
    REQUIRE(c->links().size() == t.links().size());
    for (int64_t g = 0; g < t.gpu_count(); ++g) {
      REQUIRE(c->gpu_rail(g) == t.gpu_rail(g));
      REQUIRE(c->gpu_rail(g) == g % 8);  // one NIC per GPU: GPU i of a node sits on rail i
    }
    REQUIRE(c->route(0, 9, 5) == t.route(0, 9, 5));
  }
}

TEST_CASE("topology: routes on a cluster with more vertices than 16-bit distances cover", "[core][topology]") {
  // 4000 DGX H100 nodes: 17 vertices per node plus leaves and spines, over 65535 vertices, so the hop-distance
  // tables hold 32-bit values; the routes must have the shapes of the two-node cluster's (same node: 2 NVLink
  // links; same rail and scalable unit: 4; other rails: 6, through a spine), end on the right GPU, and be the
  // same each time they are asked for.
  const Topology t = Topology::from_cluster(h100(4000));
  REQUIRE(t.vertices().size() > 65535);
  const int64_t last = t.gpu_count() - 1;
  const auto in = t.route(last - 1, last, 0);
  REQUIRE(in.size() == 2);
  REQUIRE(t.links()[static_cast<size_t>(in[0])].link_class == LinkClass::nvlink);
  REQUIRE(t.route(0, 8, 0).size() == 4);
  const auto far = t.route(0, last, 3);
  REQUIRE(far.size() >= 6);
  REQUIRE(t.links()[static_cast<size_t>(far.back())].to == t.gpu_vertex(last));
  for (size_t i = 1; i < far.size(); ++i)
    REQUIRE(t.links()[static_cast<size_t>(far[i])].from == t.links()[static_cast<size_t>(far[i - 1])].to);
  REQUIRE(far == t.route(0, last, 3));
  REQUIRE(t.route(9, 0, 7).size() == 6);
}
