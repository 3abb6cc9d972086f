#include "hcpsim/core/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace hcpsim {

std::string SourceLoc::to_string() const {
  if (!override_text.empty()) {
    std::string quoted("override '");
    quoted.append(override_text).push_back('\'');
    return quoted;
  }
  std::string where = file.empty() ? std::string("command line") : file;
  if (line > 0) {
    where.push_back(':');
    where.append(std::to_string(line));
    if (column > 0) {  // a line-oriented file (CSV, log) has no column
      where.push_back(':');
      where.append(std::to_string(column));
    }
  }
  return where;
}

static std::string format_input_error(const SourceLoc& where, const std::string& key, const std::string& problem,
                                      const std::string& fix) {
  std::string msg = where.to_string() + ": ";
  if (!key.empty()) msg += key + ": ";
  msg += problem;
  if (!fix.empty()) msg += "; fix: " + fix;
  return msg;
}

InputError::InputError(const SourceLoc& where, std::string key, std::string problem, std::string fix)
    : std::runtime_error(format_input_error(where, key, problem, fix)),
      key_(std::move(key)),
      problem_(std::move(problem)),
      fix_(std::move(fix)) {}

void assert_fail(const char* condition, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "hcpsim internal error: %s:%d: assertion '%s' failed: %s\n", file, line, condition,
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace hcpsim
