#pragma once
// Small file helpers shared by the test sources: read a whole file, and a fresh scratch directory per test case.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace hcpsim::test {

/// The whole content of `path` ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// An empty directory under the system temp dir, unique per process and `name`; callers remove it when done.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("hcpsim_test_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace hcpsim::test
