// simulate's whole-step section and summary keys, calibrate, plan (table, CSV, SVG) and diff through the binary.
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/run_command.hpp"
#include "catch_compat.hpp"
#include "test_util.hpp"

using hcpsim::test::run_command;
using hcpsim::test::run_hcpsim;
using hcpsim::test::scratch_dir;
using hcpsim::test::slurp;

TEST_CASE("apps: simulate prints the whole step and writes step.* summary keys", "[apps][step]") {
  const auto dir = scratch_dir("simulate");
  const std::string js = (dir / "s.json").string();
  const auto r = run_hcpsim("simulate scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml --summary " + js);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("whole training step: a2a+p2p [A=8, P=2], TP 1 x CP 16 x DP 2 x PP 1 = 32 GPUs") !=
        std::string::npos);
  CHECK(r.output.find("convention megatron_causal") != std::string::npos);
  CHECK(r.output.find("convention megatron_full_attention") != std::string::npos);
  CHECK(r.output.find("calibration: assumed: preset dgx-h100") != std::string::npos);
  CHECK(r.output.find("memory per GPU: ") != std::string::npos);
  CHECK(r.output.find("accuracy: optimistic against every published run") != std::string::npos);
  // Full recompute: the recomputed layer's working set is named in the activations line.
  CHECK(r.output.find(" for the layer being recomputed)") != std::string::npos);
  // A BF16 run has no FP8 MFU; an FP8 run reports both peaks, and selective recompute warns.
  CHECK(r.output.find("dense FP8 peak the GEMMs run at") == std::string::npos);
  const auto f = run_hcpsim("simulate scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml training.fp8=true "
                            "training.recompute_granularity=selective training.recompute_method=null "
                            "training.recompute_num_layers=null");
  CHECK(f.output.find("of the 1978.9 TFLOP/s dense FP8 peak the GEMMs run at") != std::string::npos);
  CHECK(f.output.find("warning: training.recompute_granularity selective") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(js));
  REQUIRE(j.contains("step"));
  const double tflops = j["step"]["model_tflops_per_gpu"].get<double>();
  CHECK(tflops > 100);
  CHECK(tflops < 989.4);
  CHECK(j["step"]["model_flops_convention"] == "megatron_causal");
  CHECK(j["step"]["memory_per_gpu_total_bytes"].get<double>() ==
        j["step"]["memory_per_gpu_weights_bytes"].get<double>() +
            j["step"]["memory_per_gpu_fp8_weight_copies_bytes"].get<double>() +
            j["step"]["memory_per_gpu_gradients_bytes"].get<double>() +
            j["step"]["memory_per_gpu_optimizer_bytes"].get<double>() +
            j["step"]["memory_per_gpu_activations_bytes"].get<double>() +
            j["step"]["memory_per_gpu_output_layer_activations_bytes"].get<double>() +
            j["step"]["memory_per_gpu_cp_attention_buffers_bytes"].get<double>() +
            j["step"]["memory_per_gpu_framework_overhead_bytes"].get<double>());
  CHECK(j["calibration"].get<std::string>().find("dgx-h100") != std::string::npos);
  // Without a vocabulary the whole step is skipped and says why.
  const auto nv = run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml model.vocab_size=null");
  REQUIRE(nv.exit_code == 0);
  CHECK(nv.output.find("whole training step: not computed (model.vocab_size is not set") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("apps: calibrate writes a file that a scenario includes and simulate names", "[apps][step]") {
  const auto dir = scratch_dir("calibrate");
  {
    std::ofstream csv(dir / "measured.csv");
    csv << "op_kind,dtype,head_dim,q_rows,kv_rows,causal,m,n,k,bytes,flops,measured_s\n"
           "elementwise,bf16,,,,,,,,1000000,0,5e-06\n"
           "elementwise,bf16,,,,,,,,100000000,0,4.4e-05\n"
           "gemm,bf16,,,,,8192,8192,8192,0,1099511627776,0.0022\n"
           "attn_fwd_block,bf16,128,4096,4096,0,,,,0,68719476736,0.0001\n"
           "send_recv,bf16,,,,,,,,1048576,0,2.5e-05\n";
  }
  const std::string out = (dir / "cal.yaml").string();
  auto r = run_hcpsim("calibrate " + (dir / "measured.csv").string() + " --gpu H100 -o " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("used 4, skipped 1 (communication)") != std::string::npos);
  CHECK(r.output.find("timed rows; alloc and free rows take no device time and are not read)") != std::string::npos);
  CHECK(r.output.find("launch overhead 4.606 us") != std::string::npos);  // 5 µs − 1 MB · 39 µs / 99 MB
  REQUIRE(std::filesystem::exists(out));
  // An H100 PCIe (or "H100X") was fitted against the SXM5's peaks, every efficiency 24% low: now refused.
  for (const char* other : {"H100-PCIe", "H100X"}) {
    const auto o = run_hcpsim("calibrate " + (dir / "measured.csv").string() + " --gpu " + other + " -o " +
                              (dir / "other.yaml").string());
    CHECK(o.exit_code == 2);
    CHECK(!std::filesystem::exists(dir / "other.yaml"));
  }
  CHECK(run_hcpsim("calibrate " + (dir / "measured.csv").string() + " --gpu H100-PCIe -o -")
            .output.find("is the H100 PCIe, which hcpsim knows by its datasheet peak only") != std::string::npos);
  {
    std::ofstream s(dir / "scenario.yaml");
    s << "schema_version: 1\nmodel: {num_attention_heads: 32, num_query_groups: 8, kv_channels: 128, seq_length: 8192,"
         " vocab_size: 128256, hidden_size: 4096}\nparallel: {context_parallel_size: 2, cp_comm_type: p2p}\n"
         "cluster: {preset: dgx-h100, nodes: 1, gpu: {calibration: cal.yaml}}\n";
  }
  r = run_hcpsim("simulate " + (dir / "scenario.yaml").string());
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("calibration: calibrated: " + out + " (fitted from " + (dir / "measured.csv").string() + ")") !=
        std::string::npos);
  // A bad CSV: exit 2, the file and line named, no output file.
  {
    std::ofstream bad(dir / "bad.csv");
    bad << "op_kind,measured_s\ngemm,soon\n";
  }
  const std::string out2 = (dir / "cal2.yaml").string();
  r = run_hcpsim("calibrate " + (dir / "bad.csv").string() + " -o " + out2);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("bad.csv:2") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out2));
  std::filesystem::remove_all(dir);
}

