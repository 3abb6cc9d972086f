#include "catch_compat.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "test_util.hpp"

using namespace hcpsim;

namespace {

std::string load_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return test::input_error_of([&] { return load_scenario_text(text, "s.yaml", overrides); });
}

const char* kMinimal = R"(schema_version: 1
model:
  num_attention_heads: 32
  num_query_groups: 8
  kv_channels: 64
  seq_length: 8192
parallel:
  context_parallel_size: 4
  cp_comm_type: a2a+p2p
  hierarchical_context_parallel_sizes: [2, 2]
)";

}  // namespace

TEST_CASE("core: a minimal scenario loads with Megatron defaults", "[core][loader]") {
  const auto s = load_scenario_text(kMinimal, "dir/minimal.yaml");
  REQUIRE(s.name == "minimal");
  REQUIRE(s.model.kv_channels_v == 64);
  REQUIRE(s.model.micro_batch_size == 1);
  REQUIRE(s.model.attn_mask_type == AttnMaskType::causal);
  REQUIRE(s.model.qkv_format == QkvFormat::sbhd);
  REQUIRE(s.parallel.order == "tp-cp-ep-dp-pp");
  REQUIRE(s.parallel.cp_comm_type == std::vector<CpCommType>{CpCommType::a2a_p2p});
  REQUIRE(*s.parallel.hierarchical_context_parallel_sizes == std::vector<int64_t>{2, 2});
  REQUIRE(s.cluster.preset == "dgx-h100");
  REQUIRE(s.cluster.gpus_per_node == 8);
  REQUIRE(s.cluster.nvlink.bandwidth_bytes_per_s == 18 * 20.6e9);  // NCCL topo.h: 18 NVLinks × 20.6 GB/s
  REQUIRE(s.loc("model.seq_length").to_string() == "dir/minimal.yaml:6:3");
  REQUIRE(s.loc("model.no_such_key").to_string() == "dir/minimal.yaml:2:1");
}

TEST_CASE("core: unknown keys are errors with a did-you-mean", "[core][loader]") {
  std::string text = kMinimal;
  text.replace(text.find("kv_channels:"), 12, "kv_chanels:");
  const auto msg = load_error(text);
  REQUIRE(msg == "s.yaml:5:3: model.kv_chanels: unknown key 'kv_chanels'; fix: did you mean 'model.kv_channels'?");
  const auto msg2 = load_error(std::string(kMinimal) + "zzz: 1\n");
  REQUIRE(msg2.find("s.yaml:11:1: zzz: unknown key 'zzz'; fix: remove it; keys allowed under '<top level>'") == 0);
}

TEST_CASE("core: type errors and bad values name file:line:col, key and fix", "[core][loader]") {
  std::string text = kMinimal;
  text.replace(text.find("8192"), 4, "lots");
  REQUIRE(load_error(text) ==
          "s.yaml:6:15: model.seq_length: expected an integer, got 'lots'; fix: write a whole number, e.g. "
          "'model.seq_length: 8'");
  std::string t2 = kMinimal;
  t2.replace(t2.find("a2a+p2p"), 7, "ring");
  REQUIRE(load_error(t2).find("s.yaml:9:17: parallel.cp_comm_type: unknown value 'ring'; fix: use one of: p2p, a2a, "
                              "a2a+p2p, all_gather") == 0);
  REQUIRE(load_error("schema_version: 2\n").find("schema_version: version 2 is not supported") != std::string::npos);
  REQUIRE(load_error("model: [1\n").find("not valid YAML") != std::string::npos);
  REQUIRE(load_error("").find("the scenario file is empty") != std::string::npos);
  REQUIRE(load_error("schema_version: 1\nparallel: {}\n").find("model: missing section") != std::string::npos);
  REQUIRE(load_error(std::string(kMinimal) + "cluster: {preset: dgx-h900}\n")
              .find("cluster.preset: unknown preset 'dgx-h900'; fix: use one of: dgx-a100, dgx-b200, dgx-h100, "
                    "dgx-h200") != std::string::npos);
}

