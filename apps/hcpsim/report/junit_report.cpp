#include "junit_report.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <ctime>

#include "hcpsim/core/error.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/io/xml.hpp"

namespace hcpsim::app {
namespace {

/// Names and messages come from file paths and scenario values: drop what XML 1.0 cannot carry, then escape.
std::string clean(const std::string& text) { return xml_escape(xml_strip_invalid(text)); }

/// 9999-12-31T23:59:59 UTC: the four-digit years of the timestamp format end there.
constexpr long long kLastSecondOf9999 = 253402300799;

std::string seconds(double s) { return fmt::format("{:.3f}", s < 0.0 ? 0.0 : s); }

}  // namespace

std::string junit_timestamp() {
  std::time_t t = 0;
  if (const char* env = std::getenv("SOURCE_DATE_EPOCH"); env != nullptr) {
    // The reproducible-builds convention: a malformed value is an error, not a silent fall-back to the clock.
    const std::string s = env;
    long long v = -1;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v < 0 || v > kLastSecondOf9999)
      throw InputError(SourceLoc{}, "SOURCE_DATE_EPOCH",
                       fmt::format("'{}' is not a whole number of seconds from 1970-01-01 to 9999-12-31 UTC", s),
                       "unset it, or set it to e.g. $(git log -1 --format=%ct)");
    t = static_cast<std::time_t>(v);
  } else {
    t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  }
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
  return buf.data();
}

std::string junit_hostname() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf.data();
}

void write_junit(const std::string& path, const std::vector<JUnitCase>& outcomes, const JUnitRun& run) {
  int failures = 0, skipped = 0;
  for (const auto& o : outcomes) {
    failures += o.status == "FAIL";
    skipped += o.status == "skipped";
  }
  const std::string counts = fmt::format("tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{}\" "
                                         "timestamp=\"{}\"",
                                         outcomes.size(), failures, skipped, seconds(run.seconds), run.timestamp);
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites name=\"hcpsim replay\" {}>\n", counts);
  x += fmt::format("  <testsuite name=\"hcpsim replay\" {} hostname=\"{}\" id=\"0\" package=\"hcpsim\">\n", counts,
                   clean(run.hostname.empty() ? "localhost" : run.hostname));
  for (const auto& o : outcomes) {
    x += fmt::format("    <testcase name=\"{}\" classname=\"hcpsim.replay\" time=\"{}\">", clean(o.name),
                     seconds(o.seconds));
    if (o.status == "FAIL") {
      std::string msg;
      for (const auto& f : o.failures) msg += f + "\n";
      const std::string first = o.failures.empty() ? "failed" : o.failures.front();
      x += fmt::format("<failure message=\"{}\" type=\"golden\">{}</failure>", clean(first), clean(msg));
    } else if (o.status == "skipped") {
      x += "<skipped/>";
    }
    x += "</testcase>\n";
  }
  x += "  </testsuite>\n</testsuites>\n";
  write_output_file(path, x, "JUnit file", "--junit");
}

}  // namespace hcpsim::app
