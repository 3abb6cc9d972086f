// `hcpsim validate --json FILE` through the real binary: the resolved layout of a valid scenario and the error of
// an invalid one, parsed with nlohmann-json.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch_compat.hpp"
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return nlohmann::json::parse(in);
}

fs::path scratch_dir() {
  const auto dir = fs::temp_directory_path() / "hcpsim_validate_json_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("apps: validate --json writes the scenario, the a2a+p2p groups and the verdict", "[apps][validate]") {
  const auto out = scratch_dir() / "valid.json";
  const auto r = hcpsim::test::run_hcpsim("validate scenarios/llama32_1b_cp4_a2a_p2p.yaml --json " + out.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto j = read_json(out);
  REQUIRE(j.at("verdict") == "valid");
  REQUIRE(j.at("scenario").at("path") == "scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  REQUIRE(j.at("parallel").at("context_parallel_size") == 4);
  REQUIRE(j.at("parallel").at("data_parallel_size") == 2);  // filled from the 8-GPU node
  REQUIRE(j.at("parallel").at("gpus_used") == 8);
  REQUIRE(j.at("cluster").at("gpus_per_node") == 8);
  REQUIRE(j.at("layouts").size() == 1);
  const auto& l = j.at("layouts").at(0);
  REQUIRE(l.at("cp_comm_type") == "a2a+p2p");
  REQUIRE(l.at("a2a_size") == 2);
  REQUIRE(l.at("p2p_size") == 2);
  REQUIRE(l.at("num_cp_groups") == 2);
  REQUIRE(l.at("context_parallel_group").at("global_ranks") == std::vector<int64_t>{0, 1, 2, 3});
  // Level 0 (a2a) groups are consecutive ranks, level 1 (p2p) rings stride over them (as validate prints).
  REQUIRE(l.at("a2a_groups").at(1).at("global_ranks") == std::vector<int64_t>{2, 3});
  REQUIRE(l.at("p2p_groups").at(0).at("global_ranks") == std::vector<int64_t>{0, 2});
  REQUIRE(l.at("p2p_groups").at(1).at("intra_node") == true);
  REQUIRE(j.at("attention_backends").at(0).at("kernel") == "cuDNN fused attention");
  REQUIRE(j.at("warnings").is_array());
  REQUIRE(j.at("provenance").is_object());
  // The text on stdout is the same as without --json.
  const auto plain = hcpsim::test::run_hcpsim("validate scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  REQUIRE(plain.output == r.output);
}

TEST_CASE("apps: validate --json of an invalid scenario holds the error with its key and fix, exit 2",
          "[apps][validate]") {
  const auto out = scratch_dir() / "invalid.json";
  const auto r =
      hcpsim::test::run_hcpsim("validate scenarios/invalid/a2a_p2p_without_sizes.yaml --json " + out.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  const auto j = read_json(out);
  REQUIRE(j.at("verdict") == "invalid");
  REQUIRE(j.at("scenario").at("path") == "scenarios/invalid/a2a_p2p_without_sizes.yaml");
  const auto& e = j.at("error");
  REQUIRE(e.at("key") == "parallel.cp_comm_type");
  REQUIRE(e.at("fix").get<std::string>().find("hierarchical_context_parallel_sizes: [A, P]") != std::string::npos);
  REQUIRE(e.at("problem").get<std::string>().find("needs hierarchical_context_parallel_sizes") != std::string::npos);
  // message is the stderr line without "error: ".
  REQUIRE(r.output.find("error: " + e.at("message").get<std::string>()) != std::string::npos);
  // A file that does not exist is an invalid verdict too.
  const auto missing = hcpsim::test::run_hcpsim("validate scenarios/no_such_file.yaml --json " + out.string());
  REQUIRE(missing.exit_code == 2);
  REQUIRE(read_json(out).at("verdict") == "invalid");
}
