// Progress and cost up front (apps/hcpsim/progress.hpp) as a user sees them: estimate and progress lines on stderr
// only, stdout byte-identical with and without them, --quiet silences them.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "catch_compat.hpp"
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;

struct SplitRun {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs hcpsim with `env` (e.g. "HCPSIM_PROGRESS_INTERVAL_S=0") and `args`, stdout and stderr to separate files.
SplitRun run_split(const std::string& env, const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("hcpsim_progress_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path out = dir / "out.txt", err = dir / "err.txt";
  // In a subshell: run_command's own 2>&1 then applies to the (silent) subshell, not to hcpsim.
  const std::string env_part = env.empty() ? std::string("-u HCPSIM_PROGRESS_INTERVAL_S") : env;
  const auto r = hcpsim::test::run_command("(env " + env_part +
                                           " '" + HCPSIM_BINARY + "' " + args + " >'" + out.string() + "' 2>'" +
                                           err.string() + "')");
  SplitRun s{r.exit_code, slurp(out), slurp(err)};
  fs::remove_all(dir);
  return s;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// Runs `args` plain, with forced progress lines and with forced lines and --quiet (`quiet_args`); checks stdout is
/// the same in all three and the lines appear on stderr only when forced and not quiet. Returns the forced stderr.
std::string check_progress(const std::string& args, const std::string& quiet_args, const std::string& label) {
  const SplitRun plain = run_split("", args);
  const SplitRun forced = run_split("HCPSIM_PROGRESS_INTERVAL_S=0", args);
  const SplitRun quiet = run_split("HCPSIM_PROGRESS_INTERVAL_S=0", quiet_args);
  INFO(args << "\nstdout:\n" << plain.out << "\nforced stderr:\n" << forced.err);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(forced.exit_code == 0);
  REQUIRE(quiet.exit_code == 0);
  REQUIRE(!plain.out.empty());
  REQUIRE(forced.out == plain.out);  // progress never reaches stdout
  REQUIRE(quiet.out == plain.out);
  // A short run prints no estimate line and no progress by default (plan's size line is not one of them).
  REQUIRE(plain.err.find("(estimate)") == std::string::npos);
  REQUIRE(plain.err.find(", ETA ") == std::string::npos);
  REQUIRE(forced.err.find(label) != std::string::npos);
  REQUIRE(plain.out.find("ETA") == std::string::npos);
  REQUIRE(quiet.err == plain.err);  // --quiet: not a single progress line
  return forced.err;
}

}  // namespace

TEST_CASE("apps: verify prints its estimate and progress on stderr only, and --quiet silences them", "[apps]") {
  const std::string base = "verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 --threads 1";
  const std::string err = check_progress(base, base + " --quiet", "verify a2a+p2p");
  REQUIRE(err.find("verify a2a+p2p: ~") != std::string::npos);
  REQUIRE(err.find(" GFLOP, ~") != std::string::npos);
  REQUIRE(err.find(" GB peak, ~") != std::string::npos);
  REQUIRE(err.find("on 1 thread (estimate)\n") != std::string::npos);
  // Forced interval 0: a line per unit; the last shows the whole run done.
  REQUIRE(count(err, ", ETA ") > 3);
  REQUIRE(err.find("(100%), elapsed ") != std::string::npos);
}

TEST_CASE("apps: plan reports each finished simulation on stderr", "[apps]") {
  const std::string base =
      "plan tests/fixtures/plan/slow_network_cp32.yaml --cp 4 --threads 2 --fixed tp,pp,vp,recompute,micro_batch";
  const std::string err = check_progress(base, "--quiet " + base, "plan");
  // The size of the search comes first, as the estimate line when the display is on.
  REQUIRE(err.find("plan: searching 6 configurations (4 legal, 4 fit in memory by the closed form), simulating 4, ~") == 0);
  REQUIRE(err.find(" threads (estimate)\n") != std::string::npos);
  // 4 legal options, each simulated twice (the step and the attention alone): 8 lines, the last at 8/8.
  REQUIRE(count(err, "/8 (") == 8);
  REQUIRE(err.find("plan: 8/8 (100%)") != std::string::npos);
}

TEST_CASE("apps: replay reports each scenario and the total on stderr", "[apps]") {
  const std::string base = "replay scenarios/ci/a2a_cp4_causal_gqa.yaml scenarios/ci/all_gather_cp4_causal.yaml";
  const std::string err = check_progress(base, base + " --quiet", "replay");
  REQUIRE(err.find("replay: 2 scenarios (estimate)\n") != std::string::npos);
  REQUIRE(err.find("replay: 1/2 (50%)") != std::string::npos);
  REQUIRE(err.find("replay: 2/2 (100%)") != std::string::npos);
}

TEST_CASE("apps: a malformed HCPSIM_PROGRESS_INTERVAL_S is an input error naming it", "[apps]") {
  const SplitRun r = run_split("HCPSIM_PROGRESS_INTERVAL_S=soon", "replay scenarios/ci/a2a_cp4_causal_gqa.yaml");
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.err.find("HCPSIM_PROGRESS_INTERVAL_S") != std::string::npos);
  REQUIRE(r.out.empty());
}

TEST_CASE("apps: diff takes --quiet after the command, as simulate and plan do", "[apps]") {
  // It was "The following argument was not expected: --quiet" (only `hcpsim --quiet diff` worked).
  const SplitRun r = run_split("HCPSIM_PROGRESS_INTERVAL_S=0",
                               "diff scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=4096 --quiet");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.err.empty());
  REQUIRE(r.out.find("seq_length") != std::string::npos);
}

TEST_CASE("apps: simulate says how many threads build, and writes the same for --threads 1 and 2", "[apps]") {
  // The bundled 8B scenario in plain p2p: every rank program is built (no symmetry reduction), in full.
  const std::string base = "simulate scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml parallel.cp_comm_type=p2p "
                           "parallel.hierarchical_context_parallel_sizes=null";
  const std::string err = check_progress(base + " --threads 2", base + " --threads 2 --quiet", "simulate");
  REQUIRE(err.find(" per comm type (1 comm type) on 1 thread; rank programs built on 2 threads, the event loop "
                   "on 1; progress counts each comm type's attention and whole step (estimate)\n") != std::string::npos);
  // One comm type shows progress after its attention and after its whole step.
  REQUIRE(err.find("simulate: 1/2 (50%), elapsed ") != std::string::npos);
  REQUIRE(err.find("simulate: 2/2 (100%), elapsed ") != std::string::npos);
  const SplitRun one = run_split("", base + " --threads 1");
  const SplitRun two = run_split("", base + " --threads 2");
  REQUIRE(one.exit_code == 0);
  REQUIRE(one.out.find("inter_node messages") != std::string::npos);
  REQUIRE(two.out == one.out);
  for (const char* bad : {" --threads 0", " --threads -3"}) {
    const SplitRun r = run_split("", base + bad);
    INFO(bad << ": " << r.err);
    REQUIRE(r.exit_code == 2);
    REQUIRE(r.err.find("--threads: must be at least 1; fix: use --threads 1 or more") != std::string::npos);
  }
}
