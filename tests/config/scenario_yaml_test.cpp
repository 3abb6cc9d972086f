#include <cmath>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/scenario_yaml.hpp"
#include "test_util.hpp"

using namespace hcpsim;
namespace fs = std::filesystem;

namespace {

/// Every loadable scenario file of the repository: scenarios/ (with ci/, without invalid/) and the plan fixtures.
std::vector<fs::path> bundled_scenarios() {
  std::vector<fs::path> out;
  const fs::path root(HCPSIM_SOURCE_DIR);
  for (const auto& e : fs::recursive_directory_iterator(root / "scenarios")) {
    const auto rel = fs::relative(e.path(), root / "scenarios");
    if (e.path().extension() == ".yaml" && *rel.begin() != "invalid") out.push_back(e.path());
  }
  for (const auto& e : fs::directory_iterator(root / "tests/fixtures/plan"))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

bool same_points(const std::vector<EfficiencyPoint>& a, const std::vector<EfficiencyPoint>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const EfficiencyPoint& x, const EfficiencyPoint& y) {
    return x.head_dim == y.head_dim && x.q_rows == y.q_rows && x.kv_rows == y.kv_rows && x.causal == y.causal &&
           x.efficiency == y.efficiency;
  });
}

void check_same_model_and_parallel(const Scenario& a, const Scenario& b) {
  const ModelConfig &m = a.model, &n = b.model;
  CHECK(m.num_attention_heads == n.num_attention_heads);
  CHECK(m.num_query_groups == n.num_query_groups);
  CHECK(m.kv_channels == n.kv_channels);
  CHECK(m.kv_channels_v == n.kv_channels_v);
  CHECK(m.seq_length == n.seq_length);
  CHECK(m.micro_batch_size == n.micro_batch_size);
  CHECK(m.num_layers == n.num_layers);
  CHECK(m.hidden_size == n.hidden_size);
  CHECK(m.ffn_hidden_size == n.ffn_hidden_size);
  CHECK(m.global_batch_size == n.global_batch_size);
  CHECK(m.vocab_size == n.vocab_size);
  CHECK(m.gated_linear_unit == n.gated_linear_unit);
  CHECK(m.untie_embeddings_and_output_weights == n.untie_embeddings_and_output_weights);
  CHECK(m.attn_mask_type == n.attn_mask_type);
  CHECK(m.qkv_format == n.qkv_format);
  CHECK(m.window_size == n.window_size);
  CHECK(m.attention_bias == n.attention_bias);
  CHECK(m.params_dtype == n.params_dtype);
  const ParallelConfig &p = a.parallel, &q = b.parallel;
  CHECK(p.tensor_model_parallel_size == q.tensor_model_parallel_size);
  CHECK(p.pipeline_model_parallel_size == q.pipeline_model_parallel_size);
  CHECK(p.context_parallel_size == q.context_parallel_size);
  CHECK(p.data_parallel_size == q.data_parallel_size);
  CHECK(p.cp_comm_type == q.cp_comm_type);
  CHECK(p.hierarchical_context_parallel_sizes == q.hierarchical_context_parallel_sizes);
  CHECK(p.order == q.order);
  CHECK(p.use_decentralized_pg == q.use_decentralized_pg);
  CHECK(p.te_version == q.te_version);
  CHECK(p.sequence_parallel == q.sequence_parallel);
  CHECK(p.virtual_pipeline_model_parallel_size == q.virtual_pipeline_model_parallel_size);
  CHECK(p.use_distributed_optimizer == q.use_distributed_optimizer);
  CHECK(p.overlap_grad_reduce == q.overlap_grad_reduce);
  CHECK(p.overlap_param_gather == q.overlap_param_gather);
}

