// `hcpsim replay PATH...`: golden expectations of scenario files, for CI.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <fstream>
#include <sstream>

#include "admission.hpp"
#include "app_common.hpp"
#include "progress.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/io/yaml_text.hpp"
#include "hcpsim/sim/trace_writer.hpp"
#include "replay.hpp"
#include "report/junit_report.hpp"

namespace hcpsim::app {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  std::string path;
  std::string status = "pass";       ///< pass | FAIL | skipped (no expect: block, or a calibration file)
  std::vector<std::string> failures;  ///< "field: golden X, actual Y"
  std::string digest;                 ///< of everything the scenario produced
  double seconds = 0.0;               ///< steady-clock time of every run of the file (JUnit time only)
  // Actual values, for --update.
  int validate_exit_code = 0;
  std::string validate_error;
  bool ran_verify = false;
  ReplayVerify verify;
  bool ran_simulate = false;
  ReplaySimulate simulate;
  bool calibration_file = false;  ///< a calibration file, skipped (never rewritten by --update)
  bool unreadable = false;        ///< not YAML or no readable expect: block (FAIL; the run exits 2)
};

std::vector<std::string> collect(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path().string());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      SourceLoc l;
      l.file = p;
      const bool exists = fs::exists(fs::symlink_status(p, ec)) && !ec;
      throw InputError(l, "",
                       exists ? "not a regular file or a folder (a device, FIFO or socket is not a scenario)"
                              : "no such file or directory",
                       "give scenario files (.yaml) or folders that hold them");
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

/// The shortest text that reads back as exactly `v` (a golden written as 1e-09 prints as 1e-09, not
/// 1.0000000000000001e-09).
std::string g17(double v) { return fmt::format("{}", v); }

/// `text` with every directory prefix in front of the file name `name` removed ("scenarios/ci/x.yaml:21:3: ..." and
/// "/tmp/ci/x.yaml:21:3: ..." both become "x.yaml:21:3: ..."), so that an error golden holds no path: replay gives
/// the same verdict from any working directory and for any spelling of the folder.
std::string without_directories(std::string text, const std::string& name) {
  if (name.empty()) return text;
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    if (at == 0 || text[at - 1] != '/') continue;
    size_t start = at;
    while (start > 0 && !std::isspace(static_cast<unsigned char>(text[start - 1])) && text[start - 1] != '"' &&
           text[start - 1] != '\'' && text[start - 1] != '(')
      --start;
    text.erase(start, at - start);
    at = start;
  }
  return text;
}

/// `message` without its leading location "<name>:<line>[:<column>]: " (the scenario file's own name), so that a
/// golden written by --update still matches when the file is renamed or copied; other messages unchanged.
std::string without_location(const std::string& message, const std::string& name) {
  if (name.empty() || message.rfind(name + ":", 0) != 0) return message;
  size_t at = name.size();
  for (int field = 0; field < 2 && at < message.size() && message[at] == ':'; ++field) {
    size_t end = at + 1;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    if (end == at + 1) break;  // not a number: no (further) position field
    at = end;
  }
  return message.compare(at, 2, ": ") == 0 ? message.substr(at + 2) : message;
}

/// Replays one scenario file against its expect: block. With `record_all` (replay --update) a file without an
/// expect: block also runs verify and simulate (each where the scenario can run it), so that the block --update
/// writes holds every golden, not only validation's.
/// The expect: block of `o.path`; std::nullopt, with `o` failed as unreadable, when the file is not YAML or its
/// block is broken (that case fails, the others still run).
std::optional<ExpectSpec> read_expect(Outcome& o, const std::string& file_name) {
  try {
    return load_expect(o.path);
  } catch (const InputError& e) {
    o.status = "FAIL";
    o.unreadable = true;
    o.failures.push_back("not a readable scenario: " + without_directories(e.what(), file_name));
    o.digest = "unreadable:" + o.failures.back();
    return std::nullopt;
  }
}