TEST_CASE("core: overrides apply before validation and errors name the override", "[core][loader]") {
  const auto s = load_scenario_text(kMinimal, "s.yaml",
                                    {"model.seq_length=131072", "parallel.hierarchical_context_parallel_sizes=[4,1]",
                                     "cluster.nodes=4", "cluster.preset=dgx-b200"});
  REQUIRE(s.model.seq_length == 131072);
  REQUIRE(*s.parallel.hierarchical_context_parallel_sizes == std::vector<int64_t>{4, 1});
  REQUIRE(s.cluster.nodes == 4);
  REQUIRE(s.cluster.nvlink.bandwidth_bytes_per_s == 18 * 40.1e9);  // NCCL topo.h: 18 NVLinks × 40.1 GB/s
  REQUIRE(s.loc("model.seq_length").to_string() == "override 'model.seq_length=131072'");
  REQUIRE(load_error(kMinimal, {"model.seq_length=abc"}) ==
          "override 'model.seq_length=abc': model.seq_length: expected an integer, got 'abc'; fix: write a whole "
          "number, e.g. 'model.seq_length=8'");
  // A size written the way people say it gets the number it stands for as the example (it was always "8").
  CHECK(load_error(kMinimal, {"model.seq_length=128K"})
            .find("fix: write a whole number, e.g. 'model.seq_length=131072'") != std::string::npos);
  CHECK(load_error(kMinimal, {"model.seq_length=4096.0"}).find("e.g. 'model.seq_length=4096'") != std::string::npos);
  CHECK(load_error(kMinimal, {"model.seq_length=1e4"}).find("e.g. 'model.seq_length=8'") != std::string::npos);
  // The fix's example is written the way the value came in: key=value for an override, key: value in a file.
  REQUIRE(load_error(kMinimal, {"parallel.sequence_parallel=maybe"}).find(
              "fix: write 'parallel.sequence_parallel=true' or 'parallel.sequence_parallel=false'") != std::string::npos);
  REQUIRE(load_error(kMinimal, {"parallel.hierarchical_context_parallel_sizes=4"}).find(
              "fix: write e.g. 'parallel.hierarchical_context_parallel_sizes=[2, 2]'") != std::string::npos);
  // A whole number beyond int64 is said to be one (it used to read as "expected an integer").
  REQUIRE(load_error(kMinimal, {"model.num_layers=99999999999999999999"}) ==
          "override 'model.num_layers=99999999999999999999': model.num_layers: the integer '99999999999999999999' is "
          "outside the 64-bit range (|value| < 9.2e18); fix: write a realistic size, e.g. 'model.num_layers=8'");
  REQUIRE(load_error(kMinimal, {"model.seq_lenght=8"}).find("override 'model.seq_lenght=8': model.seq_lenght: unknown "
                                                            "key 'seq_lenght'; fix: did you mean 'model.seq_length'?") == 0);
  REQUIRE(load_error(kMinimal, {"seq_length"}).find("an override must look like key.path=value") != std::string::npos);
  REQUIRE(load_error(kMinimal, {"model..x=1"}).find("empty component in key path") != std::string::npos);
  REQUIRE(load_error(kMinimal, {"model.seq_length.x=1"}).find("'model.seq_length' is not a section") !=
          std::string::npos);
  REQUIRE(load_error(kMinimal, {"model.seq_length=[1"}).find("value is not valid YAML") != std::string::npos);
  // oracle.heads null or a list: what it takes, not "expected a string".
  for (const char* o : {"oracle.heads=null", "oracle.heads=[1]"})
    REQUIRE(load_error(kMinimal, {o}).find("oracle.heads: expected 'all' or a positive number of q-heads; fix: write "
                                           "'heads: all' or e.g. 'heads: 4'") != std::string::npos);
}

TEST_CASE("core: explicit cluster descriptions need every field", "[core][loader]") {
  const std::string cl = R"(cluster:
  nodes: 2
  gpus_per_node: 4
  gpu: {name: X, peak_bf16_TFLOP_per_s: 100, memory_GB: 40, hbm_bandwidth_GB_per_s: 1000, attn_fwd_efficiency: 0.5, attn_bwd_efficiency: 0.4}
  nvlink: {bandwidth_GB_per_s: 100, latency_us: 1}
  network: {bandwidth_GB_per_s: 10, latency_us: 5}
  message_latency_us: 2
)";
  const auto s = load_scenario_text(std::string(kMinimal) + cl, "s.yaml");
  REQUIRE(s.cluster.world_size() == 8);
  REQUIRE(s.cluster.gpu.peak_bf16_flops_per_s == 100e12);
  REQUIRE(s.cluster.network.latency_s == 5e-6);
  REQUIRE(s.cluster.message_latency_s == 2e-6);
  const std::string missing = "cluster:\n  nodes: 2\n  gpus_per_node: 4\n";
  REQUIRE(load_error(std::string(kMinimal) + missing).find("explicit cluster without 'gpu'") != std::string::npos);
}

