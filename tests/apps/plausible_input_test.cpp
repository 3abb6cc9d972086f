// Numbers outside their plausible range are refused when the scenario is loaded, so `validate` and `simulate`
// agree and `simulate` never aborts on a scenario `validate` accepted (config/include/hcpsim/config/plausible_ranges.hpp).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "catch_compat.hpp"
#include "run_command.hpp"

using hcpsim::test::run_hcpsim;

namespace {
const std::string kScenario = "scenarios/llama32_1b_cp4_a2a_p2p.yaml";
}

TEST_CASE("apps: implausible cluster and model numbers are input errors in validate and simulate", "[apps][robustness]") {
  // Each override once made `simulate` abort on an internal assertion while `validate` accepted it.
  const std::vector<std::pair<std::string, std::string>> cases{
      {"cluster.nvlink.bandwidth_GB_per_s=1e308", "outside the plausible range [0.1, 10000] GB/s"},
      {"cluster.gpu.hbm_bandwidth_GB_per_s=1e308", "outside the plausible range [10, 1000000] GB/s"},
      {"cluster.gpu.peak_bf16_TFLOP_per_s=1e-300", "outside the plausible range [1, 100000] TFLOP/s"},
      {"cluster.message_latency_us=1e300", "outside the plausible range [0, 100000] us"},
      {"cluster.gpu.kernel_launch_overhead_us=1e300", "outside the plausible range [0, 10000] us"},
      {"cluster.nvlink.bandwidth_GB_per_s=1e-300", "outside the plausible range [0.1, 10000] GB/s"},
      {"model.num_attention_heads=1048576", "outside the plausible range [1, 16384]"},
  };
  for (const auto& [override_text, needle] : cases) {
    for (const char* command : {"validate", "simulate"}) {
      const auto r = run_hcpsim(std::string(command) + " " + kScenario + " " + override_text);
      INFO(command << " " << override_text << ": " << r.output);
      CHECK(r.exit_code == 2);
      const std::string key = override_text.substr(0, override_text.find('='));
      CHECK(r.output.find("override '" + override_text + "'") != std::string::npos);
      CHECK(r.output.find(key + ": ") != std::string::npos);
      CHECK(r.output.find(needle) != std::string::npos);
    }
  }
}

TEST_CASE("apps: plausible numbers whose product is no real step are an input error, not an abort", "[apps][robustness]") {
  // 1 TFLOP/s and a 1M-token sequence: each ring-step kernel would last ~1300 s, beyond the range of kernels that
  // share a GPU (int64 picoseconds × the sharing scale).
  const auto r = run_hcpsim("simulate " + kScenario + " cluster.gpu.peak_bf16_TFLOP_per_s=1 model.seq_length=1048576");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("simulation: cp rank 0 op 15 ('fwd step 0 diagonal') is a kernel of 1.31e+03 s") !=
        std::string::npos);
  CHECK(r.output.find("fix: check the model size") != std::string::npos);
}

TEST_CASE("apps: symlink loops and implausible launcher counts are input errors, not internal ones", "[apps][robustness]") {
  const auto dir = std::filesystem::temp_directory_path() / ("hcpsim_loops_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "scen");
  std::filesystem::create_symlink("b.yaml", dir / "scen" / "a.yaml");
  std::filesystem::create_symlink("a.yaml", dir / "scen" / "b.yaml");
  const std::string scen = (dir / "scen").string();
  for (const std::string& cmd : {"replay " + scen, "compare " + scen + "/a.yaml " + scen + "/b.yaml"}) {
    const auto r = run_hcpsim(cmd);
    INFO(cmd << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("Too many levels of symbolic links; fix: check the path") != std::string::npos);
  }
  {
    std::ofstream f(dir / "n.sh");
    f << "torchrun --nproc_per_node 8 --nnodes 99999999999999999999 pretrain_gpt.py --num-layers 2 "
         "--num-attention-heads 8 --hidden-size 1024 --seq-length 1024\n";
  }
  const auto r = run_hcpsim("import megatron-args " + (dir / "n.sh").string() + " -o " + (dir / "n.yaml").string());
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--nnodes: '99999999999999999999' is not a plausible nnodes count") != std::string::npos);
  std::filesystem::remove_all(dir);
}