void check_same_cluster(const ClusterSpec& c, const ClusterSpec& d) {
  CHECK(c.preset == d.preset);
  CHECK(c.nodes == d.nodes);
  CHECK(c.gpus_per_node == d.gpus_per_node);
  CHECK(c.gpu.name == d.gpu.name);
  CHECK(c.gpu.peak_bf16_flops_per_s == d.gpu.peak_bf16_flops_per_s);
  CHECK(c.gpu.memory_bytes == d.gpu.memory_bytes);
  CHECK(c.gpu.hbm_bandwidth_bytes_per_s == d.gpu.hbm_bandwidth_bytes_per_s);
  CHECK(c.gpu.attn_fwd_efficiency == d.gpu.attn_fwd_efficiency);
  CHECK(c.gpu.attn_bwd_efficiency == d.gpu.attn_bwd_efficiency);
  CHECK(same_points(c.gpu.attn_fwd_table, d.gpu.attn_fwd_table));
  CHECK(same_points(c.gpu.attn_bwd_table, d.gpu.attn_bwd_table));
  CHECK(c.gpu.kernel_launch_overhead_s == d.gpu.kernel_launch_overhead_s);
  CHECK(c.gpu.compute_slowdown_during_comm == d.gpu.compute_slowdown_during_comm);
  CHECK(c.gpu.peak_fp8_flops_per_s == d.gpu.peak_fp8_flops_per_s);
  CHECK(c.gpu.gemm_efficiency_bf16 == d.gpu.gemm_efficiency_bf16);
  CHECK(c.gpu.gemm_efficiency_fp8 == d.gpu.gemm_efficiency_fp8);
  CHECK(c.gpu.fp8_split_accumulator_slowdown == d.gpu.fp8_split_accumulator_slowdown);
  CHECK(c.gpu.sm_count == d.gpu.sm_count);
  CHECK(c.nvlink.bandwidth_bytes_per_s == d.nvlink.bandwidth_bytes_per_s);
  CHECK(c.nvlink.latency_s == d.nvlink.latency_s);
  CHECK(c.network.bandwidth_bytes_per_s == d.network.bandwidth_bytes_per_s);
  CHECK(c.network.latency_s == d.network.latency_s);
  CHECK(c.message_latency_s == d.message_latency_s);
  CHECK(c.nics_per_node == d.nics_per_node);
  CHECK(c.fabric.kind == d.fabric.kind);
  CHECK(c.fabric.leaf_downlinks == d.fabric.leaf_downlinks);
  CHECK(c.fabric.spines == d.fabric.spines);
  CHECK(c.fabric.oversubscription == d.fabric.oversubscription);
  REQUIRE(c.topology.vertices.size() == d.topology.vertices.size());
  for (size_t i = 0; i < c.topology.vertices.size(); ++i) {
    CHECK(c.topology.vertices[i].name == d.topology.vertices[i].name);
    CHECK(c.topology.vertices[i].kind == d.topology.vertices[i].kind);
    CHECK(c.topology.vertices[i].node == d.topology.vertices[i].node);
  }
  REQUIRE(c.topology.links.size() == d.topology.links.size());
  for (size_t i = 0; i < c.topology.links.size(); ++i) {
    CHECK(c.topology.links[i].a == d.topology.links[i].a);
    CHECK(c.topology.links[i].b == d.topology.links[i].b);
    CHECK(c.topology.links[i].bandwidth_bytes_per_s == d.topology.links[i].bandwidth_bytes_per_s);
    CHECK(c.topology.links[i].latency_s == d.topology.links[i].latency_s);
  }
}

