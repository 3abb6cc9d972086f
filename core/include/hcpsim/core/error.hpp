#pragma once
/// Errors and always-on invariants shared by every hcpsim module.

#include <stdexcept>
#include <string>

namespace hcpsim {

/// Where a scenario value came from: a YAML file position or a command-line override.
/// `line` and `column` are 1-based; both are 0 when the position is unknown (e.g. a default value).
struct SourceLoc {
  std::string file;      ///< scenario path as given by the user, or empty
  int line = 0;          ///< 1-based line, 0 if unknown
  int column = 0;        ///< 1-based column, 0 if unknown
  std::string override_text;  ///< non-empty when the value came from a `key.path=value` override

  /// "file:line:col" ("file:line" when the column is 0), "override 'model.seq_length=7'", "file" or
  /// "command line" (an option, no file).
  [[nodiscard]] std::string to_string() const;
};

/// Bad user input: a malformed scenario, an impossible configuration, a corrupt file.
/// The message always reads `<where>: <key>: <problem>; fix: <fix>`. The command line maps it to exit code 2.
class InputError : public std::runtime_error {
 public:
  /// @param where  file position or override the offending value came from
  /// @param key    dotted key path, e.g. "parallel.hierarchical_context_parallel_sizes" (may be empty)
  /// @param problem what is wrong, in the user's terms
  /// @param fix    what to change
  InputError(const SourceLoc& where, std::string key, std::string problem, std::string fix);

  [[nodiscard]] const std::string& key() const { return key_; }
  [[nodiscard]] const std::string& problem() const { return problem_; }
  [[nodiscard]] const std::string& fix() const { return fix_; }

 private:
  std::string key_;
  std::string problem_;
  std::string fix_;
};

/// A CUDA, NCCL or device-availability failure. The command line maps it to exit code 3.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Aborts with file:line and the message. Used by HCPSIM_ASSERT; stays on in every build type.
[[noreturn]] void assert_fail(const char* condition, const char* file, int line, const std::string& message);

}  // namespace hcpsim

/// Invariant check that is never compiled out. Split compound conditions so the failing one is named.
#define HCPSIM_ASSERT(cond, msg)                                      \
  do {                                                                \
    if (!(cond)) ::hcpsim::assert_fail(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