TEST_CASE("apps: plan ranks the options, lists the ruled-out ones, writes CSV and a valid SVG", "[apps][step]") {
  const auto dir = scratch_dir("plan");
  const std::string csv = (dir / "plan.csv").string(), svg = (dir / "plan.svg").string();
  // The CP variants and [A, P] only: TP, PP, VP, recompute and micro-batch held at the fixture's values.
  const auto r = run_hcpsim("plan tests/fixtures/plan/slow_network_cp32.yaml --fixed tp,pp,vp,recompute,micro_batch "
                            "--csv " + csv + " --svg " + svg);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("\na2a+p2p [8,4] TP1 PP1 none mbs1 wins with ") != std::string::npos);
  CHECK(r.output.find("   1  a2a+p2p [8,4] TP1 PP1 none mbs1 ") != std::string::npos);
  CHECK(r.output.find("ruled out: 4 options, by reason (count, first example):\n      1 x [1, CP] runs as plain p2p\n"
                      "          e.g. a2a+p2p [1,32] TP1 PP1 none mbs1: ") != std::string::npos);
  CHECK(r.output.find("held by --fixed: tp 1; pp 1; vp 1; recompute none; micro_batch 1\n") != std::string::npos);
  const std::string text = slurp(csv);
  CHECK(text.rfind("rank,option,cp_comm_type,", 0) == 0);
  CHECK(text.find("\n1,\"a2a+p2p [8,4] TP1 PP1 none mbs1\",a2a+p2p,8,4,1,32,1,1,1,none,0,1,") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1 + 5 + 4);
  // A real XML parser (libxml2's xmllint) accepts the chart.
  const auto x = run_command("xmllint --noout '" + svg + "' && echo parsed");
  INFO(x.output);
  CHECK(x.exit_code == 0);
  CHECK(x.output.find("parsed") != std::string::npos);
  CHECK(slurp(svg).find("a2a+p2p [8,4] TP1 PP1 none mbs1") != std::string::npos);
  // Bad options exit 2.
  CHECK(run_hcpsim("plan tests/fixtures/plan/slow_network_cp32.yaml --objective cost").exit_code == 2);
  CHECK(run_hcpsim("plan tests/fixtures/plan/slow_network_cp32.yaml --tp 1,x").exit_code == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("apps: plan with no legal option exits 2 naming the first reasons and a fix", "[apps][step]") {
  const auto r = run_hcpsim("plan tests/fixtures/plan/slow_network_cp32.yaml --tp 3 --fixed cp,pp,vp,recompute,micro_batch");
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  // Grouped by reason (the same reason once, not once per comm type), and the fix names the option that set the
  // sizes.
  CHECK(r.output.find("tests/fixtures/plan/slow_network_cp32.yaml: --tp: no legal option: all 9 ruled out, by reason: "
                      "7 x parallel.tensor_model_parallel_size, e.g. p2p TP3 PP1 none mbs1: "
                      "parallel.tensor_model_parallel_size: tensor_model_parallel_size 3 must divide") !=
        std::string::npos);
  CHECK(r.output.find("; fix: the sizes come from --tp 3: give other values") != std::string::npos);
  // --gpus 3: 47 options, the sequence-length reason once for its 24 options (it used to open the message three
  // times, once per comm type), --gpus named.
  const auto g = run_hcpsim("plan tests/fixtures/plan/slow_network_cp32.yaml --gpus 3");
  INFO(g.output);
  REQUIRE(g.exit_code == 2);
  CHECK(g.output.find(": --gpus: no legal option: all 47 ruled out, by reason: 24 x model.seq_length, e.g. p2p TP1 "
                      "PP1 none mbs1: model.seq_length: seq_length 32768 is not divisible by 2*context_parallel_size = 6") !=
        std::string::npos);
  CHECK(g.output.find("fix: the sizes come from --gpus 3: give other values") != std::string::npos);
  // --pp 7 fits no TP x PP into 64 GPUs, and the 80 layers do not split over 7 stages either: both are said.
  const auto p7 = run_hcpsim("plan scenarios/llama3_70b_256k_tp8_cp8_8xdgx_h100.yaml --pp 7");
  CHECK(p7.exit_code == 2);
  CHECK(p7.output.find("64 GPUs per model replica fit no TP*PP of the lists (TP 1,2,4,8, PP 7); and 80 layers do not "
                       "split over PP 7; fix: ") != std::string::npos);
  CHECK(r.output.find("rank  option") == std::string::npos);  // no empty ranking
}

TEST_CASE("apps: diff of a scenario with itself shows no change; an [A,P] change is listed", "[apps][step]") {
  const std::string s = "tests/fixtures/plan/tp_sweep_cp16.yaml";
  auto r = run_hcpsim("diff " + s + " " + s);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("no change: the two configurations simulate identically") != std::string::npos);
  r = run_hcpsim("diff " + s + " \"parallel.hierarchical_context_parallel_sizes=[2,8]\"");
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("quantities changed, largest relative difference first") != std::string::npos);
  CHECK(r.output.find("layer messages forward inter_node bytes") != std::string::npos);
  CHECK(run_hcpsim("diff " + s + " missing.yaml").exit_code == 2);
}

