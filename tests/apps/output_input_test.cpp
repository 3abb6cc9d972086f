// No output replaces one of the command's own inputs (io/output_file.hpp refuse_if_input), through the same
// path or another name of the same file; `replay --update` is the one command that rewrites its input on request.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "catch_compat.hpp"
#include "hcpsim/oracles/dump.hpp"
#include "run_command.hpp"

using hcpsim::test::run_hcpsim;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("apps: an output that is one of the command's inputs is refused and the input is untouched", "[apps][robustness]") {
  const auto dir = std::filesystem::temp_directory_path() / ("hcpsim_outin_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto scenario = dir / "s.yaml";
  std::filesystem::copy_file(std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama32_1b_cp4_a2a_p2p.yaml", scenario);
  std::filesystem::create_symlink(scenario, dir / "link.yaml");
  const std::string before = slurp(scenario);
  const std::string s = scenario.string();
  for (const std::string& target : {s, (dir / "link.yaml").string(), dir.string() + "/./s.yaml"}) {
    const auto r = run_hcpsim("simulate " + s + " --summary " + target);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("will not write summary to '" + target + "': it is this command's input '" + s + "'") !=
          std::string::npos);
    CHECK(slurp(scenario) == before);
  }
  // A dump given to --reference is an input too.
  const std::string dump = (dir / "d.h5").string();
  REQUIRE(run_hcpsim("verify " + s + " model.seq_length=256 --threads 1 --dump " + dump).exit_code == 0);
  const std::string dump_before = slurp(dump);
  const auto r = run_hcpsim("verify " + s + " model.seq_length=256 --threads 1 --reference " + dump + " --dump " + dump);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("it is this command's input '" + dump + "'") != std::string::npos);
  CHECK(slurp(dump) == dump_before);
  std::filesystem::remove_all(dir);
}

TEST_CASE("apps: two outputs naming one file are refused before any work, and nothing is written",
          "[apps][robustness]") {
  const auto dir = std::filesystem::temp_directory_path() / ("hcpsim_outout_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string s = std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama32_1b_cp4_a2a_p2p.yaml";
  const std::string a = (dir / "a.json").string();
  auto r = run_hcpsim("simulate " + s + " --quiet --summary " + a + " --trace " + a);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--summary: both --trace and --summary name '" + a + "'") != std::string::npos);
  CHECK(r.output.find("layer forward") == std::string::npos);  // refused before the simulation
  CHECK_FALSE(std::filesystem::exists(a));
  // The same file through another spelling of the path.
  r = run_hcpsim("simulate " + s + " --quiet --links " + a + " --timeline-svg " + dir.string() + "/./a.json");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("both --links and --timeline-svg name") != std::string::npos);
  // A new file named relative and absolute (or as ./name): the trace was lost to the summary.
  const std::string rel = "new.json";
  for (const std::string& other : {(dir / rel).string(), "./" + rel}) {
    r = hcpsim::test::run_command("cd '" + dir.string() + "' && '" + HCPSIM_BINARY + "' simulate " + s + " --quiet --trace " + rel +
                    " --summary " + other);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("both --trace and --summary name") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / rel));
  }
  const std::string h5 = (dir / "a.h5").string();
  r = run_hcpsim("verify " + s + " model.seq_length=256 --threads 1 --dump " + h5 + " --json " + h5);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("both --json and --dump name '" + h5 + "'") != std::string::npos);
  CHECK(r.output.find("result:") == std::string::npos);  // the oracle never ran
  CHECK_FALSE(std::filesystem::exists(h5));
  // Character devices may be named twice.
  r = run_hcpsim("simulate " + s + " --quiet --summary /dev/null --trace /dev/null");
  CHECK(r.exit_code == 0);
  // An output that is the command's input is refused before the work too (it used to be found after it).
  std::filesystem::copy_file(s, dir / "s.yaml");
  const std::string own = (dir / "s.yaml").string();
  r = run_hcpsim("verify " + own + " model.seq_length=256 --threads 1 --dump " + own);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("will not write dump to '" + own + "': it is this command's input") != std::string::npos);
  CHECK(r.output.find("result:") == std::string::npos);
  // replay --junit onto one of the scenarios it replays: refused before any scenario runs, the scenario kept.
  const auto rp = dir / "rp";
  std::filesystem::create_directories(rp);
  std::filesystem::copy_file(std::string(HCPSIM_SOURCE_DIR) + "/scenarios/ci/p2p_cp4_causal_mha.yaml", rp / "x.yaml");
  const std::string before = slurp(rp / "x.yaml");
  r = run_hcpsim("replay " + rp.string() + " --junit " + (rp / "x.yaml").string());
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--junit: will not write the JUnit report") != std::string::npos);
  CHECK(r.output.find("pass ") == std::string::npos);
  CHECK(slurp(rp / "x.yaml") == before);
  std::filesystem::remove_all(dir);
}

