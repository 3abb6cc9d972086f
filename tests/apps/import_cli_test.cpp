// `hcpsim import` and `hcpsim check-log` through the real binary: exit codes, stdout/stderr, files written.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <tuple>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;
using hcpsim::test::run_command;
using hcpsim::test::run_hcpsim;
using hcpsim::test::slurp;

const std::string kDir = "tests/fixtures/megatron/";


/// A fresh scratch directory for one test case.
fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("hcpsim_import_cli_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// check-log on a copy of fixture log `fixture` with its first `from` replaced by `to`; the copy is
/// scratch(name)/log.txt (the caller removes that folder).
struct VariantRun {
  fs::path log;
  hcpsim::test::CommandRun run;
};
VariantRun check_log_variant(const std::string& name, const std::string& fixture, const std::string& from,
                             const std::string& to) {
  std::string text = slurp(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + fixture);
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), to);
  const auto log = scratch(name) / "log.txt";
  std::ofstream(log) << text;
  return {log, run_hcpsim("check-log '" + log.string() + "'")};
}

/// Runs hcpsim with stderr discarded: the output is stdout alone.
hcpsim::test::CommandRun run_stdout_only(const std::string& args) {
  return run_command(std::string("( '") + HCPSIM_BINARY + "' " + args + " 2>/dev/null )");
}

/// Runs hcpsim with stdout discarded: the output is stderr alone.
hcpsim::test::CommandRun run_stderr_only(const std::string& args) {
  return run_command(std::string("( '") + HCPSIM_BINARY + "' " + args + " >/dev/null )");
}

}  // namespace

TEST_CASE("apps: import megatron-args writes a valid scenario equal to the hand-written one", "[apps][import]") {
  const auto r = run_stdout_only("import megatron-args " + kDir + "llama3_8b_128k_launch.sh");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.rfind("# Imported by `hcpsim import megatron-args` from ", 0) == 0);
  REQUIRE(r.output.find("ignored") == std::string::npos);  // unmodelled flags never reach the YAML
  const auto got = hcpsim::load_scenario_text(r.output, "stdout");
  const auto want = hcpsim::load_scenario(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + "llama3_8b_128k_expected.yaml");
  REQUIRE(got.parallel.hierarchical_context_parallel_sizes == want.parallel.hierarchical_context_parallel_sizes);
  REQUIRE(got.parallel.context_parallel_size == want.parallel.context_parallel_size);
  REQUIRE(got.parallel.data_parallel_size == want.parallel.data_parallel_size);
  REQUIRE(got.cluster.nodes == want.cluster.nodes);
  REQUIRE(got.model.seq_length == want.model.seq_length);

  // The same through -o, and from standard input.
  const auto dir = scratch("roundtrip");
  const auto out = dir / "imported.yaml";
  const auto w = run_hcpsim("import megatron-args " + kDir + "llama3_8b_128k_launch.sh -o '" + out.string() + "'");
  REQUIRE(w.exit_code == 0);
  REQUIRE(w.output.find("wrote " + out.string() + " (scenario llama3_8b_128k_launch, valid)") != std::string::npos);
  REQUIRE(slurp(out) == r.output);
  const auto v = run_hcpsim("validate '" + out.string() + "'");
  INFO(v.output);
  REQUIRE(v.exit_code == 0);
  const auto piped = run_command("cat " + kDir + "llama3_8b_128k_launch.sh | ( '" + std::string(HCPSIM_BINARY) +
                                 "' import megatron-args - 2>/dev/null )");
  REQUIRE(piped.exit_code == 0);
  REQUIRE(piped.output.find("name: megatron_args\n") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: import megatron-args lists unmodelled flags on stderr, one line each", "[apps][import]") {
  const auto r = run_stderr_only("import megatron-args " + kDir + "llama3_8b_128k_launch.sh");
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("ignored (not modelled): --rotary-base 500000\n") != std::string::npos);
  REQUIRE(r.output.find("ignored (not modelled): --lr 3.0e-4\n") != std::string::npos);
  REQUIRE(r.output.find("ignored (not modelled): --master_addr $(hostname)\n") != std::string::npos);
  REQUIRE(r.output.find("note: " + kDir + "llama3_8b_128k_launch.sh:11: cannot resolve command substitution "
                        "'$(hostname)'") != std::string::npos);
  REQUIRE(r.output.find("note: vocab_size not set: Megatron takes it from the tokenizer (HuggingFaceTokenizer "
                        "meta-llama/Meta-Llama-3-8B)") != std::string::npos);
  REQUIRE(r.output.find("schema_version") == std::string::npos);  // the YAML goes to stdout only
}

