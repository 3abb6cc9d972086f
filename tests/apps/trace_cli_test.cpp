// simulate --trace and --step-trace as a user runs them: both files written, the step trace with the layer and the
// step's phases, and a clear error without model.vocab_size.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "catch_compat.hpp"
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

}  // namespace

TEST_CASE("apps: simulate --step-trace writes the whole layer and the step, --trace keeps the attention", "[apps]") {
  const fs::path dir = fs::temp_directory_path() / ("hcpsim_trace_cli_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path attention = dir / "attention.json", step = dir / "step.json";
  const auto r = hcpsim::test::run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=4096 "
                                          "--trace " + attention.string() + " --step-trace " + step.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("wrote step trace " + step.string()) != std::string::npos);
  size_t gemms = 0, step_slices = 0, arrows = 0;
  const nlohmann::json step_trace = read_json(step);  // kept: a range-for does not extend an inner temporary
  for (const auto& e : step_trace.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "gemm") ++gemms;
    if (e.at("ph") == "X" && e.at("cat") == "step") ++step_slices;
    if (e.at("ph") == "s") ++arrows;
  }
  REQUIRE(gemms > 0);
  REQUIRE(step_slices >= 2);  // at least the pipeline and the optimizer
  REQUIRE(arrows > 0);
  const nlohmann::json attention_trace = read_json(attention);
  for (const auto& e : attention_trace.at("traceEvents")) REQUIRE(!(e.at("ph") == "X" && e.at("cat") == "gemm"));
  // Without model.vocab_size: exit 2 naming it, before any file is written.
  const fs::path none = dir / "none.json";
  const auto bad = hcpsim::test::run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml model.vocab_size=null "
                                            "--step-trace " + none.string());
  REQUIRE(bad.exit_code == 2);
  REQUIRE(bad.output.find("model.vocab_size") != std::string::npos);
  REQUIRE(bad.output.find("--step-trace") != std::string::npos);
  REQUIRE_FALSE(fs::exists(none));
  fs::remove_all(dir);
}
