#pragma once
// Runs a shell command from the source tree and captures its exit code and combined stdout/stderr.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "catch_compat.hpp"

namespace hcpsim::test {

struct CommandRun {
  int exit_code = -1;
  std::string output;  ///< stdout and stderr together
};

/// `cd HCPSIM_SOURCE_DIR && cmd 2>&1`.
inline CommandRun run_command(const std::string& cmd) {
  CommandRun r;
  FILE* pipe = popen((std::string("cd '") + HCPSIM_SOURCE_DIR + "' && " + cmd + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// Runs the built hcpsim binary with `args`.
inline CommandRun run_hcpsim(const std::string& args) {
  return run_command(std::string("'") + HCPSIM_BINARY + "' " + args);
}

}  // namespace hcpsim::test