Outcome replay_one(const std::string& path, int threads, bool record_all = false) {
  Outcome o;
  o.path = path;
  if (is_calibration_file(path)) {  // kept next to the scenarios that include it: not a scenario to replay
    o.status = "skipped";
    o.calibration_file = true;
    o.failures.push_back("a calibration file of 'hcpsim calibrate' (source: and gpu:), not a scenario");
    o.digest = "calibration file";
    return o;
  }
  const std::string file_name = std::filesystem::path(path).filename().string();
  const std::optional<ExpectSpec> read = read_expect(o, file_name);
  if (!read) return o;
  const ExpectSpec& expect = *read;
  Scenario s;
  bool valid = false;
  try {
    s = load_scenario(path);
    validate_scenario(s, ValidationScope::placement);
    valid = true;
  } catch (const InputError& e) {
    o.validate_exit_code = kExitBadInput;
    o.validate_error = without_directories(e.what(), file_name);
  }
  o.digest = fmt::format("validate:{}:{}", o.validate_exit_code, o.validate_error);
  auto fail = [&](const std::string& what) {
    o.status = "FAIL";
    o.failures.push_back(what);
  };
  const int want_exit = expect.validate_exit_code.value_or(0);
  if (o.validate_exit_code != want_exit)
    fail(fmt::format("expect.validate.exit_code: golden {}, actual {}{}", want_exit, o.validate_exit_code,
                     o.validate_error.empty() ? "" : " (" + o.validate_error + ")"));
  if (expect.validate_error &&
      o.validate_error.find(without_directories(*expect.validate_error, file_name)) == std::string::npos)
    fail(fmt::format("expect.validate.error: golden \"{}\" not in actual \"{}\"", *expect.validate_error,
                     o.validate_error));
  if (!expect.present && o.status == "pass") {
    // Nothing but "it validates" was checked: not a pass a CI report should count.
    o.status = "skipped";
    o.failures.push_back("no expect: block, so only validation was checked ('hcpsim replay --update' writes one)");
  }
  if (!valid) return o;
  const bool all = record_all && !expect.present;
  if (all) {
    // A new golden block: each run the scenario allows (an oracle the scenario cannot run writes no verify golden).
    try {
      o.verify = replay_verify(s, threads);
      o.ran_verify = true;
      o.digest += "|verify:" + o.verify.digest;
    } catch (const InputError& e) {
      o.failures.push_back(fmt::format("no verify golden: {}", e.what()));
    }
    try {
      o.simulate = replay_simulate(s);
      o.ran_simulate = true;
      o.digest += "|simulate:" + o.simulate.digest;
    } catch (const InputError& e) {
      o.failures.push_back(fmt::format("no simulate golden: {}", e.what()));
    }
    return o;
  }
  if (expect.verify_result || !expect.verify_max_rel_l2.empty()) {
    o.ran_verify = true;
    o.verify = replay_verify(s, threads);
    o.digest += "|verify:" + o.verify.digest;
    const std::string& actual = o.verify.result;
    if (expect.verify_result && *expect.verify_result != actual)
      fail(fmt::format("expect.verify.result: golden {}, actual {}", *expect.verify_result, actual));
    for (const auto& [name, bound] : expect.verify_max_rel_l2) {
      auto it = o.verify.rel_l2.find(name);
      const double got = it == o.verify.rel_l2.end() ? NAN : it->second;
      if (std::isnan(bound)) {  // golden .nan: the tensor must have non-finite entries
        if (!std::isnan(got)) fail(fmt::format("expect.verify.max_rel_l2.{}: golden .nan (non-finite), actual {}", name, g17(got)));
      } else if (!(got <= bound)) fail(fmt::format("expect.verify.max_rel_l2.{}: golden <= {}, actual {}", name, g17(bound), g17(got)));
    }
  }
  if (!expect.simulate.empty()) {
    o.ran_simulate = true;
    o.simulate = replay_simulate(s);
    o.digest += "|simulate:" + o.simulate.digest;
    for (const auto& [name, golden] : expect.simulate) {
      auto it = o.simulate.values.find(name);
      if (it == o.simulate.values.end()) {
        std::string known;
        for (const auto& f : replay_simulate_fields()) known += (known.empty() ? "" : ", ") + f;
        throw InputError(s.loc("expect.simulate." + name), "expect.simulate." + name, "unknown simulate field",
                         "use one of: " + known);
      }
      if (it->second != golden)
        fail(fmt::format("expect.simulate.{}: golden {}, actual {}", name, golden, it->second));
    }
  }
  return o;
}