/// Every field the loader reads is equal in `a` and `b` (gpu.calibration, source_path and locations are not
/// written by to_yaml and not compared).
void check_same_config(const Scenario& a, const Scenario& b) {
  CHECK(a.schema_version == b.schema_version);
  CHECK(a.name == b.name);
  check_same_model_and_parallel(a, b);
  check_same_cluster(a.cluster, b.cluster);
  CHECK(a.training.recompute_granularity == b.training.recompute_granularity);
  CHECK(a.training.fp8 == b.training.fp8);
  CHECK(a.training.framework_overhead_bytes == b.training.framework_overhead_bytes);
  CHECK(a.oracle.seed == b.oracle.seed);
  CHECK(a.oracle.dtype == b.oracle.dtype);
  CHECK(a.oracle.input_distribution == b.oracle.input_distribution);
  CHECK(a.oracle.heads == b.oracle.heads);
  CHECK(a.oracle.inject == b.oracle.inject);
  CHECK(a.expect.present == b.expect.present);
  CHECK(a.expect.validate_exit_code == b.expect.validate_exit_code);
  CHECK(a.expect.validate_error == b.expect.validate_error);
  CHECK(a.expect.verify_result == b.expect.verify_result);
  // a .nan bound (the tensor must be non-finite) round-trips as NaN, which == never matches
  CHECK(a.expect.verify_max_rel_l2.size() == b.expect.verify_max_rel_l2.size());
  for (const auto& [tensor, bound] : a.expect.verify_max_rel_l2) {
    const auto it = b.expect.verify_max_rel_l2.find(tensor);
    REQUIRE(it != b.expect.verify_max_rel_l2.end());
    CHECK((bound == it->second || (std::isnan(bound) && std::isnan(it->second))));
  }
  CHECK(a.expect.simulate == b.expect.simulate);
}

/// to_yaml(s), reloaded; REQUIREs that the reload writes the same text and holds the same values.
Scenario round_trip(const Scenario& s) {
  const std::string text = to_yaml(s);
  INFO(text);
  const Scenario back = load_scenario_text(text, "round_trip.yaml");
  REQUIRE(to_yaml(back) == text);
  check_same_config(s, back);
  return back;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

const char* kMinimal = R"(schema_version: 1
model: {num_attention_heads: 8, num_query_groups: 2, kv_channels: 64, seq_length: 4096}
parallel: {context_parallel_size: 2, cp_comm_type: p2p}
)";

}  // namespace

TEST_CASE("config: to_yaml of every bundled scenario reloads to the same scenario and the same text",
          "[config][to_yaml]") {
  const auto paths = bundled_scenarios();
  REQUIRE(paths.size() >= 24 + 3 + 2);
  for (const auto& path : paths) {
    INFO(path.string());
    const Scenario s = load_scenario(path.string());
    (void)round_trip(s);
  }
}