TEST_CASE("apps: simulate reports a per-layer cp_comm_type mix per comm type, then the mix's own step",
          "[apps][step]") {
  std::string list;
  for (int i = 0; i < 16; ++i) list += std::string(i == 0 ? "" : ",") + (i < 12 ? "a2a+p2p" : "p2p");
  const std::string mixed = "\"parallel.cp_comm_type=[" + list + "]\"";
  const auto r = run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml " + mixed);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("note: parallel.cp_comm_type gives the 16 layers their own comm types (12 a2a+p2p, 4 p2p); "
                      "each comm type below is simulated and composed into a whole step as if every layer used it") !=
        std::string::npos);
  const auto mixed_step = r.output.find("whole training step: per-layer mix 12 a2a+p2p + 4 p2p, TP 1 x CP 4");
  CHECK(mixed_step != std::string::npos);
  CHECK(mixed_step > r.output.rfind("whole training step: p2p"));  // after every comm type's own step
  const std::filesystem::path dir = hcpsim::test::scratch_dir("mixed_summary");
  const auto j =
      run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml " + mixed + " --summary " + (dir / "s.json").string());
  REQUIRE(j.exit_code == 0);
  const std::string mix = slurp(dir / "s.json.mix");
  CHECK(mix.find("\"layer_mix\": \"12 a2a+p2p + 4 p2p\"") != std::string::npos);
  CHECK(mix.find("\"step_time_ps\"") != std::string::npos);
  CHECK(mix.find("\"cp_comm_type\": \"p2p\"") == std::string::npos);
  // One comm type for every layer: no note.
  const auto one = run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  REQUIRE(one.exit_code == 0);
  CHECK(one.output.find("note: parallel.cp_comm_type") == std::string::npos);
}

