// `hcpsim replay` through the real binary: goldens, --update, --twice, JUnit.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "catch_compat.hpp"
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;

using Run = hcpsim::test::CommandRun;

Run sh(const std::string& cmd) { return hcpsim::test::run_command(cmd); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path scratch(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("hcpsim_replay_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("apps: replay of every bundled scenario holds its goldens and writes valid JUnit", "[apps][replay]") {
  const auto dir = scratch("junit");
  const auto junit = (dir / "replay.xml").string();
  const auto r = hcpsim::test::run_hcpsim("replay scenarios --junit " + junit);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  size_t yaml_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(std::string(HCPSIM_SOURCE_DIR) + "/scenarios"))
    yaml_files += e.path().extension() == ".yaml";
  REQUIRE(yaml_files >= 24 + 21 + 3);
  REQUIRE(r.output.find(std::to_string(yaml_files) + " scenarios, " + std::to_string(yaml_files) + " passed, 0 failed") !=
          std::string::npos);
  // A real XML parser accepts the file (xmllint from libxml2-utils).
  const auto lint = sh("xmllint --noout '" + junit + "'");
  INFO(lint.output);
  REQUIRE(lint.exit_code == 0);
  const std::string xml = slurp(junit);
  size_t cases = 0;
  for (size_t pos = 0; (pos = xml.find("<testcase ", pos)) != std::string::npos; ++pos) ++cases;
  REQUIRE(cases == yaml_files);
  REQUIRE(xml.find("failures=\"0\"") != std::string::npos);
}

TEST_CASE("apps: a simulate golden off by one picosecond fails naming the field; --update restores it",
          "[apps][replay]") {
  const auto dir = scratch("update");
  const fs::path original = fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci/hcp_2x2_causal_gqa.yaml";
  const fs::path copy = dir / "hcp_2x2_causal_gqa.yaml";
  const std::string text = slurp(original);
  std::smatch m;
  REQUIRE(std::regex_search(text, m, std::regex("total_ps: ([0-9]+)")));
  const long long golden = std::stoll(m[1].str());
  const std::string altered = std::regex_replace(text, std::regex("total_ps: [0-9]+"),
                                                 "total_ps: " + std::to_string(golden + 1));
  std::ofstream(copy, std::ios::binary) << altered;
  auto r = hcpsim::test::run_hcpsim("replay " + copy.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.find("expect.simulate.total_ps: golden " + std::to_string(golden + 1) + ", actual " +
                        std::to_string(golden)) != std::string::npos);
  r = hcpsim::test::run_hcpsim("replay --update " + copy.string());
  REQUIRE(r.exit_code == 0);
  REQUIRE(slurp(copy) == text);  // the canonical block written back equals the original byte for byte
  // A file whose goldens hold is left byte-identical by --update.
  r = hcpsim::test::run_hcpsim("replay --update " + copy.string());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("0 updated") != std::string::npos);
  REQUIRE(slurp(copy) == text);
}

TEST_CASE("apps: replay --twice finds identical outputs with 1 and 2 threads", "[apps][replay]") {
  const auto r = hcpsim::test::run_hcpsim(("replay --twice scenarios/ci/hcp_2x2_causal_gqa.yaml scenarios/ci/all_gather_cp4_causal.yaml "
                           "scenarios/ci/multinode_llama3_8b_cp16_8x2.yaml scenarios/invalid/mqa_with_a2a.yaml"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("4 scenarios, 4 passed, 0 failed") != std::string::npos);
}

TEST_CASE("apps: replay exits 2 on an unreadable file and 1 on a wrong verify golden", "[apps][replay]") {
  const auto dir = scratch("bad");
  std::ofstream(dir / "broken.yaml", std::ios::binary) << "expect: [unclosed\n";
  auto r = hcpsim::test::run_hcpsim("replay " + (dir / "broken.yaml").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("broken.yaml") != std::string::npos);
  r = hcpsim::test::run_hcpsim("replay scenarios/does_not_exist");
  REQUIRE(r.exit_code == 2);
  // A fault-injected scenario whose golden claims "pass" is a regression.
  const std::string text = slurp(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci/fault_dropped_lse_merge.yaml");
  std::ofstream(dir / "fault.yaml", std::ios::binary)
      << std::regex_replace(text, std::regex("result: fail"), "result: pass");
  r = hcpsim::test::run_hcpsim("replay " + (dir / "fault.yaml").string());
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.find("expect.verify.result: golden pass, actual fail") != std::string::npos);
}