TEST_CASE("config: to_yaml writes the effective values in the file's units", "[config][to_yaml]") {
  const std::string path = std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama3_70b_256k_tp8_cp8_8xdgx_h100.yaml";
  // The file's original a2a+p2p layout (it now holds p2p, the layout plan found to fit), so a list is written too.
  const Scenario s = load_scenario(path, {"parallel.cp_comm_type=a2a+p2p",
                                          "parallel.hierarchical_context_parallel_sizes=[2,8]"});
  const std::string text = to_yaml(s);
  const Scenario back = round_trip(s);
  CHECK(back.name == "llama3_70b_256k_tp8_cp8_8xdgx_h100");
  CHECK(back.model.seq_length == 262144);
  CHECK(*back.parallel.hierarchical_context_parallel_sizes == std::vector<int64_t>{2, 8});
  CHECK(back.cluster.gpu.peak_bf16_flops_per_s == 989.4e12);
  CHECK(back.cluster.nvlink.bandwidth_bytes_per_s == s.cluster.nvlink.bandwidth_bytes_per_s);
  CHECK(back.cluster.network.latency_s == s.cluster.network.latency_s);
  CHECK(back.cluster.gpu.attn_fwd_table.size() == s.cluster.gpu.attn_fwd_table.size());
  CHECK(!back.cluster.gpu.attn_fwd_table.empty());
  CHECK(back.oracle.seed == 1234);
  CHECK(back.expect.validate_exit_code == 0);
  // The preset's values are written out, in the file's units (TFLOP/s, GB, GB/s, µs); defaults are explicit.
  // memory_GB: the H100's 81559 MiB as the device reports it = 85520809984 bytes.
  for (const char* line : {"preset: dgx-h100", "nodes: 8", "peak_bf16_TFLOP_per_s: 989.4", "memory_GB: 85.520809984",
                           "hbm_bandwidth_GB_per_s: 3350", "bandwidth_GB_per_s: 370.8", "bandwidth_GB_per_s: 48",
                           "latency_us: 3.4", "latency_us: 14", "message_latency_us: 8.4", "kernel_launch_overhead_us: 3",
                           "peak_fp8_TFLOP_per_s: 1978.9", "framework_overhead_GB: 3", "kv_channels_v: 128",
                           "hierarchical_context_parallel_sizes: [2, 8]", "cp_comm_type: a2a+p2p",
                           // The H100 preset's table is cuDNN fused attention's (attention_backend auto): the
                           // published 518 TFLOP/s at 4096 causal, head dim 128, of the 989.4 peak.
                           "- {head_dim: 128, q_rows: 4096, kv_rows: 4096, causal: true, efficiency: 0.5235496260359814}",
                           "attention_backend: auto", "sm_count: 132"}) {
    INFO(line);
    CHECK(text.find(line) != std::string::npos);
  }
  // Sections in the loader's order; unset optional keys are not written.
  const auto at = [&text](const char* key) { return text.find(key); };
  CHECK(at("schema_version:") == 0);
  CHECK(at("\nname:") < at("\nmodel:"));
  CHECK(at("\nmodel:") < at("\nparallel:"));
  CHECK(at("\nparallel:") < at("\ncluster:"));
  CHECK(at("\ncluster:") < at("\ntraining:"));
  CHECK(at("\ntraining:") < at("\noracle:"));
  CHECK(at("\noracle:") < at("\nexpect:"));
  CHECK(at("data_parallel_size") == std::string::npos);
  CHECK(at("window_size") == std::string::npos);
  CHECK(at("inject") == std::string::npos);
  CHECK(at("topology") == std::string::npos);
}

TEST_CASE("config: to_yaml shows overrides and unit values the plain inverse would miss", "[config][to_yaml]") {
  const std::string path = std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama32_1b_cp4_a2a_p2p.yaml";
  const Scenario s = load_scenario(path, {"model.seq_length=65536", "cluster.network.latency_us=0.5",
                                          "parallel.cp_comm_type=[a2a+p2p, p2p]", "model.window_size=[-1, -1]",
                                          "oracle.inject=stale_kv_backward", "oracle.seed=99"});
  const std::string text = to_yaml(s);
  CHECK(text.find("seq_length: 65536") != std::string::npos);
  // 0.5 µs is stored as 0.5 / 1e6 s; times 1e6 that is 0.49999999999999994, which would load a different value.
  CHECK(text.find("latency_us: 0.5\n") != std::string::npos);
  CHECK(text.find("cp_comm_type: [a2a+p2p, p2p]") != std::string::npos);
  CHECK(text.find("window_size: [-1, -1]") != std::string::npos);
  CHECK(text.find("inject: stale_kv_backward") != std::string::npos);
  const Scenario back = round_trip(s);
  CHECK(back.model.seq_length == 65536);
  CHECK(back.cluster.network.latency_s == 0.5 / 1e6);
  CHECK(back.oracle.seed == 99);
}

TEST_CASE("config: to_yaml quotes and escapes strings that YAML would read otherwise", "[config][to_yaml]") {
  const std::string tricky = "cp: \"quoted\" # not a comment";
  Scenario s = load_scenario_text(kMinimal, "minimal.yaml", {"name='cp: \"quoted\" # not a comment'"});
  REQUIRE(s.name == tricky);
  const std::string text = to_yaml(s);
  CHECK(text.find("name: \"cp: \\\"quoted\\\" # not a comment\"\n") != std::string::npos);
  CHECK(round_trip(s).name == tricky);
  // Set in code: words YAML reads as null or a number, a line break, a leading dash; all come back as text.
  s.name = "null";
  s.parallel.te_version = "2.10";
  s.expect.present = true;
  s.expect.validate_error = "line one\n  - line: two";
  const Scenario back = round_trip(s);
  CHECK(back.name == "null");
  CHECK(back.parallel.te_version == "2.10");
  CHECK(back.expect.validate_error == "line one\n  - line: two");
}