/// Upper bound written by --update for a measured relative error: twice the value, rounded up to two
/// significant digits (deterministic runs reproduce the value; the margin absorbs x86-level differences).
double bound_for(double err) {
  if (!(err > 0)) return 1e-300;
  const double e = std::floor(std::log10(err * 2.0));
  const double scale = std::pow(10.0, e - 1);
  return std::ceil(err * 2.0 / scale) * scale;
}

/// The `expect:` block text for the actual results, in canonical form.
std::string expect_block(const Outcome& o, const ExpectSpec& old) {
  std::string b = "expect:\n";
  if (o.validate_exit_code != 0) {
    const std::string name = std::filesystem::path(o.path).filename().string();
    // The old golden where it still holds (the user's choice of substring), else the message from its key on.
    std::string err = old.validate_error ? without_directories(*old.validate_error, name) : std::string();
    if (err.empty() || o.validate_error.find(err) == std::string::npos) err = without_location(o.validate_error, name);
    b += fmt::format("  validate: {{exit_code: {}, error: {}}}\n", o.validate_exit_code, yaml_double_quoted(err));
    return b;
  }
  b += "  validate: {exit_code: 0}\n";
  if (o.ran_verify) {
    b += fmt::format("  verify: {{result: {}", o.verify.result);
    if (!old.verify_max_rel_l2.empty() || !old.present) {  // a new block bounds every tensor
      b += ", max_rel_l2: {";
      bool first = true;
      for (const char* t : {"out", "lse", "dq", "dk", "dv"}) {
        auto it = o.verify.rel_l2.find(t);
        if (it == o.verify.rel_l2.end()) continue;
        auto old_it = old.verify_max_rel_l2.find(t);
        const double bound = (old_it != old.verify_max_rel_l2.end() && it->second <= old_it->second)
                                 ? old_it->second
                                 : bound_for(it->second);
        if (std::isnan(it->second)) {  // non-finite entries: the golden says so instead of a bound
          b += fmt::format("{}{}: .nan", first ? "" : ", ", t);
        } else {
          b += fmt::format("{}{}: {:.3g}", first ? "" : ", ", t, bound);
        }
        first = false;
      }
      b += "}";
    }
    b += "}\n";
  }
  if (o.ran_simulate) {
    b += "  simulate:\n";
    for (const auto& [name, value] : o.simulate.values)
      if (old.simulate.count(name) || !old.present) b += fmt::format("    {}: {}\n", name, value);
  }
  return b;
}

/// Where a line's trailing comment starts (a '#' after a blank, outside double quotes), or npos.
size_t trailing_comment_at(const std::string& line) {
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && quoted) {
      ++i;
    } else if (line[i] == '"') {
      quoted = !quoted;
    } else if (line[i] == '#' && !quoted && i > 0 && (line[i - 1] == ' ' || line[i - 1] == '\t')) {
      return i;
    }
  }
  return std::string::npos;
}

/// A key line's identity: its indentation and key ("    step_s"); "" for a comment or blank line.
std::string key_of_line(const std::string& line) {
  const size_t b = line.find_first_not_of(' ');
  if (b == std::string::npos || line[b] == '#') return "";
  const size_t colon = line.find(':', b);
  return colon == std::string::npos ? "" : line.substr(0, colon);
}