TEST_CASE("core: edit distance", "[core][loader]") {
  REQUIRE(edit_distance("kitten", "sitting") == 3);
  REQUIRE(edit_distance("", "abc") == 3);
  REQUIRE(edit_distance("seq_length", "seq_length") == 0);
}

TEST_CASE("loader: a section key at the top level is pointed to its section", "[loader]") {
  const std::string base = "schema_version: 1\nmodel: {num_attention_heads: 8, kv_channels: 64, seq_length: 1024}\n"
                           "parallel: {context_parallel_size: 2, cp_comm_type: p2p}\n";
  for (const std::string& o : {std::string("context_parallel_size=8"), std::string("context-parallel-size=8")}) {
    try {
      hcpsim::load_scenario_text(base, "s.yaml", {o});
      FAIL("no error");
    } catch (const hcpsim::InputError& e) {
      CHECK(std::string(e.what()).find("did you mean 'parallel.context_parallel_size'?") != std::string::npos);
    }
  }
  try {
    hcpsim::load_scenario_text(base + "recompute_granularity: full\n", "s.yaml");
    FAIL("no error");
  } catch (const hcpsim::InputError& e) {
    CHECK(std::string(e.what()).find("did you mean 'training.recompute_granularity'?") != std::string::npos);
  }
}

TEST_CASE("config: the GPU provenance line names the values the scenario set", "[config][loader]") {
  // The preset's description stays, followed by what the scenario replaced, so "GEMM efficiency 0.7" is never
  // the last word about a GEMM efficiency of 0.55.
  const auto preset = load_scenario_text(kMinimal, "s.yaml");
  REQUIRE(preset.cluster.gpu.calibration.find("assumed: preset dgx-h100") == 0);
  REQUIRE(preset.cluster.gpu.calibration.find("set in the scenario") == std::string::npos);
  const auto set = load_scenario_text(
      kMinimal, "s.yaml",
      {"cluster.preset=dgx-h100", "cluster.gpu.gemm_efficiency=0.55", "cluster.gpu.attn_fwd_efficiency=0.5"});
  // (kMinimal has no cluster section: the override names the preset, as a scenario file would.)
  REQUIRE(set.cluster.gpu.gemm_efficiency_bf16 == 0.55);
  const std::string& c = set.cluster.gpu.calibration;
  REQUIRE(c.find("assumed: preset dgx-h100") == 0);
  REQUIRE(c.find("; set in the scenario: gemm_efficiency 0.55 (the older key, read as gemm_efficiency_bf16), "
                 "attn_fwd_efficiency 0.5") != std::string::npos);
  // The new keys set BF16 and FP8 separately; the older key and its replacement together are an error.
  const auto both = load_scenario_text(kMinimal, "s.yaml",
                                       {"cluster.preset=dgx-h100", "cluster.gpu.gemm_efficiency_bf16=0.6",
                                        "cluster.gpu.gemm_efficiency_fp8=0.5", "cluster.gpu.sm_count=100"});
  REQUIRE(both.cluster.gpu.gemm_efficiency_bf16 == 0.6);
  REQUIRE(both.cluster.gpu.gemm_efficiency_fp8 == 0.5);
  REQUIRE(both.cluster.gpu.sm_count == 100);
  REQUIRE(preset.cluster.gpu.gemm_efficiency_fp8 == Approx(1.75 * 780.0 / 1978.9));
  try {
    load_scenario_text(kMinimal, "s.yaml",
                       {"cluster.preset=dgx-h100", "cluster.gpu.gemm_efficiency=0.6", "cluster.gpu.gemm_efficiency_bf16=0.6"});
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("cluster.gpu.gemm_efficiency: given together with gemm_efficiency_bf16") !=
          std::string::npos);
  }
}