TEST_CASE("apps: an invalid import exits 2, names the script line and writes nothing", "[apps][import]") {
  const auto dir = scratch("invalid");
  const auto script = dir / "bad_launch.sh";
  {
    std::ofstream f(script);
    f << "#!/bin/bash\n"
         "CP=16\n"
         "torchrun --nnodes 4 --nproc_per_node 8 pretrain_gpt.py \\\n"
         "  --num-attention-heads 32 --group-query-attention --num-query-groups 8 --hidden-size 4096 \\\n"
         "  --seq-length 131072 --context-parallel-size $CP --cp-comm-type a2a+p2p \\\n"
         "  --hierarchical-context-parallel-sizes 4 2 --bf16\n";
  }
  const auto out = dir / "out.yaml";
  const auto r = run_hcpsim("import megatron-args '" + script.string() + "' -o '" + out.string() + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("error: " + script.string() + ":6:3: parallel.hierarchical_context_parallel_sizes: 4*2 = 8 != "
                        "context_parallel_size 16; fix: ") != std::string::npos);
  REQUIRE_FALSE(fs::exists(out));
  REQUIRE_FALSE(fs::exists(out.string() + ".tmp"));
  const auto silent = run_stdout_only("import megatron-args '" + script.string() + "'");
  REQUIRE(silent.exit_code == 2);
  REQUIRE(silent.output.empty());  // nothing on stdout

  // a2a+p2p without sizes: the silent-CP-off rule, at the --cp-comm-type line.
  {
    std::ofstream f(script);
    f << "torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py --num-attention-heads 32 --kv-channels 128 \\\n"
         "  --seq-length 8192 --context-parallel-size 4 \\\n"
         "  --cp-comm-type a2a+p2p\n";
  }
  const auto r2 = run_hcpsim("import megatron-args '" + script.string() + "' -o '" + out.string() + "'");
  REQUIRE(r2.exit_code == 2);
  REQUIRE(r2.output.find(script.string() + ":3:3: parallel.cp_comm_type: cp_comm_type a2a+p2p needs "
                                           "hierarchical_context_parallel_sizes") != std::string::npos);
  REQUIRE_FALSE(fs::exists(out));

  const auto r3 = run_hcpsim("import megatron-args " + kDir + "llama3_8b_128k_launch.sh --cluster dgx-h900");
  REQUIRE(r3.exit_code == 2);
  REQUIRE(r3.output.find("--cluster: unknown cluster preset 'dgx-h900'; fix: use one of: dgx-a100") !=
          std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: import bridge-config reads the Bridge fixture", "[apps][import]") {
  const auto r = run_stdout_only("import bridge-config " + kDir + "llama3_8b_128k_bridge.yaml --nodes 2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto s = hcpsim::load_scenario_text(r.output, "stdout");
  REQUIRE(*s.parallel.hierarchical_context_parallel_sizes == std::vector<int64_t>{4, 2});
  REQUIRE(s.parallel.tensor_model_parallel_size == 2);
  REQUIRE(*s.parallel.data_parallel_size == 1);  // 2 nodes * 8 GPUs / (TP 2 * CP 8 * PP 1)
  REQUIRE(s.cluster.nodes == 2);
  // The node count's comment names where it came from (a Bridge config has no launcher).
  REQUIRE(r.output.find("# hcpsim import --nodes 2") != std::string::npos);
  REQUIRE(r.output.find("torchrun's default") == std::string::npos);
  REQUIRE(s.parallel.sequence_parallel);
  REQUIRE(s.training.fp8);
  const auto e = run_stderr_only("import bridge-config " + kDir + "llama3_8b_128k_bridge.yaml --nodes 2");
  REQUIRE(e.output.find("ignored (not modelled): model.rotary_base: 500000\n") != std::string::npos);
  REQUIRE(e.output.find("ignored (not modelled): tokenizer.tokenizer_type: HuggingFaceTokenizer\n") !=
          std::string::npos);
  REQUIRE(e.output.find("_target_") == std::string::npos);
}

TEST_CASE("apps: check-log on the healthy fixture is clean, its throughput consistent with the whole-step model",
          "[apps][import]") {
  const auto r = run_hcpsim("check-log " + kDir + "log_healthy.txt");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("  GPU peak: 989.4 TFLOP/s dense bf16 (H100-SXM5-80GB, named by the log at " + kDir +
                        "log_healthy.txt:1)") != std::string::npos);
  // The arguments plus the log's "padded vocab (size: 128256)" line give the whole-step model its input; the
  // prediction is the larger (full-attention) Megatron convention.
  REQUIRE(r.output.find("  throughput vs. model: predicted 682.3 TFLOP/s per GPU (megatron_full_attention convention, identified "
                        "from the log's iteration times); consistent (limits: median at least 0.55x, every iteration at most "
                        "1.5x)") !=
          std::string::npos);
  REQUIRE(r.output.find("result: clean") != std::string::npos);
}

TEST_CASE("apps: check-log on the CP-silently-off fixture quotes both findings with line numbers", "[apps][import]") {
  const std::string log = kDir + "log_cp_silently_off.txt";
  const auto r = run_hcpsim("check-log " + log);
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.find("  GPU peak: 989.4 TFLOP/s dense bf16 (assumed H100/H200-class: no --scenario, --gpu or GPU "
                        "name in the log) [assumption]") != std::string::npos);
  REQUIRE(r.output.find("\n" + log + ":14: cp_comm_type a2a+p2p is configured without "
                        "hierarchical_context_parallel_sizes: ") != std::string::npos);
  REQUIRE(r.output.find("    | cp_comm_type .................................... a2a+p2p\n") != std::string::npos);
  REQUIRE(r.output.find("\n" + log + ":91: reported throughput per GPU 1094.7 TFLOP/s (iteration 10) exceeds the "
                        "dense bf16 peak of the GPU, 989.4 TFLOP/s") != std::string::npos);
  REQUIRE(r.output.find("result: 2 findings") != std::string::npos);
  // On a B200 (2250 TFLOP/s) the throughput is plausible; the configuration finding stays.
  const auto b = run_hcpsim("check-log " + log + " --gpu B200");
  REQUIRE(b.exit_code == 1);
  REQUIRE(b.output.find("result: 1 finding\n") != std::string::npos);
  const auto s = run_hcpsim("check-log " + log + " --scenario scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml");
  REQUIRE(s.exit_code == 1);
  REQUIRE(s.output.find("(H100-SXM5-80GB, from --scenario scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml)") !=
          std::string::npos);
  // With the scenario, the whole-step model predicts 647.0 TFLOP/s per GPU (full-attention convention); the log's
  // 1094.7 is more than 1.5x that: a third finding.
  REQUIRE(s.output.find("throughput vs. model: predicted 647.0 TFLOP/s per GPU (megatron_full_attention convention, identified "
                        "from the log's iteration times); exceeded (limits: median at least 0.55x, every iteration at most "
                        "1.5x)") !=
          std::string::npos);
  REQUIRE(s.output.find(log + ":91: reported throughput per GPU 1094.7 TFLOP/s (iteration 10) is more than 1.5x the "
                        "whole-step model's 647.0 TFLOP/s") != std::string::npos);
  REQUIRE(s.output.find("result: 3 findings") != std::string::npos);
  const auto bad = run_hcpsim("check-log " + log + " --gpu TPUv5");
  REQUIRE(bad.exit_code == 2);
  REQUIRE(bad.output.find("--gpu: unknown GPU 'TPUv5'") != std::string::npos);
}

