// Inputs are regular files under a stated size (core/input_file.hpp) and scenario YAML never repeats a key:
// a FIFO does not hang a command, /dev/zero does not fill memory, a directory is named as one, and a repeated key
// is an error naming both places instead of a silently ignored value.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "catch_compat.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/input_file.hpp"

using namespace hcpsim;

namespace {

const char* kScenario = "schema_version: 1\nmodel: {num_attention_heads: 8, kv_channels: 16, seq_length: 128}\n"
                        "parallel: {context_parallel_size: 4, cp_comm_type: p2p}\n";

std::string load_error(const std::string& path) {
  try {
    (void)load_scenario(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string text_error(const std::string& text) {
  try {
    (void)load_scenario_text(text, "s.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("config: only regular files under the size limit are read as inputs", "[config][robustness]") {
  const auto dir = std::filesystem::temp_directory_path() / ("hcpsim_inputs_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "fifo.yaml").string();
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(load_error(fifo) == fifo + ": the scenario file is not a regular file (a FIFO, device or socket); fix: give "
                                   "a regular file");
  CHECK(load_error("/dev/zero").find("/dev/zero: the scenario file is not a regular file") != std::string::npos);
  CHECK(load_error(dir.string()).find("the scenario file is a directory") != std::string::npos);
  CHECK(load_error((dir / "missing.yaml").string()).find("cannot open the scenario file") != std::string::npos);
  {
    std::ofstream big(dir / "big.yaml");
    big << kScenario << "# " << std::string((16u << 20) + 1, 'x') << "\n";
  }
  CHECK(load_error((dir / "big.yaml").string()).find("the scenario file is larger than 16 MiB; fix: give a scenario "
                                                     "file of at most 16 MiB") != std::string::npos);
  {
    std::ofstream ok(dir / "ok.yaml");
    ok << kScenario;
  }
  CHECK(load_error((dir / "ok.yaml").string()).empty());
  // The same reader serves every command's inputs.
  CHECK_THROWS_AS(read_input_file({fifo, "log file", kMaxLogBytes, false, "check the path"}), InputError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("config: a key given twice is an error naming both places", "[config][robustness]") {
  const std::string flow = "schema_version: 1\nmodel: {num_attention_heads: 8, kv_channels: 16, seq_length: 128, "
                           "seq_length: 64}\nparallel: {context_parallel_size: 4, cp_comm_type: p2p}\n";
  CHECK(text_error(flow) == "s.yaml:2:67: model.seq_length: 'model.seq_length' is given twice (at 2:50 and 2:67); "
                            "YAML would keep only one; fix: keep one of the two");
  const std::string block = std::string(kScenario) + "parallel:\n  context_parallel_size: 2\n";
  CHECK(text_error(block).find("s.yaml:4:1: parallel: 'parallel' is given twice (at 3:1 and 4:1)") !=
        std::string::npos);
  const std::string in_list = std::string(kScenario) +
                              "cluster:\n  topology:\n    vertices:\n      - {name: g0, kind: gpu, name: g1}\n";
  CHECK(text_error(in_list).find("'cluster.topology.vertices[0].name' is given twice") != std::string::npos);
}

TEST_CASE("config: overrides are named in their own errors, and included files are never quoted", "[config][robustness]") {
  auto override_error = [](const std::string& o) {
    try {
      (void)load_scenario_text(std::string(kScenario) + "cluster: {preset: dgx-h100}\n", "s.yaml", {o});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(override_error("model.seq_length.=5") ==
        "override 'model.seq_length.=5': model.seq_length.: empty component in key path; fix: write dotted keys such "
        "as parallel.context_parallel_size");
  CHECK(override_error(".model.seq_length=5").find("empty component in key path") != std::string::npos);
  CHECK(override_error("foo.bar=1").rfind("override 'foo.bar=1': foo: unknown key 'foo'", 0) == 0);
  // A calibration file may be any readable path: its errors name the place, never its keys or values.
  const auto dir = std::filesystem::temp_directory_path() / ("hcpsim_include_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "secret.yaml");
    f << "gpu:\n  memory_GB: SECRET_TOKEN_abc123\n";
    std::ofstream g(dir / "secret_key.yaml");
    g << "gpu:\n  SECRET_KEY_xyz: 1\n";
  }
  for (const char* name : {"secret.yaml", "secret_key.yaml"}) {
    const std::string e = override_error("cluster.gpu.calibration=" + (dir / name).string());
    INFO(e);
    CHECK(e.find((dir / name).string() + ":2:") != std::string::npos);
    CHECK(e.find("(not shown: the file is included from the scenario)") != std::string::npos);
    CHECK(e.find("SECRET") == std::string::npos);
  }
  std::filesystem::remove_all(dir);
}
