#pragma once
/// The JUnit XML report of `hcpsim replay --junit` (one testcase per scenario file).

#include <string>
#include <vector>

namespace hcpsim::app {

/// One replayed scenario as a JUnit testcase.
struct JUnitCase {
  std::string name;                   ///< the scenario path
  std::string status;                 ///< "pass", "FAIL" or "skipped"
  std::vector<std::string> failures;  ///< "field: golden X, actual Y" lines of a FAIL (at least one)
};

/// Writes `<testsuite name="hcpsim replay" tests failures skipped>` with a `<testcase classname="hcpsim.replay">`
/// per case: a `<failure message=first line>all lines</failure>` for FAIL, `<skipped/>` for skipped; text and
/// attributes XML-escaped. Written through io's output writer (temporary file, then rename).
/// @throws InputError naming `path` and --junit if it cannot be written.
void write_junit(const std::string& path, const std::vector<JUnitCase>& outcomes);

}  // namespace hcpsim::app
