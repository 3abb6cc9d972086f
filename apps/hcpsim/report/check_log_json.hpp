#pragma once
/// The JSON report of `hcpsim check-log LOG --json FILE` (schema: README, "check-log --json").

#include <optional>
#include <string>
#include <vector>

#include "hcpsim/core/error.hpp"
#include "hcpsim/interop/megatron_log.hpp"
#include "hcpsim/io/provenance.hpp"

namespace hcpsim::app {

/// The log's throughput held against the whole-step model (check (d) of check-log).
struct ModelComparison {
  /// "not_checked", "consistent", "exceeded" (some iteration above kThroughputModelFactor × the prediction) or
  /// "far_below" (the median below kThroughputModelLowFactor × it).
  std::string status = "not_checked";
  std::string summary;                              ///< the text `throughput vs. model:` prints
  std::optional<double> predicted_tflops_per_gpu;   ///< model TFLOP/s per GPU in `convention`; absent: not checked
  std::string convention;                           ///< "megatron_causal" or "megatron_full_attention"; "" if none
  bool convention_identified = false;               ///< the log's iteration times identified the convention
};

/// A finding with its evidence line as printed.
struct QuotedFinding {
  int line = 0;          ///< 1-based line of the log; 0 for the file as a whole
  std::string message;
  std::string quote;     ///< the trimmed line (at most 160 characters and " ..."); "" when line is 0
};

/// Everything `check-log` states about one log, for the JSON report.
struct CheckLogReport {
  std::string log_path;                         ///< as given
  const MegatronLog* log = nullptr;             ///< the parsed log
  const std::optional<MegatronConfig>* arguments = nullptr;  ///< its arguments block, interpreted (if it parsed)
  GpuPeak peak;                                 ///< the peak held against
  ModelComparison model;
  std::vector<std::string> warnings;            ///< validation warnings of the arguments' scenario
  std::vector<QuotedFinding> findings;          ///< in line order
  /// What produced the report: the build and the scenario the model comparison used (--scenario, or the one
  /// built from the log's arguments); absent: no scenario, and the report's provenance has an empty scenario_yaml.
  std::optional<Provenance> provenance;
  /// The run's lines in the log (megatron_log_runs); the whole log when it holds one run.
  LogRunRange lines;
};

/// Writes `{"log", "result": "clean" | "findings", "exit_code": 0 | 1, "world": {...} | null, "arguments": {...} |
/// null, "throughput": {"iterations", "max_tflops_per_gpu", "max_line"}, "gpu_peak": {"tflops_per_gpu", "source",
/// "assumed"}, "model": {"status", "predicted_tflops_per_gpu", "convention", "convention_identified", "summary"},
/// "warnings": [...], "findings": [{"line", "message", "quote"}], "provenance": {...}}` (keys in this order;
/// provenance as io/provenance.hpp writes it). Written atomically. A log that holds several runs (one report per
/// run, in log order) is described by its last run, with "result", "exit_code" and "findings" over every run, and
/// "runs": [{"first_line", "last_line", "result", "world", "arguments", "throughput", "gpu_peak", "model",
/// "warnings", "findings"}] after "findings"; the provenance is the last run's.
/// @throws InputError naming `path` and --json if it cannot be written.
void write_check_log_json(const std::string& path, const std::vector<CheckLogReport>& runs);

/// Writes the report of a log that cannot be read or parsed (exit 2): `{"log", "result": "error", "exit_code": 2,
/// "error": {"message", "key", "problem", "fix"}}`. @throws InputError naming `path` and --json if it cannot be
/// written.
void write_check_log_error_json(const std::string& path, const std::string& log_path, const InputError& error);

}  // namespace hcpsim::app
