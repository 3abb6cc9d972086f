#pragma once
/// Scenario replay: runs what each scenario's `expect:` block asks for and compares with the goldens.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"

namespace hcpsim::app {

/// What `verify` produced for replay: the verdict, the relative L2 error per tensor ("out", "lse", "dq", "dk",
/// "dv"; NaN for a tensor with non-finite entries) and a digest of every output value (for --twice).
struct ReplayVerify {
  bool pass = false;
  std::string result = "fail";  ///< "pass" | "precision_limited" | "fail" (VerifyReport::verdict)
  std::map<std::string, double> rel_l2;
  std::string digest;
};

/// What `simulate` produced for replay: exact golden fields (ps, bytes, counts) and a digest of the summary.
struct ReplaySimulate {
  std::map<std::string, int64_t> values;
  std::string digest;
};

/// Runs the CPU oracle on a validated scenario as `hcpsim verify` does (first buildable comm type).
/// @throws InputError for scenarios it cannot run.
ReplayVerify replay_verify(const Scenario& s, int threads);
/// Runs the simulator on a validated scenario as `hcpsim simulate` does (first buildable comm type).
/// @throws InputError for scenarios it cannot run.
ReplaySimulate replay_simulate(const Scenario& s);
/// The field names replay_simulate reports, sorted.
std::vector<std::string> replay_simulate_fields();

}  // namespace hcpsim::app