TEST_CASE("apps: diff names each side's DP and micro-batches, and prints small changes without rounding to 0",
          "[apps][step]") {
  // TP 1 -> 2 halves DP and doubles the micro-batches, which the header did not show; a 6 MB memory change printed
  // as "-0.00 GB" and -0.0% next to each other.
  auto r = run_hcpsim("diff scenarios/llama32_1b_cp4_a2a_p2p.yaml parallel.tensor_model_parallel_size=2 --quiet");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("diff A: llama32_1b_cp4_a2a_p2p (scenarios/llama32_1b_cp4_a2a_p2p.yaml, a2a+p2p [2,2] TP1, DP 2, "
                      "4 micro-batches per iteration)\n") != std::string::npos);
  CHECK(r.output.find(", a2a+p2p [2,2] TP2, DP 1, 8 micro-batches per iteration)\n") != std::string::npos);
  const auto dir = hcpsim::test::scratch_dir("diff_small");
  std::string text = hcpsim::test::slurp(std::filesystem::path(HCPSIM_SOURCE_DIR) / "scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  text.replace(text.find("seq_length: 8192"), 16, "seq_length: 2048");
  std::ofstream(dir / "s.yaml") << text;
  r = run_hcpsim("diff " + (dir / "s.yaml").string() +
                 " parallel.hierarchical_context_parallel_sizes=null parallel.cp_comm_type=p2p --quiet");
  REQUIRE(r.exit_code == 0);
  const std::regex total("memory: total +13\\.31 GB +13\\.30 GB +-0\\.01 GB +-0\\.0[0-9]{2}%\n");
  CHECK(std::regex_search(r.output, total));
  CHECK(r.output.find("-0.00 GB") == std::string::npos);
  CHECK(r.output.find("-0.0%") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("apps: simulate's step header names sequence parallelism only where it runs (TP > 1)", "[apps][step]") {
  // Megatron turns sequence parallelism off at TP 1 (validation warns); the header said ", sequence parallel".
  const auto r = run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml parallel.sequence_parallel=true --quiet");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("Megatron turns sequence parallelism off") != std::string::npos);
  CHECK(r.output.find("whole training step: a2a+p2p [A=2, P=2], TP 1 x CP 4 x DP 2 x PP 1 = 8 GPUs") != std::string::npos);
  CHECK(r.output.find(", sequence parallel") == std::string::npos);
}

TEST_CASE("apps: simulate with block recompute prints the backward of the layers left whole", "[apps][step]") {
  // Block recompute of 1 of the 8 layers: the recomputing layer's backward, then the plain one's; uniform full
  // recompute (every layer) has only the first.
  for (const auto& [recompute, whole] : {std::pair{std::string("training.recompute_method=block "
                                                               "training.recompute_num_layers=1"),
                                                   true},
                                         std::pair{std::string("training.recompute_method=uniform "
                                                               "training.recompute_num_layers=1"),
                                                   false}}) {
    const auto r = run_hcpsim("simulate tests/fixtures/plan/tp_sweep_cp16.yaml training.recompute_granularity=full " +
                              recompute + " --quiet");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const size_t rerun = r.output.find("\n  layer backward  ");
    const size_t plain = r.output.find("\n  layer backward, not recomputed  ");
    REQUIRE(rerun != std::string::npos);
    CHECK((plain != std::string::npos) == whole);
    if (whole) CHECK(plain > rerun);
  }
}