TEST_CASE("config: to_yaml writes an explicit cluster with its topology, and calibrated values as plain ones",
          "[config][to_yaml]") {
  const auto dir = hcpsim::test::scratch_dir("to_yaml_calibration");
  write(dir / "calibration.yaml", R"(source: "measured.csv"
gpu:
  name: "H100-measured"
  peak_bf16_TFLOP_per_s: 900.1
  memory_GB: 79.3
  hbm_bandwidth_GB_per_s: 3000.7
  kernel_launch_overhead_us: 2.3
  gemm_efficiency: 0.61
  attn_fwd_efficiency: 0.55
  attn_bwd_efficiency: 0.45
  attn_fwd_table:
    - {head_dim: 128, q_rows: 1024, kv_rows: 1024, causal: true, efficiency: 0.3}
  attn_bwd_table: []
)");
  write(dir / "scenario.yaml", std::string(kMinimal) + R"(cluster:
  nodes: 2
  gpus_per_node: 1
  gpu: {calibration: calibration.yaml, peak_fp8_TFLOP_per_s: 1800.3}
  nvlink: {bandwidth_GB_per_s: 450, latency_us: 0.7}
  network: {bandwidth_GB_per_s: 48.1, latency_us: 2.9}
  message_latency_us: 4.1
  nics_per_node: 1
  fabric: {kind: fat_tree, leaf_downlinks: 16, spines: 4, oversubscription: 1.5}
  topology:
    vertices: [{name: g0, kind: gpu, node: 0}, {name: "sw: 0", kind: nvswitch}, {name: g1, kind: gpu, node: 1}]
    links:
      - {a: g0, b: "sw: 0", bandwidth_GB_per_s: 45.3, latency_us: 0.1}
      - {a: g1, b: "sw: 0", bandwidth_GB_per_s: 12.5}
)");
  const Scenario s = load_scenario((dir / "scenario.yaml").string());
  REQUIRE(s.cluster.gpu.calibration.find("calibration.yaml") != std::string::npos);
  const std::string text = to_yaml(s);
  CHECK(text.find("preset") == std::string::npos);
  CHECK(text.find("calibration") == std::string::npos);  // its values are written; the file is not needed
  CHECK(text.find("name: H100-measured") != std::string::npos);
  CHECK(text.find("memory_GB: 79.3\n") != std::string::npos);
  CHECK(text.find("kernel_launch_overhead_us: 2.3\n") != std::string::npos);
  CHECK(text.find("attn_bwd_table") == std::string::npos);
  CHECK(text.find("- {a: g0, b: \"sw: 0\", bandwidth_GB_per_s: 45.3, latency_us: 0.1}") != std::string::npos);
  const Scenario back = round_trip(s);  // from text alone: no calibration file next to it
  CHECK(back.cluster.topology.vertices.size() == 3);
  CHECK(back.cluster.topology.vertices[1].node == -1);
  CHECK(back.cluster.gpu.attn_fwd_table.size() == 1);
  CHECK(back.cluster.gpu.attn_bwd_table.empty());
  // The calibrated attention values hold their own waves: attention wave quantization is off, and stays off
  // through to_yaml, while the GEMMs keep the SM count; the older gemm_efficiency key is the BF16 one.
  CHECK_FALSE(s.cluster.gpu.attn_wave_quantization);
  CHECK_FALSE(back.cluster.gpu.attn_wave_quantization);
  CHECK(text.find("attn_wave_quantization: false") != std::string::npos);
  CHECK(back.cluster.gpu.gemm_efficiency_bf16 == 0.61);
  fs::remove_all(dir);
}