/// `fresh` (a regenerated expect block) with the comments of `old` (the block it replaces) kept: the comment
/// lines before a key go before the same key again, a key's trailing comment follows its new value, and comment
/// lines after the last key stay at the end. Comments of keys that are gone are dropped.
std::string keep_expect_comments(const std::string& old, const std::string& fresh) {
  std::map<std::string, std::vector<std::string>> before;  // key -> comment lines above it
  std::map<std::string, std::string> trailing;             // key -> " # ..." after its value
  std::vector<std::string> pending;
  std::istringstream in(old);
  for (std::string line; std::getline(in, line);) {
    const std::string key = key_of_line(line);
    if (key.empty()) {
      if (line.find_first_not_of(' ') != std::string::npos) pending.push_back(line);
      continue;
    }
    before[key] = std::move(pending);
    pending.clear();
    const size_t at = trailing_comment_at(line);
    if (at != std::string::npos) {
      size_t from = at;
      while (from > 0 && (line[from - 1] == ' ' || line[from - 1] == '\t')) --from;
      trailing[key] = line.substr(from);
    }
  }
  std::string out;
  std::istringstream fin(fresh);
  for (std::string line; std::getline(fin, line);) {
    const std::string key = key_of_line(line);
    if (const auto it = before.find(key); it != before.end())
      for (const auto& c : it->second) out += c + "\n";
    out += line;
    if (const auto it = trailing.find(key); it != trailing.end()) out += it->second;
    out += "\n";
  }
  for (const auto& c : pending) out += c + "\n";
  return out;
}