TEST_CASE("apps: check-log reports validation errors of the arguments at their lines", "[apps][import]") {
  const auto [log, r] = check_log_variant("validation", "log_healthy.txt",
                                          "hierarchical_context_parallel_sizes ............. [8, 2]",
                                          "hierarchical_context_parallel_sizes ............. [4, 2]");
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  // (a) the world-size line shows [8, 2], not the configured [4, 2]
  REQUIRE(r.output.find(log.string() + ":3: hierarchical context parallelism is configured (cp_comm_type a2a+p2p, "
                                       "hierarchical_context_parallel_sizes [4, 2]") != std::string::npos);
  // (c) validate_scenario on the arguments, at the hierarchical sizes argument
  REQUIRE(r.output.find(log.string() + ":28: the arguments fail validation: "
                                       "parallel.hierarchical_context_parallel_sizes: 4*2 = 8 != context_parallel_size "
                                       "16; fix: ") != std::string::npos);
  fs::remove_all(log.parent_path());
}

TEST_CASE("apps: check-log exits 2 on empty, binary, truncated and missing files", "[apps][import]") {
  const auto dir = scratch("bad_logs");
  const auto empty = dir / "empty.txt";
  std::ofstream(empty).close();
  auto r = run_hcpsim("check-log '" + empty.string() + "'");
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("error: " + empty.string() + ": empty file; fix: ") != std::string::npos);

  const auto binary = dir / "model.pt";
  {
    std::ofstream f(binary, std::ios::binary);
    const unsigned char bytes[] = {0x80, 0x02, 0x63, 0x00, 0x00, 0xff, 0x10, 0x01, 0x42, 0x00};
    f.write(reinterpret_cast<const char*>(bytes), sizeof bytes);
  }
  r = run_hcpsim("check-log '" + binary.string() + "'");
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("error: " + binary.string() + ": binary file (NUL byte at offset 3), not a text log") !=
          std::string::npos);

  const std::string full = slurp(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + "log_healthy.txt");
  const auto cut = dir / "cut.txt";
  std::ofstream(cut) << full.substr(0, full.find("  kv_channels"));
  r = run_hcpsim("check-log '" + cut.string() + "'");
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("error: " + cut.string() + ":5:1: truncated log: the arguments block that starts here has no") !=
          std::string::npos);

  const auto other = dir / "other.txt";
  std::ofstream(other) << "epoch 1 loss 2.3\nepoch 2 loss 2.1\n";
  r = run_hcpsim("check-log '" + other.string() + "'");
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("error: " + other.string() + ": truncated or not a Megatron training log: no arguments block") !=
          std::string::npos);

  r = run_hcpsim("check-log " + (dir / "missing.txt").string());
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("cannot open the log file") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: check-log identifies the log's FLOP convention from its iteration times", "[apps][import]") {
  // The healthy fixture's times are those of the pre-2025-03-06 convention (full s^2). Rescaling every elapsed time
  // by causal / full model FLOPs of its configuration (Llama-3-8B, s = 128K, h = 4096, L = 32, GQA 32/8, SwiGLU
  // ffn 14336, vocab 128256) makes the same reported TFLOP/s the causal convention's.
  const double rest = 1 + 8.0 / 32 + 14336.0 / 4096 * 1.5 + 128256.0 / (2 * 32 * 4096);
  const double ratio = (rest + 0.5 * 131072 / 4096) / (rest + 131072.0 / 4096);
  std::string text = slurp(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + "log_healthy.txt");
  const std::string key = "elapsed time per iteration (ms): ";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    const size_t b = at + key.size();
    const size_t e = text.find(' ', b);
    const double ms = std::stod(text.substr(b, e - b));
    text.replace(b, e - b, fmt::format("{:.1f}", ms * ratio));
  }
  const auto dir = scratch("causal_log");
  {
    std::ofstream out(dir / "causal.txt", std::ios::binary);
    out << text;
  }
  const auto r = run_hcpsim("check-log " + (dir / "causal.txt").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("(megatron_causal convention, identified from the log's iteration times); consistent") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("apps: check-log reports NaN iterations, with the CP causes when CP > 1", "[apps][import]") {
  const std::string log = kDir + "log_nan_cp.txt";
  const auto r = run_hcpsim("check-log " + log);
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.find("\n" + log + ":94: NaN/Inf in training: 'number of nan iterations' counts 3 iterations on 2 "
                        "of 6 logged iteration lines; first reported at iteration 20 (number of nan iterations: 1), "
                        "with context parallelism (context-parallel size 16, from the world-size line " + log +
                        ":3). Known CP causes: ") != std::string::npos);
  for (const char* pointer : {"(NVIDIA/Megatron-LM#1764, NVIDIA-NeMo/Megatron-Bridge#2914)",
                              "(NVIDIA/TransformerEngine#2186); fix: check that no CP rank's tokens are all "
                              "padding or loss-masked (if the run packs sequences: cu_seqlens_padded",
                              "`hcpsim verify`"})
    REQUIRE(r.output.find(pointer) != std::string::npos);
  REQUIRE(r.output.find("    | [2025-01-01 12:53:55] iteration       20/     500 |") != std::string::npos);
  REQUIRE(r.output.find("result: 1 finding\n") != std::string::npos);

  // The same log with CP 1 on the world-size line: the NaN finding stays, without the CP pointer.
  const auto [cp1, c] =
      check_log_variant("nan_cp1", "log_nan_cp.txt", "context-parallel size: 16,", "context-parallel size: 1,");
  INFO(c.output);
  REQUIRE(c.exit_code == 1);
  REQUIRE(c.output.find(cp1.string() + ":94: NaN/Inf in training: 'number of nan iterations' counts 3 iterations") !=
          std::string::npos);
  REQUIRE(c.output.find(", not CP-specific (context-parallel size 1, from the world-size line " + cp1.string() +
                        ":3): look for the usual causes") != std::string::npos);
  REQUIRE(c.output.find("#1764") == std::string::npos);
  fs::remove_all(cp1.parent_path());

  // The healthy fixture ("number of nan iterations:   0" on every line) stays clean.
  const auto h = run_hcpsim("check-log " + kDir + "log_healthy.txt");
  REQUIRE(h.exit_code == 0);
  REQUIRE(h.output.find("NaN") == std::string::npos);
  REQUIRE(h.output.find("result: clean\n") != std::string::npos);
}

