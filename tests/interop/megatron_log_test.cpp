// Megatron training logs: parsing and the HCP / throughput checks (core/megatron_log.hpp).
#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "catch_compat.hpp"
#include "hcpsim/interop/megatron_log.hpp"

using namespace hcpsim;

namespace {

const std::string kFixtures = std::string(HCPSIM_SOURCE_DIR) + "/tests/fixtures/megatron/";

std::string read_fixture(const std::string& name) {
  std::ifstream in(kFixtures + name, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

const std::string kHealthySizes = "hierarchical_context_parallel_sizes ............. [8, 2]";

}  // namespace

TEST_CASE("log: the healthy fixture parses into world line, arguments and throughput", "[log]") {
  const auto log = parse_megatron_log(read_fixture("log_healthy.txt"), "healthy.txt");
  REQUIRE(log.world.has_value());
  REQUIRE(log.world->line == 3);
  REQUIRE(log.world->world_size == 32);
  REQUIRE(log.world->data_parallel_size == 2);
  REQUIRE(*log.world->context_parallel_size == 16);
  REQUIRE(log.world->reports_hierarchical);
  // Megatron prints no separator after the sizes: "...sizes: [8, 2]tensor-model-parallel size: 1".
  REQUIRE(*log.world->hierarchical_sizes == std::vector<int64_t>{8, 2});
  REQUIRE(log.world->tensor_model_parallel_size == 1);  // not the encoder-tensor-model-parallel size 0
  REQUIRE(log.arguments_begin_line == 5);
  REQUIRE(log.arguments_end_line == 73);
  REQUIRE(log.arguments.size() == 67);
  REQUIRE(log.throughput.size() == 6);
  REQUIRE(log.throughput[0].iteration == 10);
  REQUIRE(log.throughput[0].tflops_per_gpu == 402.3);  // parsed from the same decimal text
  REQUIRE(*log.gpu_name == "H100");
  REQUIRE(log.gpu_line == 1);

  const auto args = interpret_megatron_args(log.arguments, "healthy.txt", true);
  REQUIRE(check_hierarchical_cp(log, args).empty());
  const GpuPeak h100{989.4, "H100", false};
  REQUIRE(check_throughput_peak(log, h100, false).empty());
  REQUIRE(check_throughput_vs_model(log, std::nullopt).empty());
}

TEST_CASE("log: a resumed run appended without its header counts each iteration once", "[log]") {
  // Iterations 20 and 30 reported again after 60 (a resume from the iteration-10 checkpoint, tee -a): they were
  // counted twice, with no word of the restart.
  const std::string healthy = read_fixture("log_healthy.txt");
  const auto lines = static_cast<int>(std::count(healthy.begin(), healthy.end(), '\n'));
  const std::string again =
      " iteration       20/     500 | elapsed time per iteration (ms): 159900.4 | throughput per GPU (TFLOP/s/GPU): "
      "399.0 |\n iteration       30/     500 | throughput per GPU (TFLOP/s/GPU): 398.0 |\n";
  const auto log = parse_megatron_log(healthy + again, "resumed.txt");
  REQUIRE(log.resumed_at.size() == 1);
  CHECK(log.resumed_at[0].iteration == 20);
  CHECK(log.resumed_at[0].line == lines + 1);
  REQUIRE(log.throughput.size() == 3);  // 10, then the resumed 20 and 30 (40-60 of the first run were dropped)
  CHECK(log.throughput[0].iteration == 10);
  CHECK(log.throughput[1].tflops_per_gpu == 399.0);
  CHECK(log.throughput[2].line == lines + 2);
  CHECK(parse_megatron_log(healthy, "h.txt").resumed_at.empty());
  // Throughput lines without an iteration number are no resume (they collapsed into one report).
  const std::string unnumbered = " elapsed time per iteration (ms): 1.0 | throughput per GPU (TFLOP/s/GPU): 300.0 |\n";
  const auto plain = parse_megatron_log(healthy + unnumbered + unnumbered, "plain.txt");
  CHECK(plain.resumed_at.empty());
  CHECK(plain.throughput.size() == 8);
}

TEST_CASE("log: a2a+p2p without hierarchical sizes and throughput above peak (CP silently off)", "[log]") {
  const auto log = parse_megatron_log(read_fixture("log_cp_silently_off.txt"), "off.txt");
  REQUIRE(log.world->reports_hierarchical);
  REQUIRE_FALSE(log.world->hierarchical_sizes.has_value());  // "sizes: Nonetensor-model-parallel size: 1"
  REQUIRE_FALSE(log.gpu_name.has_value());
  const auto args = interpret_megatron_args(log.arguments, "off.txt", true);
  const auto hcp = check_hierarchical_cp(log, args);
  REQUIRE(hcp.size() == 1);
  REQUIRE(hcp[0].line == 14);  // the cp_comm_type argument
  REQUIRE(hcp[0].message ==
          "cp_comm_type a2a+p2p is configured without hierarchical_context_parallel_sizes: Megatron builds no "
          "hierarchical groups, TE receives cp_group=None and training silently runs WITHOUT context parallelism "
          "(each rank attends only to its own chunks); the world-size line (off.txt:2) reports hierarchical "
          "context-parallel sizes: None; fix: set --hierarchical-context-parallel-sizes A P with A*P = "
          "context_parallel_size 16");
  const GpuPeak h100{989.4, "H100-SXM5-80GB", false, 1978.9};
  const auto peak = check_throughput_peak(log, h100, false);
  REQUIRE(peak.size() == 1);
  REQUIRE(peak[0].line == 91);  // iteration 10, the first above the peak
  REQUIRE(peak[0].message.rfind("reported throughput per GPU 1094.7 TFLOP/s (iteration 10) exceeds the dense bf16 "
                                "peak of the GPU, 989.4 TFLOP/s (H100-SXM5-80GB); 6 of 6 reporting iterations are "
                                "above it, max 1102.5 at off.txt:94.",
                                0) == 0);
  // FP8 GEMMs may run up to the dense FP8 peak: 1102.5 < 1978.9.
  REQUIRE(check_throughput_peak(log, h100, true).empty());
  // An A100 has no FP8 tensor cores: an "FP8" run there is held to its bf16 peak, and the message says bf16.
  const GpuPeak a100{312.0, "A100-SXM4-80GB", false, 0.0};
  const auto a100_fp8 = check_throughput_peak(log, a100, true);
  REQUIRE(a100_fp8.size() == 1);
  CHECK(a100_fp8[0].message.find("exceeds the dense bf16 peak of the GPU, 312.0 TFLOP/s") != std::string::npos);
  CHECK(held_peak_tflops(a100, true) == 312.0);
  CHECK(held_peak_tflops(h100, true) == 1978.9);
  CHECK(held_peak_tflops(h100, false) == 989.4);
}

TEST_CASE("log: hierarchical sizes configured but the world-size line shows none", "[log]") {
  const std::string text = replace(read_fixture("log_healthy.txt"), "hierarchical context-parallel sizes: [8, 2]",
                                   "hierarchical context-parallel sizes: None");
  const auto log = parse_megatron_log(text, "h.txt");
  const auto f = check_hierarchical_cp(log, interpret_megatron_args(log.arguments, "h.txt", true));
  REQUIRE(f.size() == 1);
  REQUIRE(f[0].line == 3);
  REQUIRE(f[0].message ==
          "hierarchical context parallelism is configured (cp_comm_type a2a+p2p, hierarchical_context_parallel_sizes "
          "[8, 2] (h.txt:28)) but the world-size line reports hierarchical context-parallel sizes: None: the "
          "hierarchical groups were not built as configured; fix: check that the launch passes "
          "--hierarchical-context-parallel-sizes to this Megatron version");

  // The world-size line's CP size 1 (the arguments: 16), alone and with the sizes lost too: both are named (only
  // "sizes: None" was).
  for (const auto& [world, expected] :
       {std::pair{"context-parallel size: 1, hierarchical context-parallel sizes: [8, 2]",
                  "but the world-size line reports context-parallel size: 1 (the arguments: 16):"},
        std::pair{"context-parallel size: 1, hierarchical context-parallel sizes: None",
                  "reports hierarchical context-parallel sizes: None and context-parallel size: 1 (the arguments: "
                  "16):"}}) {
    const auto changed = parse_megatron_log(
        replace(read_fixture("log_healthy.txt"),
                "context-parallel size: 16, hierarchical context-parallel sizes: [8, 2]", world),
        "h.txt");
    const auto found = check_hierarchical_cp(changed, interpret_megatron_args(changed.arguments, "h.txt", true));
    REQUIRE(found.size() == 1);
    CHECK(found[0].message.find(expected) != std::string::npos);
  }
}

TEST_CASE("log: throughput versus the whole-step model needs a prediction", "[log]") {
  const auto log = parse_megatron_log(read_fixture("log_healthy.txt"), "healthy.txt");
  REQUIRE(check_throughput_vs_model(log, std::nullopt).empty());
  // 412.4 <= 1.5 * 300 = 450: consistent.
  REQUIRE(check_throughput_vs_model(log, 300.0).empty());
  // 1.5 * 250 = 375 < 402.3: every one of the 6 iterations is above.
  const auto f = check_throughput_vs_model(log, 250.0);
  REQUIRE(f.size() == 1);
  REQUIRE(f[0].line == 92);
  REQUIRE(f[0].message == "reported throughput per GPU 402.3 TFLOP/s (iteration 10) is more than 1.5x the "
                          "whole-step model's 250.0 TFLOP/s (6 of 6 reporting iterations); the run did less work "
                          "than configured");
  REQUIRE(check_throughput_vs_model(log, 250.0, 2.0).empty());  // 2 * 250 = 500 > 412.4
}

TEST_CASE("log: empty, binary and truncated files are InputErrors naming the file and what is missing", "[log]") {
  REQUIRE(error_of([] { parse_megatron_log("", "e.txt"); }) ==
          "e.txt: empty file; fix: pass the text log of a Megatron training run (stdout/stderr of rank 0)");
  std::string binary = "PK\x03\x04";
  binary += std::string(1, '\0');
  binary += "\x14\x00\x08";
  REQUIRE(error_of([&] { parse_megatron_log(binary, "b.bin"); })
              .rfind("b.bin: binary file (NUL byte at offset 4), not a text log; fix:", 0) == 0);
  REQUIRE(error_of([] { parse_megatron_log("hello\nworld\n", "t.txt"); })
              .rfind("t.txt: truncated or not a Megatron training log: no arguments block", 0) == 0);
  const std::string full = read_fixture("log_healthy.txt");
  const std::string cut = full.substr(0, full.find("  kv_channels"));
  REQUIRE(error_of([&] { parse_megatron_log(cut, "cut.txt"); })
              .rfind("cut.txt:5:1: truncated log: the arguments block that starts here has no", 0) == 0);
}

TEST_CASE("log: GPU and preset names map to cluster presets", "[log]") {
  REQUIRE(*preset_of_gpu_name("H100") == "dgx-h100");
  REQUIRE(*preset_of_gpu_name("h200") == "dgx-h200");
  REQUIRE(*preset_of_gpu_name("A100-SXM4-80GB") == "dgx-a100");
  REQUIRE(*preset_of_gpu_name("NVIDIA B200") == "dgx-b200");
  REQUIRE(*preset_of_gpu_name("dgx-h100") == "dgx-h100");
  REQUIRE_FALSE(preset_of_gpu_name("H1000").has_value());
  REQUIRE_FALSE(preset_of_gpu_name("MI300X").has_value());
  // Another word after the GPU names another part: never the SXM preset (an H100 PCIe has 756, not 989.4,
  // dense BF16 TFLOP/s). Hyphens and underscores read as spaces.
  for (const char* other : {"H100-PCIe", "h100_pcie", "H100X", "H100 Foo", "H200-NVL", "A100 80GB PCIe"}) {
    INFO(other);
    CHECK_FALSE(preset_of_gpu_name(other).has_value());
  }
  REQUIRE(*preset_of_gpu_name("H100-SXM5-80GB") == "dgx-h100");
  REQUIRE(*preset_of_gpu_name("NVIDIA H200 141GB HBM3e") == "dgx-h200");
  REQUIRE(datasheet_gpu("H100-PCIe")->tflops == 756.0);
  REQUIRE(datasheet_gpu("H100-PCIe")->fp8_tflops == 1513.0);  // 3,026 with sparsity, halved
  REQUIRE(datasheet_gpu("H200-NVL")->tflops == 835.5);
  REQUIRE(datasheet_gpu("NVIDIA A100 80GB PCIe")->fp8_tflops == 0.0);
  REQUIRE(gpu_named_in_line("GPU 0: NVIDIA H100-PCIe (UUID: GPU-0)") == "H100 PCIe");
  REQUIRE_FALSE(gpu_named_in_line("GPU 0: NVIDIA H100X (UUID: GPU-0)").has_value());  // was the SXM preset
  REQUIRE(gpu_named_in_line("GPU 0: NVIDIA H100-SXM5-80GB (UUID: GPU-0)") == "H100");
}

TEST_CASE("log: NaN iterations with CP > 1 name the count, the first iteration and the CP causes", "[log][nan]") {
  const auto log = parse_megatron_log(read_fixture("log_nan_cp.txt"), "nan.txt");
  REQUIRE(log.iteration_lines == 6);
  REQUIRE(log.nan_reports.size() == 2);
  REQUIRE(log.nan_reports[0].line == 94);
  REQUIRE(log.nan_reports[0].iteration == 20);
  REQUIRE(log.nan_reports[0].nan_iterations == 1);
  REQUIRE(log.nan_reports[1].nan_iterations == 2);
  REQUIRE(log.nan_reports[0].non_finite.empty());  // fp16 skips the NaN iterations: the averaged loss stays finite
  const auto f = check_nan_iterations(log, interpret_megatron_args(log.arguments, "nan.txt", true));
  REQUIRE(f.size() == 1);
  REQUIRE(f[0].line == 94);
  REQUIRE(f[0].message.rfind("NaN/Inf in training: 'number of nan iterations' counts 3 iterations on 2 of 6 logged "
                             "iteration lines; first reported at iteration 20 (number of nan iterations: 1), with "
                             "context parallelism (context-parallel size 16, from the world-size line nan.txt:3). "
                             "Known CP causes: a CP rank whose tokens are all padding or loss-masked gives 0/0",
                             0) == 0);
  for (const char* pointer : {"NVIDIA/Megatron-LM#1764", "NVIDIA-NeMo/Megatron-Bridge#2914",
                              "NVIDIA/TransformerEngine#2186", "cu_seqlens_padded", "`hcpsim verify`"})
    REQUIRE(f[0].message.find(pointer) != std::string::npos);

  // The healthy fixture reports "number of nan iterations:   0" on every line: no finding.
  const auto healthy = parse_megatron_log(read_fixture("log_healthy.txt"), "healthy.txt");
  REQUIRE(healthy.iteration_lines == 6);
  REQUIRE(healthy.nan_reports.empty());
  REQUIRE(check_nan_iterations(healthy, std::nullopt).empty());
}

TEST_CASE("log: NaN iterations with CP = 1, or no CP size, are not CP-specific", "[log][nan]") {
  const std::string cp1 =
      replace(read_fixture("log_nan_cp.txt"), "context-parallel size: 16,", "context-parallel size: 1,");
  const auto log = parse_megatron_log(cp1, "cp1.txt");
  const auto f = check_nan_iterations(log, std::nullopt);
  REQUIRE(f.size() == 1);
  REQUIRE(f[0].message.find(", not CP-specific (context-parallel size 1, from the world-size line cp1.txt:3): look "
                            "for the usual causes") != std::string::npos);
  REQUIRE(f[0].message.find("#1764") == std::string::npos);
  REQUIRE(f[0].message.find("Known CP causes") == std::string::npos);

  // Without a world-size line the raw context_parallel_size argument decides.
  const std::string lines = "------------------------ arguments ------------------------\n"
                            "  context_parallel_size ........................... 4\n"
                            "-------------------- end of arguments ---------------------\n"
                            " iteration        5/     100 | lm loss: nan | number of nan iterations:   0 |\n";
  const auto f4 = check_nan_iterations(parse_megatron_log(lines, "a.txt"), std::nullopt);
  REQUIRE(f4.size() == 1);
  REQUIRE(f4[0].line == 4);
  REQUIRE(f4[0].message.find("1 of 1 logged iteration lines show a non-finite loss or grad norm; first reported at "
                             "iteration 5 (lm loss: nan), with context parallelism (context-parallel size 4, from "
                             "the arguments a.txt:2)") != std::string::npos);
  const std::string none = "using world size: 8, data-parallel size: 8, tensor-model-parallel size: 1\n"
                           " iteration       10/     100 | lm loss: NaN |\n";
  const auto fn = check_nan_iterations(parse_megatron_log(none, "n.txt"), std::nullopt);
  REQUIRE(fn.size() == 1);
  REQUIRE(fn[0].message.find("not CP-specific (the log reports no context-parallel size)") != std::string::npos);
}

TEST_CASE("log: NaN and Inf are parsed in every spelling and never read as numbers", "[log][nan]") {
  for (const char* t : {"nan", "NaN", "NAN", "-nan", "+nan", " -nan ", "nan(0x8000000000000)", "inf", "INF", "-INF",
                        "-inf", "Infinity", "-infinity"})
    REQUIRE(is_non_finite_text(t));
  for (const char* t : {"", "1.0E+01", "0.000000E+00", "nano", "info", "nan1", "1e400", "-", "none"})
    REQUIRE_FALSE(is_non_finite_text(t));

  const std::string text =
      "using world size: 8, data-parallel size: 4, context-parallel size: 2, tensor-model-parallel size: 1\n"
      " [2025-01-01 00:00:00] iteration       10/     100 | throughput per GPU (TFLOP/s/GPU): nan | lm loss: "
      "1.000000E+01 | grad norm: inf | number of nan iterations:   0 |\n"
      " [2025-01-01 00:01:00] iteration       20/     100 | throughput per GPU (TFLOP/s/GPU): 400.0 | elapsed time per "
      "iteration (ms): inf | global batch size:   inf | lm loss: -nan | mtp_1 loss: INF | loss scale: inf |\n"
      " [2025-01-01 00:02:00] iteration       30/     100 | throughput per GPU (TFLOP/s/GPU): -inf | lm loss: "
      "9.000000E+00 | number of nan iterations: nan |\n"
      "Training epoch 0, iteration 39/99 | lr: 1.5e-06 | global_batch_size: 8 | reduced_train_loss: NaN |\n"
      " validation loss at iteration 40 | lm loss value: NAN | lm loss PPL: NAN |\n";
  const auto log = parse_megatron_log(text, "spell.txt");
  // Non-finite throughput is no report; non-finite elapsed time and batch size are absent, not numbers.
  REQUIRE(log.throughput.size() == 1);
  REQUIRE(log.throughput[0].iteration == 20);
  REQUIRE(log.throughput[0].tflops_per_gpu == 400.0);
  REQUIRE_FALSE(log.throughput[0].elapsed_ms.has_value());
  REQUIRE_FALSE(log.throughput[0].global_batch_size.has_value());
  REQUIRE(log.iteration_lines == 4);  // the validation line has no "iteration N/ M"
  REQUIRE(log.nan_reports.size() == 3);
  REQUIRE(log.nan_reports[0].non_finite == std::vector<std::string>{"grad norm: inf"});
  REQUIRE(log.nan_reports[1].non_finite == std::vector<std::string>{"lm loss: -nan", "mtp_1 loss: INF"});
  REQUIRE(log.nan_reports[2].iteration == 39);  // NeMo 2's progress line
  REQUIRE(log.nan_reports[2].non_finite == std::vector<std::string>{"reduced_train_loss: NaN"});
  const auto f = check_nan_iterations(log, std::nullopt);
  REQUIRE(f.size() == 1);
  REQUIRE(f[0].line == 2);
  REQUIRE(f[0].message.rfind("NaN/Inf in training: 3 of 4 logged iteration lines show a non-finite loss or grad norm; "
                             "first reported at iteration 10 (grad norm: inf), with context parallelism "
                             "(context-parallel size 2, from the world-size line spell.txt:1)",
                             0) == 0);
  // A NaN throughput is not above the peak (it is no report at all).
  REQUIRE(check_throughput_peak(log, GpuPeak{989.4, "H100", false}, false).empty());
}

TEST_CASE("log: a CP size that differs between the arguments and the world-size line is named as such", "[log]") {
  // The arguments say 8, the world-size line 16 (with [8, 2], as before): two runs, not missing hierarchical groups.
  const std::string text = replace(read_fixture("log_healthy.txt"),
                                   "context_parallel_size ........................... 16",
                                   "context_parallel_size ........................... 8");
  const MegatronLog log = parse_megatron_log(text, "c.txt");
  const std::vector<LogFinding> findings =
      check_hierarchical_cp(log, interpret_megatron_args(log.arguments, "c.txt", true));
  REQUIRE(findings.size() == 1);
  const LogFinding& f = findings.front();
  CHECK(f.line == 3);
  CHECK(f.message ==
        "context_parallel_size 8 in the arguments but the world-size line reports context-parallel size: 16: the two "
        "describe different runs (a log of several runs, or an edited one); fix: check the log against the launch "
        "that wrote it");
}

TEST_CASE("log: a log that several runs appended to splits at each run's world-size line or arguments block",
          "[log]") {
  const std::string world = "using world size: 8, data-parallel size: 4, context-parallel size: 2\n";
  const std::string args = "------------------------ arguments ------------------------\n"
                           "  context_parallel_size ........................... 2\n"
                           "-------------------- end of arguments ---------------------\n";
  const std::string iter = " iteration        1/      10 | throughput per GPU (TFLOP/s/GPU): 400.0 |\n";
  auto ranges = [](const std::string& text) {
    std::vector<std::pair<int, int>> out;
    for (const LogRunRange& r : megatron_log_runs(text)) out.emplace_back(r.first_line, r.last_line);
    return out;
  };
  using Ranges = std::vector<std::pair<int, int>>;
  // One run: launcher lines, the world-size line, the arguments, iterations (lines 1..8).
  const std::string one = "W0101 launcher warning\n" + world + args + iter + iter + iter;
  REQUIRE(ranges(one) == Ranges{{1, 8}});
  // Appended (tee -a): the second run starts at its world-size line (after the first run's arguments).
  REQUIRE(ranges(one + one) == Ranges{{1, 9}, {10, 16}});
  // Runs without world-size lines (an older format): each arguments block starts a run.
  REQUIRE(ranges(args + iter + args + iter + args) == Ranges{{1, 4}, {5, 8}, {9, 11}});
  // Two world-size lines before any arguments: two runs.
  REQUIRE(ranges(world + world + args) == Ranges{{1, 1}, {2, 5}});
  REQUIRE(ranges("") == Ranges{{1, 1}});
  // A run parsed on its own lines keeps the file's line numbers.
  const MegatronLog second = parse_megatron_log(world + args + iter, "log.txt", 10);
  REQUIRE(second.world->line == 10);
  REQUIRE(second.arguments_begin_line == 11);
  REQUIRE(second.arguments.front().line == 12);
  REQUIRE(second.throughput.front().line == 14);
}

TEST_CASE("log: GPU names map to a preset or to a datasheet peak, never an H100 PCIe to the SXM5 preset", "[log]") {
  CHECK(preset_of_gpu_name("H100") == "dgx-h100");
  CHECK(preset_of_gpu_name("NVIDIA H100 80GB HBM3") == "dgx-h100");
  CHECK(!preset_of_gpu_name("NVIDIA H100 PCIe"));
  CHECK(!preset_of_gpu_name("H100 NVL"));
  CHECK(!preset_of_gpu_name("H20"));
  // Dense BF16 = the datasheets' "with sparsity" figures halved.
  CHECK(datasheet_gpu("NVIDIA H100 PCIe")->tflops == 756.0);
  CHECK(datasheet_gpu("h100 nvl")->tflops == 835.5);
  CHECK(datasheet_gpu("NVIDIA GH200 480GB")->tflops == 989.5);
  CHECK(datasheet_gpu("NVIDIA H20")->tflops == 148.0);
  CHECK(datasheet_gpu("NVIDIA L40S")->tflops == 362.05);
  CHECK(!datasheet_gpu("NVIDIA H200"));  // a preset GPU, not "H20" followed by a digit
  CHECK(!datasheet_gpu("H100"));
  CHECK(gpu_named_in_line("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)") == "H100");
  CHECK(gpu_named_in_line("GPU 0: NVIDIA H100 PCIe (UUID: GPU-0)") == "H100 PCIe");
  CHECK(gpu_named_in_line("GPU 3: NVIDIA GH200 480GB (UUID: GPU-3)") == "GH200");
  CHECK(gpu_named_in_line("GPU 0: NVIDIA H20 (UUID: GPU-0)") == "H20");
  CHECK(gpu_named_in_line("GPU 0: NVIDIA H200 (UUID: GPU-0)") == "H200");
  CHECK(!gpu_named_in_line("iteration 100 | lm loss: 2.0 | H2000 tokens"));
}
