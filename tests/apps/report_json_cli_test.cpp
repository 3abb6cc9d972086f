// `hcpsim diff --json` and `hcpsim check-log --json` through the real binary, parsed with nlohmann-json: the values
// the text prints, in SI units, and the error report of an unreadable log.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "catch_compat.hpp"
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return nlohmann::json::parse(in);
}

fs::path scratch_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("hcpsim_report_json_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const std::string k8b = "scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("apps: diff --json holds both sides and every compared quantity in SI units", "[apps][diff]") {
  const auto out = scratch_dir("diff") / "diff.json";
  const std::string args = "diff " + k8b + " \"parallel.hierarchical_context_parallel_sizes=[2,8]\"";
  const auto r = hcpsim::test::run_hcpsim(args + " --json " + out.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto j = read_json(out);
  REQUIRE(j.at("a").at("option") == "a2a+p2p [8,2] TP1");
  REQUIRE(j.at("a").at("a2a_size") == 8);
  REQUIRE(j.at("a").at("overrides").empty());
  REQUIRE(j.at("b").at("option") == "a2a+p2p [2,8] TP1");
  REQUIRE(j.at("b").at("p2p_size") == 8);
  REQUIRE(j.at("b").at("overrides").at(0) == "parallel.hierarchical_context_parallel_sizes=[2,8]");
  REQUIRE(j.at("a").at("scenario_digest") != j.at("b").at("scenario_digest"));
  // The text says "21 of 32 quantities changed" (exposed comm and load imbalance are rows of their own, for the
  // attention alone and for the layer).
  REQUIRE(j.at("compared") == 32);  // memory rows include FP8 weight copies
  REQUIRE(j.at("changed") == 21);
  const auto& rows = j.at("rows");
  REQUIRE(rows.size() == 32);
  auto row = [&](const std::string& name) {
    for (const auto& x : rows)
      if (x.at("quantity") == name) return x;
    FAIL("no row " << name);
    return rows.at(0);
  };
  // Largest relative change first: the attention's load imbalance, 36.033 us -> 1.027 ms (+2749.2%), in seconds.
  REQUIRE(rows.at(0).at("quantity") == "attention load imbalance");
  REQUIRE(rows.at(0).at("unit") == "s");
  REQUIRE(rows.at(0).at("a").get<double>() == Approx(36.033e-6).epsilon(1e-4));
  REQUIRE(rows.at(0).at("relative").get<double>() == Approx(27.492).epsilon(1e-3));
  for (size_t i = 1; i < rows.size(); ++i)
    REQUIRE(std::abs(rows.at(i - 1).at("relative").get<double>()) >= std::abs(rows.at(i).at("relative").get<double>()));
  // The backward intra-node bytes, 4.38 GiB -> 10.38 GiB (+137.1%), in bytes.
  const auto bytes = row("layer messages backward intra_node bytes");
  REQUIRE(bytes.at("unit") == "bytes");
  REQUIRE(bytes.at("a").get<double>() / (1024.0 * 1024 * 1024) == Approx(4.375).epsilon(1e-3));
  REQUIRE(bytes.at("delta").get<double>() == bytes.at("b").get<double>() - bytes.at("a").get<double>());
  REQUIRE(bytes.at("relative").get<double>() == Approx(1.371).epsilon(1e-3));
  // [2,8]'s busiest GPU idles less than [8,2]'s; its GPUs' kernel times spread more.
  REQUIRE(row("layer exposed comm (busiest GPU)").at("delta").get<double>() < 0);
  REQUIRE(row("layer load imbalance").at("delta").get<double>() == Approx(1.102e-3).epsilon(1e-3));
  size_t step_rows = 0;
  for (const auto& x : rows) {
    if (x.at("quantity") != "step time") continue;
    ++step_rows;
    REQUIRE(x.at("unit") == "s");
    REQUIRE(x.at("a").get<double>() == Approx(j.at("a").at("step_time_s").get<double>()));
    REQUIRE(x.at("b").get<double>() == Approx(j.at("b").at("step_time_s").get<double>()));
  }
  REQUIRE(step_rows == 1);
  REQUIRE(j.at("provenance").at("overrides").at(0) == "parallel.hierarchical_context_parallel_sizes=[2,8]");
  // stdout is the same as without --json.
  REQUIRE(hcpsim::test::run_hcpsim(args).output == r.output);
}

TEST_CASE("apps: diff --json of a configuration against itself changes nothing", "[apps][diff]") {
  const auto out = scratch_dir("diff_same") / "same.json";
  const std::string a = "scenarios/llama32_1b_cp4_a2a_p2p.yaml";
  const auto r = hcpsim::test::run_hcpsim("diff " + a + " " + a + " --json " + out.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto j = read_json(out);
  REQUIRE(j.at("changed") == 0);
  REQUIRE(j.at("compared") == j.at("rows").size());
  for (const auto& row : j.at("rows")) REQUIRE(row.at("relative") == 0.0);
}

TEST_CASE("apps: check-log --json of a run with CP silently off lists the three findings with their lines",
          "[apps][check_log]") {
  const auto out = scratch_dir("log_off") / "log.json";
  const std::string args = "check-log tests/fixtures/megatron/log_cp_silently_off.txt --scenario " + k8b;
  const auto r = hcpsim::test::run_hcpsim(args + " --json " + out.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  const auto j = read_json(out);
  REQUIRE(j.at("result") == "findings");
  REQUIRE(j.at("exit_code") == 1);
  REQUIRE(j.at("world").at("line") == 2);
  REQUIRE(j.at("world").at("context_parallel_size") == 16);
  REQUIRE(j.at("world").at("hierarchical_context_parallel_sizes").is_null());
  REQUIRE(j.at("arguments").at("count") == 67);
  REQUIRE(j.at("arguments").at("cp_comm_type").at(0) == "a2a+p2p");
  REQUIRE(j.at("throughput").at("iterations") == 6);
  REQUIRE(j.at("throughput").at("max_tflops_per_gpu") == 1102.5);
  REQUIRE(j.at("throughput").at("max_line") == 94);
  REQUIRE(j.at("gpu_peak").at("tflops_per_gpu").get<double>() == Approx(989.4));
  REQUIRE(j.at("gpu_peak").at("assumed") == false);
  REQUIRE(j.at("model").at("status") == "exceeded");
  REQUIRE(j.at("model").at("convention") == "megatron_full_attention");
  REQUIRE(j.at("model").at("convention_identified") == true);
  REQUIRE(j.at("model").at("predicted_tflops_per_gpu").get<double>() > 100);
  const auto& f = j.at("findings");
  REQUIRE(f.size() == 3);
  REQUIRE(f.at(0).at("line") == 14);
  REQUIRE(f.at(0).at("quote") == "cp_comm_type .................................... a2a+p2p");
  REQUIRE(f.at(1).at("line") == 91);
  REQUIRE(f.at(2).at("message").get<std::string>().find("more than 1.5x the whole-step model") != std::string::npos);
  REQUIRE(hcpsim::test::run_hcpsim(args).output == r.output);
}

TEST_CASE("apps: check-log --json of a healthy log is clean with its warning; an unreadable log gives the error",
          "[apps][check_log]") {
  const auto dir = scratch_dir("log_clean");
  const auto r = hcpsim::test::run_hcpsim("check-log tests/fixtures/megatron/log_healthy.txt --scenario " + k8b +
                                          " --json " + (dir / "clean.json").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto j = read_json(dir / "clean.json");
  REQUIRE(j.at("result") == "clean");
  REQUIRE(j.at("exit_code") == 0);
  REQUIRE(j.at("findings").empty());
  REQUIRE(j.at("model").at("status") == "consistent");
  REQUIRE(j.at("world").at("hierarchical_context_parallel_sizes") == std::vector<int64_t>{8, 2});
  REQUIRE(j.at("warnings").size() == 1);
  // What produced it: the build and the --scenario the model comparison used.
  const auto& p = j.at("provenance");
  REQUIRE(!p.at("hcpsim_version").get<std::string>().empty());
  REQUIRE(p.at("scenario_yaml").get<std::string>().find("name: llama3_8b_128k_cp16_4xdgx_h100") != std::string::npos);
  REQUIRE(p.at("scenario_digest").get<std::string>().rfind("fnv1a64:", 0) == 0);

  const auto bad = hcpsim::test::run_hcpsim("check-log " + (dir / "missing.txt").string() + " --json " +
                                            (dir / "error.json").string());
  REQUIRE(bad.exit_code == 2);
  const auto e = read_json(dir / "error.json");
  REQUIRE(e.at("result") == "error");
  REQUIRE(e.at("exit_code") == 2);
  REQUIRE(!e.at("error").at("problem").get<std::string>().empty());
  REQUIRE(!e.at("error").at("fix").get<std::string>().empty());
}

TEST_CASE("apps: check-log of a log without throughput reports does not call the model comparison consistent",
          "[apps][check_log]") {
  // The healthy fixture cut after its arguments block: a complete configuration, no iteration line.
  const std::string text = read_text(std::string(HCPSIM_SOURCE_DIR) + "/tests/fixtures/megatron/log_healthy.txt");
  size_t cut = 0;
  for (int line = 0; line < 80 && cut != std::string::npos; ++line) cut = text.find('\n', cut + 1);
  REQUIRE(cut != std::string::npos);
  const auto dir = scratch_dir("check_log_cut");
  const auto log = dir / "cut.txt";
  std::ofstream(log, std::ios::binary) << text.substr(0, cut + 1);
  const auto out = dir / "cut.json";
  const auto r = hcpsim::test::run_hcpsim("check-log " + log.string() + " --json " + out.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("(the log has no iteration lines)") != std::string::npos);
  CHECK(r.output.find("throughput vs. model: not checked (predicted ") != std::string::npos);
  CHECK(r.output.find("; consistent") == std::string::npos);
  const auto j = read_json(out);
  CHECK(j.at("model").at("status") == "not_checked");
}

TEST_CASE("apps: diff --both applies an override to both sides, before B's own", "[apps][diff]") {
  // p2p against a2a+p2p [2,4] at CP = 8 in one node: a layout neither side's file has, set once for both.
  const auto out = scratch_dir("diff_both") / "diff.json";
  const std::string args = "diff " + k8b +
                           " parallel.cp_comm_type=p2p parallel.hierarchical_context_parallel_sizes=null"
                           " --both cluster.nodes=1 --both parallel.context_parallel_size=8"
                           " --both model.seq_length=65536 \"--both=parallel.hierarchical_context_parallel_sizes=[2,4]\"";
  const auto r = hcpsim::test::run_hcpsim(args + " --json " + out.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("diff A: llama3_8b_128k_cp16_4xdgx_h100 (" + k8b +
                      " cluster.nodes=1 parallel.context_parallel_size=8 model.seq_length=65536 "
                      "parallel.hierarchical_context_parallel_sizes=[2,4], a2a+p2p [2,4] TP1, DP 1") != std::string::npos);
  // B's own override of the sizes comes after --both's and wins.
  CHECK(r.output.find("parallel.cp_comm_type=p2p parallel.hierarchical_context_parallel_sizes=null, p2p TP1, DP 1") !=
        std::string::npos);
  const auto j = read_json(out);
  CHECK(j.at("a").at("option") == "a2a+p2p [2,4] TP1");
  CHECK(j.at("a").at("overrides").size() == 4);
  CHECK(j.at("b").at("option") == "p2p TP1");
  CHECK(j.at("b").at("overrides").size() == 6);
  CHECK(j.at("b").at("overrides").at(5) == "parallel.hierarchical_context_parallel_sizes=null");
}
