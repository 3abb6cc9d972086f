// `hcpsim replay` through the real binary: goldens, --update, --twice, JUnit.
#include <filesystem>
#include <fstream>
#include <optional>
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

/// `xmllint --noout --schema` of a JUnit report against tests/fixtures/junit_report.xsd; nullopt if xmllint is
/// absent (Debian package libxml2-utils, scripts/install_deps.sh).
std::optional<Run> lint_junit(const std::string& xml) {
  if (sh("command -v xmllint").exit_code != 0) return std::nullopt;
  return sh("xmllint --noout --schema tests/fixtures/junit_report.xsd '" + xml + "'");
}

/// scenarios/ci/hcp_2x2_causal_gqa.yaml as written, and its total_ps golden.
std::pair<std::string, long long> hcp_2x2_with_total() {
  const std::string text = slurp(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci/hcp_2x2_causal_gqa.yaml");
  std::smatch m;
  REQUIRE(std::regex_search(text, m, std::regex("total_ps: ([0-9]+)")));
  return {text, std::stoll(m[1].str())};
}

}  // namespace

// A macro, not a function: skipping must return from the test case.
#define REQUIRE_SCHEMA_VALID_JUNIT_OR_SKIP(path)                                                              \
  do {                                                                                                        \
    const auto lint = lint_junit(path);                                                                       \
    if (!lint) TEST_SKIP_BECAUSE("xmllint (Debian libxml2-utils) is not installed: the schema check is not run"); \
    INFO(lint->output);                                                                                       \
    REQUIRE(lint->exit_code == 0);                                                                            \
  } while (0)

TEST_CASE("apps: replay of every bundled scenario holds its goldens and writes a schema-valid JUnit report",
          "[apps][replay]") {
  const auto dir = scratch("junit");
  const auto junit = (dir / "replay.xml").string();
  // SOURCE_DATE_EPOCH fixes the timestamp (1700000000 s = 2023-11-14T22:13:20 UTC); measured times are not checked.
  const auto r = sh("SOURCE_DATE_EPOCH=1700000000 '" + std::string(HCPSIM_BINARY) + "' replay scenarios --junit " +
                    junit);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  size_t yaml_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(std::string(HCPSIM_SOURCE_DIR) + "/scenarios"))
    yaml_files += e.path().extension() == ".yaml";
  REQUIRE(yaml_files >= 24 + 21 + 3);
  REQUIRE(r.output.find(std::to_string(yaml_files) + " scenarios, " + std::to_string(yaml_files) + " passed, 0 failed") !=
          std::string::npos);
  const std::string xml = slurp(junit);
  size_t cases = 0;
  for (size_t pos = 0; (pos = xml.find("<testcase ", pos)) != std::string::npos; ++pos) ++cases;
  REQUIRE(cases == yaml_files);
  const std::string totals = "tests=\"" + std::to_string(yaml_files) + "\" failures=\"0\" errors=\"0\" skipped=\"0\"";
  REQUIRE(std::regex_search(xml, std::regex("<testsuites name=\"hcpsim replay\" " + totals +
                                            " time=\"[0-9]+\\.[0-9]{3}\" timestamp=\"2023-11-14T22:13:20\">")));
  REQUIRE(std::regex_search(xml, std::regex("<testsuite name=\"hcpsim replay\" " + totals +
                                            " time=\"[0-9.]+\" timestamp=\"2023-11-14T22:13:20\" hostname=\"[^\"]+\" "
                                            "id=\"0\" package=\"hcpsim\">")));
  REQUIRE(std::regex_search(xml, std::regex("<testcase name=\"scenarios/ci/hcp_2x2_causal_gqa.yaml\" "
                                            "classname=\"hcpsim.replay\" time=\"[0-9]+\\.[0-9]{3}\"></testcase>")));
  REQUIRE_SCHEMA_VALID_JUNIT_OR_SKIP(junit);
}

