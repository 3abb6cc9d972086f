#pragma once
/// The JUnit XML report of `hcpsim replay --junit` (one testcase per scenario file).
///
/// The format follows the attributes strict consumers (Jenkins, GitLab, the Apache Ant JUnit schema) require;
/// tests/fixtures/junit_report.xsd is its schema, with the public descriptions it was written from.

#include <string>
#include <vector>

namespace hcpsim::app {

/// One replayed scenario as a JUnit testcase.
struct JUnitCase {
  std::string name;                   ///< the scenario path
  std::string status;                 ///< "pass", "FAIL" or "skipped"
  std::vector<std::string> failures;  ///< "field: golden X, actual Y" lines of a FAIL (at least one)
  double seconds = 0.0;               ///< measured wall time of the case (steady clock), seconds
};

/// What the report says about the run as a whole.
struct JUnitRun {
  std::string timestamp;  ///< start of the run, "YYYY-MM-DDTHH:MM:SS" in UTC (see junit_timestamp)
  std::string hostname;   ///< the machine (see junit_hostname)
  double seconds = 0.0;   ///< measured wall time of the whole run (steady clock), seconds
};

/// The run's start as "YYYY-MM-DDTHH:MM:SS" (ISO 8601, UTC, no zone suffix: the Apache Ant JUnit schema's
/// timestamp pattern allows none). Taken from the SOURCE_DATE_EPOCH environment variable (integer seconds since
/// 1970-01-01 UTC; https://reproducible-builds.org/specs/source-date-epoch/) when set, else from the system clock.
/// @throws InputError naming SOURCE_DATE_EPOCH if it is set but not a whole number in [0, 253402300799]
///         (1970-01-01 to 9999-12-31), as the convention asks of a malformed value.
std::string junit_timestamp();

/// The host name (POSIX gethostname), or "localhost" when it cannot be determined (as the format asks).
std::string junit_hostname();

/// Writes `<testsuites>` holding one `<testsuite name="hcpsim replay">`, both with tests, failures, errors (always
/// 0: a scenario that cannot run is an InputError of the whole command), skipped, time and timestamp (the suite
/// also hostname, id and package), and a `<testcase classname="hcpsim.replay" name time>` per case: a
/// `<failure message=first line type="golden">all lines</failure>` for FAIL, `<skipped/>` for skipped. Characters
/// outside the XML 1.0 Char production are dropped from every name and message, which are then XML-escaped.
/// Times are seconds with millisecond digits. Written through io's output writer (temporary file, then rename).
/// @throws InputError naming `path` and --junit if it cannot be written.
void write_junit(const std::string& path, const std::vector<JUnitCase>& outcomes, const JUnitRun& run);

}  // namespace hcpsim::app