TEST_CASE("apps: inputs that crashed import and check-log are exit 2 or read (fuzz regressions)", "[apps][import]") {
  // tests/interop/interop_fuzz_regression_test.cpp has the library side; here the exit codes of the binary.
  const auto dir = scratch("fuzz_regressions");
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  };
  const std::string model =
      "model:\n  num_layers: 4\n  hidden_size: 1024\n  num_attention_heads: 8\n  seq_length: 8192\n";
  auto r = run_hcpsim("import bridge-config " + write("alias.yaml", model + "opt: &a {x: *a}\n"));  // was SIGSEGV
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("alias.yaml:6:6: opt.x.x.x") != std::string::npos);
  r = run_hcpsim("import bridge-config " + write("key.yaml", model + "? [a, b]\n: 1\n"));  // was exit 4
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("key.yaml:6:3: a key must be a plain name, not a sequence") != std::string::npos);
  r = run_hcpsim("import megatron-args " +
                 write("array.sh", "ARR=( --seq-length ; 1024 )\npython pretrain_gpt.py --num-attention-heads 8 "
                                   "--hidden-size 1024 --seq-length 1024 --num-layers 2 --=5\n"));  // was out of memory
  CHECK(r.exit_code == 0);
  r = run_hcpsim("check-log " + write("world.log", "using world size: 99999999999999999999, data-parallel size: 1\n"));
  CHECK(r.exit_code == 2);  // was exit 4, "internal error: stoll"
  CHECK(r.output.find("world.log:1: using world size: '99999999999999999999' is not a 64-bit integer") !=
        std::string::npos);
  const std::string long_line = "using world size: 8, data-parallel size: 8\n"
                                "------------------------ arguments ------------------------\n  num_layers " +
                                std::string(200000, '.') + " 4\n"
                                "-------------------- end of arguments ---------------------\n";
  r = run_hcpsim("check-log " + write("long.log", long_line));  // was SIGSEGV (std::regex recursion)
  CHECK(r.exit_code >= 0);
  CHECK(r.exit_code <= 2);
  CHECK(r.output.find("long.log:2-4: 1 arguments") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: import of torchrun --nproc_per_node gpu counts every GPU of the preset's nodes", "[apps][import]") {
  const auto dir = scratch("nproc_gpu");
  const auto script = dir / "launch.sh";
  const std::string args =
      " pretrain_gpt.py --num-layers=32 --hidden-size=4096 --num-attention-heads=32 --group-query-attention "
      "--num-query-groups=8 --seq-length=131072 --micro-batch-size=1 --global-batch-size=64 "
      "--context-parallel-size=16 --cp-comm-type=a2a+p2p --hierarchical-context-parallel-sizes 8 2 "
      "--vocab-size=128256 --bf16 --swiglu\n";
  for (const auto& [launcher, nodes, dp] :
       {std::tuple{"torchrun --nproc_per_node=gpu --nnodes=4", 4, 2},  // 4 x 8 GPUs / CP 16: DP 2 (was DP 1)
        std::tuple{"torchrun --nproc_per_node=gpu", 2, 1}}) {           // one node by torchrun's default: too small
    std::ofstream(script) << launcher << args;
    const auto r = run_stdout_only("import megatron-args '" + script.string() + "'");
    INFO(launcher << "\n" << r.output);
    if (nodes == 4) {
      REQUIRE(r.exit_code == 0);
      const auto s = hcpsim::load_scenario_text(r.output, "stdout");
      CHECK(s.cluster.nodes == 4);
      CHECK(*s.parallel.data_parallel_size == dp);
    } else {
      CHECK(r.exit_code == 2);  // 8 GPUs of one node cannot hold CP 16: named, not assumed away
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("apps: check-log models the log's gradient-reduction dtype (accumulate_allreduce_grads_in_fp32)",
          "[apps][import]") {
  // The fixture's validated arguments say True (Megatron's bf16 rule): 682.3 TFLOP/s. A run with
  // --grad-reduce-in-bf16 prints False, and its DP gradient reduce-scatter moves half the bytes.
  const auto v = check_log_variant("grad_bf16", "log_healthy.txt",
                                   "accumulate_allreduce_grads_in_fp32 .............. True",
                                   "accumulate_allreduce_grads_in_fp32 .............. False");
  INFO(v.run.output);
  REQUIRE(v.run.exit_code == 0);
  REQUIRE(v.run.output.find("throughput vs. model: predicted 682.6 TFLOP/s per GPU") != std::string::npos);
  fs::remove_all(v.log.parent_path());
}

TEST_CASE("apps: import takes the node count of '--nnodes $SLURM_NNODES' from --nodes, and notes a replaced --nnodes",
          "[apps][import]") {
  const auto dir = scratch("slurm_nodes");
  const auto script = dir / "launch.sh";
  const std::string args =
      " pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention "
      "--num-query-groups 8 --seq-length 131072 --context-parallel-size 16 --cp-comm-type a2a+p2p "
      "--hierarchical-context-parallel-sizes 8 2 --vocab-size 128256 --bf16 --swiglu\n";
  std::ofstream(script) << "torchrun --nnodes $SLURM_NNODES --nproc_per_node 8" << args;
  auto r = run_hcpsim("import megatron-args '" + script.string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find(script.string() + ":1:10: --nnodes: cannot resolve '--nnodes $SLURM_NNODES': the job's "
                      "environment sets the node count; fix: give the node count the job runs on: hcpsim import "
                      "megatron-args FILE --nodes N") != std::string::npos);
  r = run_hcpsim("import megatron-args '" + script.string() + "' --nodes 4 -o '" + (dir / "s.yaml").string() + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("note: --nnodes $SLURM_NNODES: 4 nodes, from --nodes") != std::string::npos);
  auto s = hcpsim::load_scenario((dir / "s.yaml").string());
  CHECK(s.cluster.nodes == 4);
  CHECK(*s.parallel.data_parallel_size == 2);
  // A --nnodes the script gives is replaced by --nodes, with a note (it used to be replaced silently).
  std::ofstream(script) << "torchrun --nnodes 4 --nproc_per_node 8" << args;
  r = run_hcpsim("import megatron-args '" + script.string() + "' --nodes 2 -o '" + (dir / "s2.yaml").string() + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("note: --nodes 2 replaces the script's --nnodes 4 (line 1)") != std::string::npos);
  CHECK(hcpsim::load_scenario((dir / "s2.yaml").string()).cluster.nodes == 2);
  fs::remove_all(dir);
}

TEST_CASE("apps: import takes '--nproc_per_node $SLURM_GPUS_ON_NODE' from --gpus-per-node", "[apps][import]") {
  const auto dir = scratch("slurm_gpus");
  const auto script = dir / "launch.sh";
  const std::string args =
      " pretrain_gpt.py --num-layers 16 --hidden-size 2048 --num-attention-heads 32 --group-query-attention "
      "--num-query-groups 8 --seq-length 32768 --context-parallel-size 4 --vocab-size 128256 --bf16 --swiglu\n";
  std::ofstream(script) << "torchrun --nnodes 2 --nproc_per_node $SLURM_GPUS_ON_NODE" << args;
  auto r = run_hcpsim("import megatron-args '" + script.string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);  // was an error with no option to give the count
  CHECK(r.output.find(":1:21: --nproc_per_node: cannot resolve '--nproc_per_node $SLURM_GPUS_ON_NODE': the job's "
                      "environment sets the processes per node; fix: give the GPUs per node the job uses: hcpsim "
                      "import megatron-args FILE --gpus-per-node G") != std::string::npos);
  r = run_hcpsim("import megatron-args '" + script.string() + "' --gpus-per-node 4 -o '" + (dir / "s.yaml").string() +
                 "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("note: --nproc_per_node $SLURM_GPUS_ON_NODE: 4 GPUs per node, from --gpus-per-node") !=
        std::string::npos);
  auto s = hcpsim::load_scenario((dir / "s.yaml").string());
  CHECK(s.cluster.nodes == 2);
  CHECK(s.cluster.gpus_per_node == 4);
  CHECK(*s.parallel.data_parallel_size == 2);  // 2 nodes x 4 GPUs / CP 4
  // A count the script gives is replaced, with a note.
  std::ofstream(script) << "torchrun --nnodes 1 --nproc_per_node 8" << args;
  r = run_hcpsim("import megatron-args '" + script.string() + "' --gpus-per-node 4 -o '" + (dir / "s2.yaml").string() +
                 "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("note: --gpus-per-node 4 replaces the script's --nproc_per_node 8 (line 1)") != std::string::npos);
  s = hcpsim::load_scenario((dir / "s2.yaml").string());
  CHECK(s.cluster.gpus_per_node == 4);
  CHECK(*s.parallel.data_parallel_size == 1);
  fs::remove_all(dir);
}

TEST_CASE("apps: import of a run on 4 of a node's 8 GPUs keeps one NIC per GPU and validates", "[apps][import]") {
  const auto dir = scratch("nproc4");
  const auto script = dir / "launch.sh";
  std::ofstream(script) << "torchrun --standalone --nproc_per_node=4 pretrain_gpt.py --num-layers 16 "
                           "--hidden-size 2048 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
                           "--seq-length 32768 --context-parallel-size 4 --vocab-size 128256 --bf16 --swiglu\n";
  const auto r = run_stdout_only("import megatron-args '" + script.string() + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);  // was exit 2: gpus_per_node 4 is not a multiple of the preset's 8 NICs
  CHECK(r.output.find("  nics_per_node: 4") != std::string::npos);
  const auto s = hcpsim::load_scenario_text(r.output, "stdout");
  CHECK(s.cluster.gpus_per_node == 4);
  CHECK(s.cluster.nics_per_node == 4);
  CHECK_NOTHROW(hcpsim::validate_scenario(s, hcpsim::ValidationScope::placement));
  fs::remove_all(dir);
}

TEST_CASE("apps: import refuses full recompute without its method and layer count, as Megatron-Core does",
          "[apps][import]") {
  const auto dir = scratch("full_recompute");
  const auto script = dir / "launch.sh";
  const std::string line = "python pretrain_gpt.py --num-layers 8 --hidden-size 1024 --num-attention-heads 16 "
                           "--seq-length 8192 --recompute-granularity full";
  std::ofstream(script) << line << "\n";
  auto r = run_hcpsim("import megatron-args '" + script.string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find(script.string() + ":1:101: --recompute-granularity: full recompute without --recompute-method "
                      "and --recompute-num-layers: Megatron-Core's TransformerConfig raises") != std::string::npos);
  CHECK(r.output.find("fix: add --recompute-method uniform --recompute-num-layers 1") != std::string::npos);
  std::ofstream(script) << line << " --recompute-method block\n";
  r = run_hcpsim("import megatron-args '" + script.string() + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("full recompute without --recompute-num-layers:") != std::string::npos);
  std::ofstream(script) << line << " --recompute-method uniform --recompute-num-layers 1\n";
  r = run_stdout_only("import megatron-args '" + script.string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("  recompute_num_layers: 1") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: check-log holds a log from a GPU without a preset to its datasheet peak", "[apps][import]") {
  // An H100 PCIe (756 TFLOP/s dense BF16) used to be read as the 989.4 TFLOP/s SXM5; an H20 (148) was not
  // recognised at all ("no GPU name in the log").
  auto v = check_log_variant("pcie", "log_healthy.txt", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe");
  INFO(v.run.output);
  CHECK(v.run.exit_code == 0);
  CHECK(v.run.output.find("  GPU peak: 756.0 TFLOP/s dense bf16 (H100 PCIe (NVIDIA H100 datasheet: BF16 1,513 / FP8 "
                          "3,026 TFLOPS with sparsity), named by the log at " + v.log.string() + ":1)") !=
        std::string::npos);
  CHECK(v.run.output.find("throughput vs. model: not checked (no cluster preset for the H100 PCIe: give --scenario "
                          "with its cluster.gpu)") != std::string::npos);
  fs::remove_all(v.log.parent_path());
  v = check_log_variant("h20", "log_healthy.txt", "NVIDIA H100 80GB HBM3", "NVIDIA H20");
  INFO(v.run.output);
  CHECK(v.run.exit_code == 1);  // 402.3 TFLOP/s reported is far above an H20's 148
  CHECK(v.run.output.find("exceeds the dense bf16 peak of the GPU, 148.0 TFLOP/s (H20") != std::string::npos);
  fs::remove_all(v.log.parent_path());
}

TEST_CASE("apps: import bridge-config names the Bridge spelling of a key in its fixes", "[apps][import]") {
  const auto dir = scratch("bridge_keys");
  std::ofstream(dir / "b.yaml") << "model:\n  num_attention_heads: 32\n  num_query_groups: 8\n  kv_channels: 128\n"
                                   "  seq_length: 8192\n  num_layers: 4\n  hidden_size: 4096\n  context_parallel_size: 2\n"
                                   "  fp8: hybrid\n  bf16: true\nmixed_precision:\n  fp8_param_gather: true\nddp:\n"
                                   "  use_distributed_optimizer: false\n";
  const auto r = run_hcpsim("import bridge-config '" + (dir / "b.yaml").string() + "' --nodes 1");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  // The scenario's key is parallel.use_distributed_optimizer; the config the user edits spells it ddp.*.
  CHECK(r.output.find("fix: set ddp.use_distributed_optimizer: true, or remove fp8_param_gather") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: import refuses a misspelling of a flag or key it reads, as Megatron and Bridge do", "[apps][import]") {
  // --context-paralel-size was listed as ignored and CP silently became 1 (DP 8), exit 0 and "valid".
  const auto dir = scratch("misspelled");
  const std::string line = "torchrun --nproc_per_node=8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
                           "--num-attention-heads 8 --seq-length 4096 --max-position-embeddings 4096 "
                           "--micro-batch-size 1 --bf16 --fp16 --context-paralel-size 8\n";
  std::ofstream(dir / "launch.sh") << line;
  auto r = run_hcpsim("import megatron-args '" + (dir / "launch.sh").string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("launch.sh:1:" + std::to_string(line.find("--context-paralel-size") + 1) +
                      ": --context-paralel-size: unknown flag; did you mean --context-parallel-size? (Megatron "
                      "refuses it: unrecognized arguments); fix: spell it --context-parallel-size") != std::string::npos);
  // Short real flags two edits apart are no misspelling (--fp16 next to --bf16: the misspelling is reported, not
  // Megatron's assert against the pair, as argparse stops first), and a misspelling of a flag the script also sets
  // correctly is only ignored.
  std::string both = line.substr(0, line.size() - 1) + " --context-parallel-size 2\n";
  both.erase(both.find(" --fp16"), 7);
  std::ofstream(dir / "both.sh") << both;
  r = run_hcpsim("import megatron-args '" + (dir / "both.sh").string() + "'");
  CHECK(r.output.find("context_parallel_size: 2") != std::string::npos);
  CHECK(r.output.find("unknown flag") == std::string::npos);
  std::ofstream(dir / "b.yaml") << "model:\n  num_attention_heads: 8\n  num_query_groups: 8\n  kv_channels: 128\n"
                                   "  seq_length: 8192\n  num_layers: 4\n  hidden_size: 1024\n  contex_parallel_size: 8\n";
  r = run_hcpsim("import bridge-config '" + (dir / "b.yaml").string() + "' --nodes 1");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("b.yaml:8:3: model.contex_parallel_size: unknown key; did you mean model.context_parallel_size? "
                      "(a Bridge config refuses an unknown field); fix: spell it model.context_parallel_size") !=
        std::string::npos);
  // The misspelling fixed by a Bridge override on the command line instead of in the file.
  r = run_hcpsim("import bridge-config '" + (dir / "b.yaml").string() + "' --nodes 1 model.contex_parallel_size=null "
                 "model.context_parallel_size=8 mixed_precision=bf16_mixed");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("context_parallel_size: 8                        # override 'model.context_parallel_size=8'") !=
        std::string::npos);
  fs::remove_all(dir);
}