TEST_CASE("apps: replay JUnit drops XML-invalid characters, escapes the rest and stays schema-valid on a failure",
          "[apps][replay]") {
  const auto dir = scratch("junit_fail");
  const std::string text = slurp(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci/hcp_2x2_causal_gqa.yaml");
  std::smatch m;
  REQUIRE(std::regex_search(text, m, std::regex("total_ps: ([0-9]+)")));
  const long long golden = std::stoll(m[1].str());
  // A file name with ESC, SOH and the markup characters (no single quote: the shell command quotes with it).
  const std::string odd = "bad\x1b[31m\x01 <&\">.yaml";
  std::ofstream(dir / odd, std::ios::binary)
      << std::regex_replace(text, std::regex("total_ps: [0-9]+"), "total_ps: " + std::to_string(golden + 1));
  std::ofstream(dir / "good.yaml", std::ios::binary) << text;
  const auto junit = (dir / "replay.xml").string();
  const auto r = sh("SOURCE_DATE_EPOCH=0 '" + std::string(HCPSIM_BINARY) + "' replay '" + dir.string() +
                    "' --junit " + junit);
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  const std::string xml = slurp(junit);
  INFO(xml);
  REQUIRE(xml.find('\x1b') == std::string::npos);
  REQUIRE(xml.find('\x01') == std::string::npos);
  REQUIRE(xml.find("bad[31m &lt;&amp;&quot;&gt;.yaml\" classname=\"hcpsim.replay\"") != std::string::npos);
  const std::string msg = "expect.simulate.total_ps: golden " + std::to_string(golden + 1) + ", actual " +
                          std::to_string(golden);
  REQUIRE(xml.find("<failure message=\"" + msg + "\" type=\"golden\">" + msg + "\n</failure>") != std::string::npos);
  REQUIRE(xml.find("tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\"") != std::string::npos);
  REQUIRE(xml.find("timestamp=\"1970-01-01T00:00:00\"") != std::string::npos);
  REQUIRE_SCHEMA_VALID_JUNIT_OR_SKIP(junit);
}

TEST_CASE("apps: replay --junit without SOURCE_DATE_EPOCH stamps the clock, and a malformed one is an input error",
          "[apps][replay]") {
  const auto dir = scratch("junit_epoch");
  const auto junit = (dir / "replay.xml").string();
  const std::string bin = "'" + std::string(HCPSIM_BINARY) + "' replay scenarios/ci/hcp_2x2_causal_gqa.yaml --junit ";
  auto r = sh("env -u SOURCE_DATE_EPOCH " + bin + junit);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(std::regex_search(slurp(junit), std::regex("timestamp=\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\"")));
  for (const std::string bad : {"", "-5", "12abc", "1.5"}) {
    r = sh("SOURCE_DATE_EPOCH='" + bad + "' " + bin + (dir / "bad.xml").string());
    INFO(r.output);
    REQUIRE(r.exit_code == 2);
    REQUIRE(r.output.find("SOURCE_DATE_EPOCH") != std::string::npos);
    REQUIRE(!fs::exists(dir / "bad.xml"));
  }
}

TEST_CASE("apps: a simulate golden off by one picosecond fails naming the field; --update restores it",
          "[apps][replay]") {
  const auto dir = scratch("update");
  const fs::path copy = dir / "hcp_2x2_causal_gqa.yaml";
  const auto [text, golden] = hcp_2x2_with_total();
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

TEST_CASE("apps: replay --update keeps the comments of the expect block", "[apps][replay]") {
  // The block is regenerated; its comment lines and trailing comments used to be dropped.
  const auto dir = scratch("update_comments");
  const fs::path copy = dir / "hcp_2x2_causal_gqa.yaml";
  const auto [text, golden] = hcp_2x2_with_total();
  std::string commented = std::regex_replace(text, std::regex("\nexpect:\n"), "\nexpect:\n  # goldens for CI\n");
  commented = std::regex_replace(commented, std::regex("  validate: \\{exit_code: 0\\}"),
                                 "  validate: {exit_code: 0}   # must validate");
  commented = std::regex_replace(commented, std::regex("    total_ps: [0-9]+"),
                                 "    # the layer, forward and backward\n    total_ps: " + std::to_string(golden + 1) +
                                     "   # ps, \"re-measured\" # twice");
  commented += "  # end of goldens\n";
  std::ofstream(copy, std::ios::binary) << commented;
  auto r = hcpsim::test::run_hcpsim("replay --update " + copy.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string updated = slurp(copy);
  INFO(updated);
  CHECK(updated.find("\nexpect:\n  # goldens for CI\n  validate: {exit_code: 0}   # must validate\n") !=
        std::string::npos);
  CHECK(updated.find("    # the layer, forward and backward\n    total_ps: " + std::to_string(golden) +
                     "   # ps, \"re-measured\" # twice\n") != std::string::npos);
  CHECK(updated.size() >= 19);
  CHECK(updated.substr(updated.size() - 19) == "  # end of goldens\n");
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
  // Beside good scenarios in a folder: they still run and the JUnit report is written, with the broken one failed
  // (one unreadable file stopped the whole replay, with no report); the exit stays 2.
  fs::copy_file(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci/p2p_cp4_causal_mha.yaml", dir / "good.yaml");
  r = hcpsim::test::run_hcpsim("replay " + dir.string() + " --junit " + (dir / "report.xml").string());
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("FAIL    " + (dir / "broken.yaml").string() + "\n        not a readable scenario: broken.yaml:") !=
        std::string::npos);
  CHECK(r.output.find("pass    " + (dir / "good.yaml").string()) != std::string::npos);
  CHECK(slurp(dir / "report.xml").find("failures=\"1\"") != std::string::npos);
  // Likewise with --update, which read the broken file again and stopped there.
  r = hcpsim::test::run_hcpsim("replay " + dir.string() + " --update --junit " + (dir / "report2.xml").string());
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("pass    " + (dir / "good.yaml").string()) != std::string::npos);
  CHECK(fs::exists(dir / "report2.xml"));
  // A report named .yaml inside the replayed folder would be read as a scenario by the next replay: refused.
  r = hcpsim::test::run_hcpsim("replay " + dir.string() + " --junit " + (dir / "new.yaml").string());
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("which the next replay would read as a scenario") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "new.yaml"));
  fs::remove(dir / "good.yaml");
  r = hcpsim::test::run_hcpsim("replay scenarios/does_not_exist");
  REQUIRE(r.exit_code == 2);
  // A fault-injected scenario whose golden claims "pass" is a regression.
  const std::string text = slurp(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci/fault_dropped_lse_merge.yaml");
  std::ofstream(dir / "fault.yaml", std::ios::binary)
      << std::regex_replace(text, std::regex("result: fail"), "result: pass");
  r = hcpsim::test::run_hcpsim("replay " + (dir / "fault.yaml").string());
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.find("expect.verify.result: golden pass, actual fail") != std::string::npos);
  // A bound below the measured error fails, printed as written (1e-30, not 1.0000000000000001e-30).
  const std::string ok = slurp(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci/p2p_cp4_causal_mha.yaml");
  std::ofstream(dir / "tight.yaml", std::ios::binary)
      << std::regex_replace(ok, std::regex("out: 5.9e-16"), "out: 1e-30");
  r = hcpsim::test::run_hcpsim("replay " + (dir / "tight.yaml").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  CHECK(r.output.find("expect.verify.max_rel_l2.out: golden <= 1e-30, actual ") != std::string::npos);
}

TEST_CASE("apps: an error golden written by --update holds no path or position, so replay passes from anywhere",
          "[apps][replay]") {
  const auto dir = scratch("paths");
  const std::string text = slurp(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/invalid/sizes_product_mismatch.yaml");
  const auto at = text.find("error: \"");
  REQUIRE(at != std::string::npos);
  const fs::path copy = dir / "sizes_product_mismatch.yaml";
  std::ofstream(copy, std::ios::binary) << text.substr(0, at) + "error: \"no such message\"}\n";
  auto r = hcpsim::test::run_hcpsim("replay " + copy.string());
  REQUIRE(r.exit_code == 1);
  r = hcpsim::test::run_hcpsim("replay --update " + copy.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string updated = slurp(copy);
  // The message from its key on: no folder, and no file:line:col either (a golden with the file name failed once
  // the file was copied or renamed).
  CHECK(updated.find("error: \"parallel.") != std::string::npos);
  CHECK(updated.find("error: \"sizes_product_mismatch.yaml:") == std::string::npos);
  CHECK(updated.find(dir.string()) == std::string::npos);
  fs::copy_file(copy, dir / "renamed.yaml");
  CHECK(hcpsim::test::run_hcpsim("replay " + (dir / "renamed.yaml").string()).exit_code == 0);
  // No golden at all: the new one has no position either (it kept "file:line:col: " when nothing was there).
  const fs::path bare = dir / "bare.yaml";
  std::ofstream(bare, std::ios::binary) << text.substr(0, text.find("\nexpect:") + 1);
  REQUIRE(slurp(bare).find("expect:") == std::string::npos);
  REQUIRE(hcpsim::test::run_hcpsim("replay --update " + bare.string()).exit_code == 0);
  CHECK(slurp(bare).find("error: \"parallel.") != std::string::npos);
  fs::copy_file(bare, dir / "bare_copy.yaml");
  CHECK(hcpsim::test::run_hcpsim("replay " + (dir / "bare_copy.yaml").string()).exit_code == 0);
  // The same file through other spellings of its folder, and from another working directory.
  for (const std::string& cmd : {"cd " + dir.parent_path().string() + " && " + std::string(HCPSIM_BINARY) +
                                     " replay " + dir.filename().string() + "/./sizes_product_mismatch.yaml",
                                 "cd / && " + std::string(HCPSIM_BINARY) + " replay " + copy.string()}) {
    const auto run = sh(cmd);
    INFO(cmd << "\n" << run.output);
    CHECK(run.exit_code == 0);
  }
  fs::remove_all(dir);
}

TEST_CASE("apps: replay reports a scenario without an expect block as skipped, and --update gives it one",
          "[apps][replay]") {
  // It printed "pass" and JUnit skipped="0" though only validation was checked.
  const auto dir = scratch("no_expect");
  const std::string text = slurp(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci/a2a_cp4_causal_gqa.yaml");
  const fs::path file = dir / "no_expect.yaml", junit = dir / "j.xml";
  std::ofstream(file, std::ios::binary) << text.substr(0, text.find("\nexpect:") + 1);
  REQUIRE(slurp(file).find("expect:") == std::string::npos);
  auto r = hcpsim::test::run_hcpsim("replay " + file.string() + " --junit " + junit.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("skipped " + file.string()) != std::string::npos);
  CHECK(r.output.find("replay: 1 scenario, 0 passed, 0 failed, 1 skipped (no expect: block)") != std::string::npos);
  CHECK(slurp(junit).find("skipped=\"1\"") != std::string::npos);
  CHECK(slurp(junit).find("<skipped/>") != std::string::npos);
  r = hcpsim::test::run_hcpsim("replay --update " + file.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // Every golden, not only validation's (it wrote "validate: {exit_code: 0}" alone): the verdict with a bound on
  // every tensor, and every simulate field with the values of the bundled file's block.
  const std::string updated = slurp(file);
  CHECK(updated.find("expect:\n  validate: {exit_code: 0}\n  verify: {result: pass, max_rel_l2: {out: ") !=
        std::string::npos);
  for (const char* t : {"lse: ", "dq: ", "dk: ", "dv: "}) CHECK(updated.find(t) != std::string::npos);
  for (const char* golden : {"    total_ps: ", "    forward_ps: ", "    max_peak_memory_bytes: ",
                             "    fwd_intra_node_messages: ", "    bwd_inter_node_bytes: 0\n"}) {
    INFO(golden);
    CHECK(updated.find(golden) != std::string::npos);
  }
  std::smatch bundled;
  REQUIRE(std::regex_search(text, bundled, std::regex("total_ps: ([0-9]+)")));
  CHECK(updated.find("    total_ps: " + bundled[1].str() + "\n") != std::string::npos);
  CHECK(hcpsim::test::run_hcpsim("replay " + file.string()).output.find("pass    ") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: replay refuses to verify a sliding window, as verify does", "[apps][replay]") {
  // replay's verify ran the window scenario against a full-causal reference and printed pass.
  const auto dir = scratch("window");
  std::string text = slurp(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci/a2a_cp4_causal_gqa.yaml");
  text.replace(text.find("model:\n"), 7, "model:\n  window_size: [16, 0]\n");
  const fs::path file = dir / "window.yaml";
  std::ofstream(file, std::ios::binary) << text;
  const auto r = hcpsim::test::run_hcpsim("replay " + file.string());
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("model.window_size: verify does not model sliding windows") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: replay names what a path is when it is not a scenario, and --update says a golden is an error",
          "[apps][replay]") {
  const auto dir = scratch("not_scenarios");
  // A device: it said "no such file or directory".
  auto r = hcpsim::test::run_hcpsim("replay /dev/null");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("error: /dev/null: not a regular file or a folder (a device, FIFO or socket is not a "
                      "scenario)") != std::string::npos);
  // A binary file (an HDF5 dump starts with a NUL at byte 0-7): the YAML error stopped at the raw byte, with no fix.
  const fs::path binary = dir / "dump.yaml";
  std::ofstream(binary, std::ios::binary) << std::string("\x89HDF\r\n\x1a\n\0\0\0\0", 12) << "\"\\q";
  for (const std::string cmd : {"replay ", "validate "}) {
    r = hcpsim::test::run_hcpsim(cmd + binary.string());
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("dump.yaml: not a scenario: a binary file (a NUL byte at offset 8; an HDF5 dump or another "
                        "binary file?); fix: give the scenario's YAML file") != std::string::npos);
  }
  // A syntax error outside the expect block is the file's, not "expect:"'s.
  const fs::path broken = dir / "broken.yaml";
  std::ofstream(broken, std::ios::binary) << "schema_version: 1\nmodel:\n  hidden_size: [1\n";
  r = hcpsim::test::run_hcpsim("replay " + broken.string());
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("broken.yaml:4:1: not valid YAML (end of sequence flow not found); fix: fix the syntax") !=
        std::string::npos);
  // --update of a scenario that does not validate records the error, and says so.
  const fs::path invalid = dir / "invalid.yaml";
  std::ofstream(invalid, std::ios::binary) << "name: x\nmodel:\n  hidden_size: 8\n";
  r = hcpsim::test::run_hcpsim("replay --update " + invalid.string());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("updated " + invalid.string() + " (it does not validate: the golden records the error, exit 2)") !=
        std::string::npos);
  CHECK(slurp(invalid).find("validate: {exit_code: 2, error: \"schema_version: missing") != std::string::npos);
  // A calibration file kept next to the scenarios that include it is skipped, and --update leaves it alone (it
  // failed as a scenario, and --update appended an error golden to it).
  const fs::path cal_dir = dir / "cal";
  fs::create_directories(cal_dir);
  const std::string cal_text = "# written by hcpsim calibrate\nsource: \"ops.csv\"\ngpu:\n  name: \"H100\"\n";
  std::ofstream(cal_dir / "h100cal.yaml", std::ios::binary) << cal_text;
  r = hcpsim::test::run_hcpsim("replay --update " + cal_dir.string());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("skipped " + (cal_dir / "h100cal.yaml").string() +
                      "\n        a calibration file of 'hcpsim calibrate' (source: and gpu:), not a scenario") !=
        std::string::npos);
  CHECK(r.output.find("replay: 1 scenario, 0 passed, 0 failed, 1 skipped (calibration files), 0 updated") !=
        std::string::npos);
  CHECK(slurp(cal_dir / "h100cal.yaml") == cal_text);
  fs::remove_all(dir);
}