TEST_CASE("apps: diff without a second side is a usage error, not a comparison of A with itself", "[apps]") {
  const std::string s = std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama32_1b_cp4_a2a_p2p.yaml";
  const auto r = run_hcpsim("diff " + s);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("diff needs a second side") != std::string::npos);
  CHECK(r.output.find("no change") == std::string::npos);
}

TEST_CASE("apps: collective, check-log and calibrate refuse an unwritable output before printing any result",
          "[apps][robustness]") {
  // They used to print every row or finding and only then fail on the output (exit 2 after a full report).
  const std::string bad = "/nonexistent_hcpsim_dir/out";
  auto r = run_hcpsim("collective all_reduce --cluster dgx-h100 --nodes 1 --csv " + bad + ".csv");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find(bad + ".csv: --csv: directory '/nonexistent_hcpsim_dir' does not exist") != std::string::npos);
  CHECK(r.output.find("# hcpsim collective") == std::string::npos);
  r = run_hcpsim("check-log tests/fixtures/megatron/log_healthy.txt --json " + bad + ".json");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find(bad + ".json: --json: directory") != std::string::npos);
  CHECK(r.output.find("world-size line") == std::string::npos);
  const std::filesystem::path csv = std::filesystem::temp_directory_path() / ("hcpsim_out_check_" + std::to_string(getpid()) + ".csv");
  std::ofstream(csv) << "op_kind,dtype,head_dim,q_rows,kv_rows,causal,m,n,k,bytes,flops,measured_s\n"
                        "gemm,bf16,,,,,8192,8192,8192,0,1099511627776,0.0022\n";
  r = run_hcpsim("calibrate " + csv.string() + " -o " + bad + ".yaml");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find(bad + ".yaml: -o: directory") != std::string::npos);
  CHECK(r.output.find("calibrate " + csv.string()) == std::string::npos);
  std::filesystem::remove(csv);
}

TEST_CASE("apps: verify of a per-layer comm-type list dumps each type to its own file", "[apps][robustness]") {
  // The dump held the first type's run only, without a word (the second type was verified and then dropped).
  const auto dir = std::filesystem::temp_directory_path() / ("hcpsim_mixdump_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string h5 = (dir / "mix.h5").string();
  const auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 model.num_layers=4 "
                            "'parallel.cp_comm_type=[a2a+p2p, p2p, p2p, a2a+p2p]' --threads 1 --dump " + h5);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("dump: " + h5 + ".a2a+p2p\n") != std::string::npos);
  CHECK(r.output.find("dump: " + h5 + ".p2p\n") != std::string::npos);
  CHECK(std::filesystem::is_regular_file(h5 + ".a2a+p2p"));
  CHECK(std::filesystem::is_regular_file(h5 + ".p2p"));
  CHECK_FALSE(std::filesystem::exists(h5));
  // Each is the dump of its own run.
  for (const char* type : {"a2a+p2p", "p2p"}) {
    const hcpsim::DumpContents d = hcpsim::read_dump(h5 + "." + type);
    CHECK(d.meta_text.at("cp_comm_type") == type);
  }
  // The per-type paths are checked before the work: one that is this command's --reference is refused up front
  // (it was found only when the first type's run wrote it).
  const auto again = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 model.num_layers=4 "
                                "'parallel.cp_comm_type=[a2a+p2p, p2p, p2p, a2a+p2p]' --threads 1 --reference " + h5 +
                                ".a2a+p2p --dump " + h5);
  INFO(again.output);
  CHECK(again.exit_code == 2);
  CHECK(again.output.find("it is this command's input") != std::string::npos);
  CHECK(again.output.find("result:") == std::string::npos);
  std::filesystem::remove_all(dir);
}
