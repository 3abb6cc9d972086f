#include "junit_report.hpp"

#include <fmt/format.h>

#include "hcpsim/io/output_file.hpp"
#include "hcpsim/io/xml.hpp"

namespace hcpsim::app {

void write_junit(const std::string& path, const std::vector<JUnitCase>& outcomes) {
  int failures = 0, skipped = 0;
  for (const auto& o : outcomes) {
    failures += o.status == "FAIL";
    skipped += o.status == "skipped";
  }
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuite name=\"hcpsim replay\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n",
                   outcomes.size(), failures, skipped);
  for (const auto& o : outcomes) {
    x += fmt::format("  <testcase classname=\"hcpsim.replay\" name=\"{}\">", xml_escape(o.name));
    if (o.status == "FAIL") {
      std::string msg;
      for (const auto& f : o.failures) msg += f + "\n";
      x += fmt::format("<failure message=\"{}\">{}</failure>", xml_escape(o.failures.front()), xml_escape(msg));
    } else if (o.status == "skipped") {
      x += "<skipped/>";
    }
    x += "</testcase>\n";
  }
  x += "</testsuite>\n";
  write_output_file(path, x, "JUnit file", "--junit");
}

}  // namespace hcpsim::app
