// No output replaces one of the command's own inputs (io/output_file.hpp refuse_if_input), through the same
// path or another name of the same file; `replay --update` is the one command that rewrites its input on request.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "catch_compat.hpp"
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
