#pragma once
/// Typed access to one scenario YAML tree, shared by the section readers of the scenario loader: every value is
/// read with the place it came from (file:line:col, or the command-line override that set it), and every
/// mapping's keys are checked against the keys its section allows, with a did-you-mean for unknown ones.
/// Private to config: yaml-cpp stays out of the public headers.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hcpsim/core/error.hpp"
#include "hcpsim/config/plausible_ranges.hpp"
#include "scenario_overrides.hpp"

namespace hcpsim {

/// Keys of each section (the did-you-mean at the top level looks a misplaced key up in them).
extern const std::vector<std::string> kModelKeys;
extern const std::vector<std::string> kParallelKeys;
extern const std::vector<std::string> kClusterKeys;
extern const std::vector<std::string> kTrainingKeys;
extern const std::vector<std::string> kOracleKeys;

/// "parent.key", or "key" at the top level (parent "").
std::string join_path(const std::string& parent, const std::string& key);

/// Refuses a mapping anywhere in `root` that repeats a key (yaml-cpp keeps both and lookups find the first, so the
/// later value would be silently ignored). Iterative, so a deeply nested file cannot exhaust the stack.
/// @throws InputError at the second occurrence, naming the key path and both lines.
void check_unique_keys(const YAML::Node& root, const std::string& file);

/// Reads typed values out of one scenario tree. Every getter takes the node and its dotted key path and raises
/// InputError (location, key path, problem, fix) when the value has the wrong type or form.
class YamlReader {
 public:
  /// `file` is named in locations; `overridden` maps each overridden dotted key to its override text (a value
  /// at or below such a key points at that text); check_map records each key's location into `locations`.
  YamlReader(std::string file, std::map<std::string, std::string> overridden,
             std::map<std::string, SourceLoc>& locations);

  /// Keys the user spelled the Megatron-Bridge way (canonical key → use): messages name them as
  /// "alias (Megatron-Bridge spelling of canonical)", and a moved file key's location is its alias's.
  void set_aliases(std::map<std::string, AliasUse> aliases) { aliases_ = std::move(aliases); }

  /// `path` as messages name it: with the user's Bridge spelling beside it when they wrote one.
  [[nodiscard]] std::string shown_key(const std::string& path) const;

  /// Where the value of `path` (node `n`) came from: the override that set it or a parent of it, else the
  /// 1-based line and column of `n` in the file.
  [[nodiscard]] SourceLoc loc(const YAML::Node& n, const std::string& path) const;

  /// A fix's example of `path` set to `value`, as the user would write it where the value came from:
  /// "'path: value'" in a file, "'path=value'" for an override.
  [[nodiscard]] std::string example(const YAML::Node& n, const std::string& path, const std::string& value) const;

  /// @throws InputError at loc(n, path).
  [[noreturn]] void fail(const YAML::Node& n, const std::string& path, const std::string& problem,
                         const std::string& fix) const;

  /// Rejects keys of `map` not in `allowed` (with a did-you-mean) and records key locations.
  /// @throws InputError if `map` is not a mapping or has an unknown key.
  void check_map(const YAML::Node& map, const std::string& path, const std::vector<std::string>& allowed);

  /// Records the location of the key node `key` as the location of `path`.
  void record(const YAML::Node& key, const std::string& path);

  /// The whole number a non-integer text most likely meant, for a fix's example: "8k" → "8192", "1M" → "1048576",
  /// "2048.0" → "2048"; std::nullopt when none.
  [[nodiscard]] static std::optional<std::string> integer_meant(const std::string& text);

  /// A whole decimal number. @throws InputError otherwise.
  [[nodiscard]] int64_t get_int(const YAML::Node& n, const std::string& path) const;
  /// A finite number. @throws InputError otherwise.
  [[nodiscard]] double get_double(const YAML::Node& n, const std::string& path) const;
  /// true/True or false/False. @throws InputError otherwise.
  [[nodiscard]] bool get_bool(const YAML::Node& n, const std::string& path) const;
  /// A scalar's text. @throws InputError for a list or mapping.
  [[nodiscard]] std::string get_string(const YAML::Node& n, const std::string& path) const;
  /// A list of whole numbers. @throws InputError otherwise.
  [[nodiscard]] std::vector<int64_t> get_int_list(const YAML::Node& n, const std::string& path) const;
  /// A number > 0 (≥ 0 with `allow_zero`), in the unit the key names. @throws InputError otherwise.
  [[nodiscard]] double positive(const YAML::Node& n, const std::string& path, bool allow_zero) const;
  /// A number inside `range` (plausible_ranges.hpp), in the unit the key names. @throws InputError naming the
  /// range and its reason otherwise.
  [[nodiscard]] double plausible(const YAML::Node& n, const std::string& path, const plausible::Range& range) const;
  /// A whole number inside `range`. @throws InputError otherwise.
  [[nodiscard]] int64_t plausible_int(const YAML::Node& n, const std::string& path,
                                      const plausible::Range& range) const;

  /// A string that `parse` (string → std::optional<E>) accepts; `choices` lists the accepted values for the fix.
  /// @throws InputError for an unknown value.
  template <class E, class ParseFn>
  [[nodiscard]] E get_enum(const YAML::Node& n, const std::string& path, ParseFn parse,
                           const std::string& choices) const {
    const std::string s = get_string(n, path);
    auto v = parse(s);
    if (!v) fail(n, path, "unknown value '" + s + "'", "use one of: " + choices);
    return *v;
  }

  /// The file named in locations ("" for text without a file).
  [[nodiscard]] const std::string& file() const { return file_; }
  /// Names `file` in the locations from now on (a calibration file read from inside the scenario).
  void set_file(std::string file) { file_ = std::move(file); }
  /// false while reading a file the scenario includes (a calibration file, which may be any path the user can
  /// read): errors then name the place but never quote the file's keys or values.
  void set_echo_contents(bool echo) { echo_ = echo; }
  /// `text` quoted for an error message, or a note that an included file's contents are not shown.
  [[nodiscard]] std::string shown(const std::string& text) const {
    return echo_ ? "'" + text + "'" : "(not shown: the file is included from the scenario)";
  }

 private:
  /// Fails at (n, path) naming `text` (the value as written) when v lies outside `range`.
  void check_plausible(const YAML::Node& n, const std::string& path, const std::string& text, double v,
                       const plausible::Range& range) const;

  std::string file_;
  bool echo_ = true;
  std::map<std::string, std::string> overridden_;
  std::map<std::string, AliasUse> aliases_;
  std::map<std::string, SourceLoc>& locations_;
};

}  // namespace hcpsim
