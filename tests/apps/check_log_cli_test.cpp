// `hcpsim check-log` through the real binary: logs of restarted jobs and a --scenario that is not the logged run.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "catch_compat.hpp"
#include "run_command.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using hcpsim::test::run_hcpsim;
using hcpsim::test::slurp;

/// A fresh scratch directory for one test case (the caller removes it).
fs::path scratch(const std::string& name) { return hcpsim::test::scratch_dir("check_log_cli_" + name); }

const std::string kDir = "tests/fixtures/megatron/";

}  // namespace

TEST_CASE("apps: check-log checks every run of a log that a restarted job appended to", "[apps][import][check_log]") {
  // The healthy run, then a restart with a2a+p2p and no hierarchical sizes (CP silently off): the second run's
  // finding used to be lost (only the first arguments block was read; result: clean).
  const std::string healthy = slurp(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + "log_healthy.txt");
  const std::string off = slurp(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + "log_cp_silently_off.txt");
  const auto dir = scratch("two_runs");
  const auto log = dir / "log.txt";
  std::ofstream(log) << healthy << off;
  const int first_lines = static_cast<int>(std::count(healthy.begin(), healthy.end(), '\n'));
  // Run 2 starts at its world-size line; the launcher lines before it stay with run 1.
  const auto world_at = off.find("using world size:");
  REQUIRE(world_at != std::string::npos);
  const int second = first_lines + 1 + static_cast<int>(std::count(off.begin(), off.begin() + world_at, '\n'));
  const auto r = run_hcpsim("check-log '" + log.string() + "' --json '" + (dir / "r.json").string() + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  CHECK(r.output.find(": 2 runs in one log (a job restarted and appended to it)") != std::string::npos);
  CHECK(r.output.find(fmt::format("== run 1 of 2: lines 1-{} ==", second - 1)) != std::string::npos);
  CHECK(r.output.find(fmt::format("== run 2 of 2: lines {}-", second)) != std::string::npos);
  // The second run's finding, at its line in the appended file (line 14 of the fixture).
  CHECK(r.output.find(fmt::format("{}:{}: cp_comm_type a2a+p2p is configured without "
                                  "hierarchical_context_parallel_sizes",
                                  log.string(), first_lines + 14)) != std::string::npos);
  CHECK(r.output.find("result: clean\n== run 2 of 2") != std::string::npos);
  CHECK(r.output.find("result: 2 findings over 2 runs\n") != std::string::npos);
  const std::string json = slurp((dir / "r.json").string());
  CHECK(json.find("\"result\": \"findings\"") != std::string::npos);
  CHECK(json.find(fmt::format("\"first_line\": {}", second)) != std::string::npos);
  fs::remove_all(dir);
}


TEST_CASE("apps: check-log names a resumed run that repeats iterations without a header", "[apps][check_log]") {
  const std::string healthy = slurp(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + "log_healthy.txt");
  const auto dir = scratch("resumed");
  const auto log = dir / "log.txt";
  std::ofstream(log) << healthy << " iteration       20/     500 | throughput per GPU (TFLOP/s/GPU): 399.0 |\n";
  const int line = static_cast<int>(std::count(healthy.begin(), healthy.end(), '\n')) + 1;
  const auto r = run_hcpsim("check-log '" + log.string() + "' --json '" + (dir / "r.json").string() + "'");
  INFO(r.output);
  CHECK(r.output.find(fmt::format("resumed run: iteration 20 at {}:{} does not follow", log.string(), line)) !=
        std::string::npos);
  CHECK(r.output.find("throughput: 2 iterations report TFLOP/s per GPU") != std::string::npos);  // 10, then 20
  const auto j = nlohmann::json::parse(slurp((dir / "r.json").string()));
  CHECK(j.at("throughput").at("resumed_lines") == nlohmann::json::array({line}));
  // The FP8 peak a run is held to, beside the bf16 one (the assumed H100: 1978.9 dense FP8 TFLOP/s).
  CHECK(j.at("gpu_peak").at("fp8_tflops_per_gpu") == 1978.9);
  fs::remove_all(dir);
}

TEST_CASE("apps: check-log warns when --scenario is not the logged configuration", "[apps][import][check_log]") {
  const std::string log = kDir + "log_healthy.txt";
  const auto same = run_hcpsim("check-log " + log + " --scenario scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml");
  INFO(same.output);
  CHECK(same.output.find("is not the logged configuration") == std::string::npos);
  const auto other = run_hcpsim("check-log " + log + " --scenario scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  INFO(other.output);
  CHECK(other.output.find("warning: --scenario scenarios/llama32_1b_cp4_a2a_p2p.yaml is not the logged configuration: "
                          "context_parallel_size 4 (log 16), seq_length 8192 (log 131072), num_layers 16 (log 32), "
                          "hidden_size 2048 (log 4096), ffn_hidden_size 8192 (log 14336), world size 8 (log 32); "
                          "the GPU peak and the model comparison are for the scenario\n") != std::string::npos);
  // A scenario without data_parallel_size fills its cluster: 8 nodes are 64 GPUs against the log's 32 (the world
  // size was compared only when the scenario set data_parallel_size).
  const auto dir = scratch("world_mismatch");
  std::ifstream in(std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string eight = std::regex_replace(text.str(), std::regex("\n  nodes: 4\n"), "\n  nodes: 8\n");
  REQUIRE(eight != text.str());
  std::ofstream(dir / "eight_nodes.yaml") << eight;
  const auto nodes = run_hcpsim("check-log " + log + " --scenario " + (dir / "eight_nodes.yaml").string());
  INFO(nodes.output);
  CHECK(nodes.output.find("is not the logged configuration: world size 64 (log 32);") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: check-log predicts a per-layer cp_comm_type list as its mix, and takes sizes with p2p",
          "[apps][import][check_log]") {
  // 16 a2a+p2p + 16 p2p layers were predicted as 32 a2a+p2p; p2p with hierarchical sizes was a finding although
  // Megatron accepts it (the sizes go unused).
  const std::string healthy = slurp(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + "log_healthy.txt");
  const std::string line = "  cp_comm_type .................................... a2a+p2p";
  REQUIRE(healthy.find(line) != std::string::npos);
  std::string mix = "['a2a+p2p'";
  for (int i = 1; i < 32; ++i) mix += i < 16 ? ", 'a2a+p2p'" : ", 'p2p'";
  mix += "]";
  const auto dir = scratch("per_layer");
  auto predicted = [&](const std::string& name, const std::string& value) {
    std::string text = healthy;
    text.replace(text.find(line), line.size(), "  cp_comm_type .................................... " + value);
    std::ofstream(dir / name) << text;
    const auto r = run_hcpsim("check-log '" + (dir / name).string() + "'");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("result: clean") != std::string::npos);
    const auto at = r.output.find("throughput vs. model: predicted ");
    REQUIRE(at != std::string::npos);
    return std::stod(r.output.substr(at + 32));
  };
  const double all_hcp = predicted("hcp.log", "a2a+p2p"), all_p2p = predicted("p2p.log", "p2p");
  const double mixed = predicted("mix.log", mix);
  CHECK(all_p2p < mixed);
  CHECK(mixed < all_hcp);
  fs::remove_all(dir);
}

TEST_CASE("apps: check-log says an FP8 run is held to the FP8 peak", "[apps][import][check_log]") {
  // The line named the bf16 peak only, while the check applied twice it.
  std::string text = slurp(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + "log_healthy.txt");
  text.insert(text.find("  num_layers ...."), "  fp8 ............................................. hybrid\n");
  const auto dir = scratch("fp8_peak");
  std::ofstream(dir / "fp8.log") << text;
  const auto r = run_hcpsim("check-log '" + (dir / "fp8.log").string() + "'");
  INFO(r.output);
  CHECK(r.output.find("; the run uses FP8, held to the dense FP8 peak 1978.9 TFLOP/s\n") != std::string::npos);
  // The FP8 peak is the GPU's own (the datasheet's 3,026 sparse TFLOP/s halved), not twice the bf16 one (1512).
  const auto pcie = run_hcpsim("check-log '" + (dir / "fp8.log").string() + "' --gpu H100-PCIe");
  INFO(pcie.output);
  CHECK(pcie.output.find("GPU peak: 756.0 TFLOP/s dense bf16 (H100 PCIe") != std::string::npos);
  CHECK(pcie.output.find("held to the dense FP8 peak 1513.0 TFLOP/s") != std::string::npos);
  // An A100 has no FP8 tensor cores: the line no longer claims a 624 TFLOP/s FP8 peak.
  const auto a100 = run_hcpsim("check-log '" + (dir / "fp8.log").string() + "' --gpu A100");
  INFO(a100.output);
  CHECK(a100.output.find("the run asks for FP8, but the GPU has no FP8 peak (no FP8 tensor cores, or none given "
                         "for it): held to the bf16 peak") != std::string::npos);
  CHECK(a100.output.find("624.0") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: check-log does not compare a MoE run with the dense model", "[apps][import][check_log]") {
  // num_experts 8 was predicted as the dense model and called consistent.
  std::string text = slurp(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + "log_healthy.txt");
  const auto at = text.find("  num_layers ....");
  REQUIRE(at != std::string::npos);
  text.insert(at, "  num_experts ..................................... 8\n");
  const auto dir = scratch("moe");
  std::ofstream(dir / "moe.log") << text;
  const auto r = run_hcpsim("check-log '" + (dir / "moe.log").string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("throughput vs. model: not checked (the arguments use settings hcpsim does not model: "
                      "num_experts 8; the dense model of the rest would predict another run)") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: check-log finds a NaN loss in NeMo's progress bar", "[apps][import][check_log]") {
  // "reduced_train_loss=nan" inside Lightning's progress bar was missed (only the "name: value" form was read).
  std::string text = slurp(std::string(HCPSIM_SOURCE_DIR) + "/" + kDir + "log_healthy.txt");
  text += "Epoch 0: : 2/100 [00:05<04:10, 2.55s/it, v_num=0, reduced_train_loss=nan, global_step=1.000]\n";
  const auto dir = scratch("nemo_bar");
  std::ofstream(dir / "nemo.log") << text;
  const auto r = run_hcpsim("check-log '" + (dir / "nemo.log").string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("first reported at iteration 2 (reduced_train_loss=nan)") != std::string::npos);
  CHECK(r.output.find("1 of 7 logged iteration lines") != std::string::npos);  // 6 iteration lines + the bar
  // A finite loss in the same form is no finding.
  text.replace(text.find("reduced_train_loss=nan"), 22, "reduced_train_loss=2.31");
  std::ofstream(dir / "ok.log") << text;
  CHECK(run_hcpsim("check-log '" + (dir / "ok.log").string() + "'").exit_code == 0);
  fs::remove_all(dir);
}