/// Rewrites the expect block of `path` (the last top-level key) when its values changed, keeping its comments
/// (keep_expect_comments). @return true if written.
bool update_file(const Outcome& o) {
  // Every golden holds, or not a scenario (a calibration file, or a file that cannot be read: it stays a failure,
  // and the other scenarios still run): untouched.
  if (o.status == "pass" || o.calibration_file || o.unreadable) return false;
  const ExpectSpec old = load_expect(o.path);
  std::ifstream in(o.path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  size_t pos = text.rfind("\nexpect:");
  pos = (text.rfind("expect:", 0) == 0) ? 0 : (pos == std::string::npos ? text.size() : pos + 1);
  std::string head = text.substr(0, pos);
  if (!head.empty() && head.back() != '\n') head.push_back('\n');
  const std::string out = head + keep_expect_comments(text.substr(pos), expect_block(o, old));
  rewrite_input_file(o.path, out, "scenario with updated goldens", "--update");
  return true;
}

int cmd_replay(const std::vector<std::string>& paths, const std::string& junit, bool update, bool twice,
               int threads) {
  check_thread_count(threads, "--threads");
  const auto files = collect(paths);
  check_requested_outputs({{junit, "--junit", "JUnit file"}});
  for (const std::string& f : files) {  // the scenarios are read later, one by one: compare with each now
    std::error_code ec;
    if (!junit.empty() && std::filesystem::equivalent(junit, f, ec) && !ec)
      throw InputError(SourceLoc{junit, 0, 0, ""}, "--junit",
                       "will not write the JUnit report to '" + junit + "': it is the scenario '" + f +
                           "' this replay reads",
                       "write the report outside the replayed scenarios");
  }
  if (!junit.empty() && fs::path(junit).extension() == ".yaml") {  // the next replay would read it as a scenario
    std::error_code ec;
    const fs::path report = fs::weakly_canonical(fs::absolute(junit, ec), ec);
    for (const auto& p : paths) {
      if (!fs::is_directory(p, ec)) continue;
      const fs::path dir = fs::weakly_canonical(fs::absolute(p, ec), ec);
      const auto [end, rest] = std::mismatch(dir.begin(), dir.end(), report.begin(), report.end());
      if (end == dir.end())
        throw InputError(SourceLoc{junit, 0, 0, ""}, "--junit",
                         "will not write the JUnit report to '" + junit + "': a .yaml file in the replayed folder '" +
                             p + "', which the next replay would read as a scenario",
                         "write it outside the folder, or name it .xml");
    }
  }
  if (files.empty()) throw InputError(SourceLoc{}, "", "no *.yaml scenario files found", "give a folder of scenarios");
  // JUnit's time and timestamp are the only clock readings in any output (the format requires them); the
  // timestamp is read first so that a malformed SOURCE_DATE_EPOCH fails before anything runs.
  using Clock = std::chrono::steady_clock;
  const auto elapsed = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  const auto run_start = Clock::now();
  const JUnitRun run_info{junit.empty() ? std::string() : junit_timestamp(),
                          junit.empty() ? std::string() : junit_hostname(), 0.0};
  std::vector<Outcome> outcomes;
  int n_fail = 0, n_updated = 0;
  ProgressReporter progress("replay", files.size(), progress_settings());
  progress.announce(
      fmt::format("{} scenario{}{}", files.size(), files.size() == 1 ? "" : "s", twice ? ", each run twice" : ""), 0);
  for (const auto& f : files) {
    const auto case_start = Clock::now();
    Outcome o = replay_one(f, threads, update);
    if (twice) {
      // Second run with a different thread count: every output digest must be identical.
      const Outcome again = replay_one(f, threads == 1 ? 2 : 1, update);
      if (again.digest != o.digest) {
        o.status = "FAIL";
        o.failures.push_back("determinism: the second run (other thread count) produced different outputs");
      }
    }
    if (update && update_file(o)) {
      ++n_updated;
      fmt::print("updated {}{}\n", f,
                 o.validate_exit_code != 0
                     ? fmt::format(" (it does not validate: the golden records the error, exit {})", o.validate_exit_code)
                     : "");
      o = replay_one(f, threads);
    }
    o.seconds = elapsed(case_start);
    fmt::print("{:<7} {}{}\n", o.status, f, o.failures.empty() ? "" : "");
    for (const auto& msg : o.failures) fmt::print("        {}\n", msg);
    n_fail += o.status == "FAIL";
    outcomes.push_back(std::move(o));
    progress.update(outcomes.size());
  }
  progress.finish();
  if (!junit.empty()) {
    std::vector<JUnitCase> cases;
    for (const auto& o : outcomes) cases.push_back(JUnitCase{o.path, o.status, o.failures, o.seconds});
    JUnitRun run = run_info;
    run.seconds = elapsed(run_start);
    write_junit(junit, cases, run);
  }
  const auto n_skipped = std::count_if(outcomes.begin(), outcomes.end(), [](const Outcome& o) { return o.status == "skipped"; });
  const auto n_calibration =
      std::count_if(outcomes.begin(), outcomes.end(), [](const Outcome& o) { return o.calibration_file; });
  const std::string why = n_calibration == 0           ? "no expect: block"
                          : n_calibration == n_skipped ? "calibration files"
                                                       : fmt::format("{} calibration files, the others no expect: block",
                                                                     n_calibration);
  fmt::print("replay: {} scenario{}, {} passed, {} failed{}{}\n", outcomes.size(), outcomes.size() == 1 ? "" : "s",
             outcomes.size() - static_cast<size_t>(n_fail) - static_cast<size_t>(n_skipped), n_fail,
             n_skipped > 0 ? fmt::format(", {} skipped ({})", n_skipped, why) : "",
             update ? fmt::format(", {} updated", n_updated) : "");
  // An unreadable file is bad input (exit 2), after every other scenario ran and the report was written.
  if (std::any_of(outcomes.begin(), outcomes.end(), [](const Outcome& o) { return o.unreadable; }))
    return kExitBadInput;
  return n_fail == 0 ? kExitOk : kExitFailed;
}

}  // namespace

CLI::App* add_replay_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("replay", "replay scenario files against their expect: goldens (for CI)");
  auto paths = std::make_shared<std::vector<std::string>>();
  auto junit = std::make_shared<std::string>();
  auto update = std::make_shared<bool>(false);
  auto twice = std::make_shared<bool>(false);
  auto threads = std::make_shared<int>(2);
  cmd->add_option("paths", *paths, "scenario files or folders (searched recursively for *.yaml)")->required();
  cmd->add_option("--junit", *junit, "write a JUnit XML report");
  cmd->add_flag("--update", *update, "rewrite the expect: blocks whose goldens no longer hold");
  cmd->add_flag("--twice", *twice, "run each scenario twice (other thread count) and compare output digests");
  cmd->add_option("--threads", *threads, "CPU threads for the oracle")->capture_default_str();
  add_quiet_flag(cmd);
  cmd->callback([&exit_code, paths, junit, update, twice, threads] {
    exit_code = cmd_replay(*paths, *junit, *update, *twice, *threads);
  });
  return cmd;
}

}  // namespace hcpsim::app
