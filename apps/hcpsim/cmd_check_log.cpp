// hcpsim check-log LOG [--scenario S | --gpu NAME]: what a Megatron training log says about hierarchical context
// parallelism, throughput and NaN iterations. Exit 0 clean, 1 findings (each quoted with file:line), 2 unreadable
// input.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "app_common.hpp"
#include "hcpsim/core/input_file.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/interop/megatron_log.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/step/training_step.hpp"
#include "report/check_log_json.hpp"

namespace hcpsim::app {

/// The whole-step model's model TFLOP/s per GPU in Megatron's two FLOP conventions (training_model.hpp).
struct ModelPrediction {
  double causal = 0;          ///< FlopsConvention::megatron_causal
  double full_attention = 0;  ///< FlopsConvention::megatron_full_attention
};

/// Model TFLOP/s per GPU that the whole-step model (sim/step.hpp) predicts for `scenario` (a per-layer
/// cp_comm_type list as its mix, compose_mixed_step), in both Megatron FLOP conventions: the quantity Megatron's `throughput per GPU (TFLOP/s/GPU)` reports (model FLOPs per iteration /
/// iteration time / world size). std::nullopt when the scenario has no model.vocab_size or does not validate for its
/// cluster (check-log then reports the comparison as not checked, with that reason).
std::optional<ModelPrediction> predicted_model_tflops_per_gpu(const Scenario& scenario) {
  if (!scenario.model.vocab_size) return std::nullopt;
  try {
    const ValidationReport report = validate_scenario(scenario, ValidationScope::placement);
    const Topology topology = Topology::from_cluster(scenario.cluster);
    // A per-layer cp_comm_type list runs each layer with its own type (it was predicted as all-first-type).
    std::vector<sim::StepResult> per_type;
    for (CpCommType t : scenario.parallel.distinct_cp_comm_types())
      per_type.push_back(sim::simulate_step(scenario, t, report.data_parallel_size, topology));
    const sim::StepResult step =
        per_type.size() > 1 ? sim::compose_mixed_step(scenario, per_type) : std::move(per_type.front());
    return ModelPrediction{step.model_tflops_per_gpu, step.model_tflops_per_gpu_full_attention};
  } catch (const InputError&) {
    return std::nullopt;
  }
}

/// Which Megatron FLOP convention wrote the log's throughput: for the first iteration line with an elapsed time,
/// the model FLOPs of `scenario` in each convention (at the line's global batch size) divided by elapsed time and
/// world size must give the reported TFLOP/s within 2% (Megatron computes it exactly so; the tolerance covers the
/// one decimal printed and a vocabulary padded differently). std::nullopt when neither matches.
std::optional<FlopsConvention> log_convention(const MegatronLog& log, const Scenario& scenario, int64_t world) {
  if (!scenario.model.vocab_size || world < 1) return std::nullopt;
  for (const auto& t : log.throughput) {
    if (!t.elapsed_ms) continue;
    const int64_t gbs = t.global_batch_size.value_or(scenario.model.global_batch_size.value_or(0));
    if (gbs < 1) return std::nullopt;
    for (FlopsConvention c : {FlopsConvention::megatron_causal, FlopsConvention::megatron_full_attention}) {
      const double implied = megatron_model_flops(scenario, gbs, c) / (*t.elapsed_ms * 1e-3 * static_cast<double>(world)) / 1e12;
      if (std::fabs(implied / t.tflops_per_gpu - 1) < 0.02) return c;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

namespace {

struct CheckLogOptions {
  std::string log_path;
  std::string scenario_path;
  std::string gpu;
  std::string json;  ///< --json FILE; empty: none
};

std::string read_bytes(const std::string& path) {
  return read_input_file({path, "log file", kMaxLogBytes, false, "check the path"});
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(l);
  }
  return lines;
}

/// The log line, trimmed, at most 160 characters, for quoting as evidence.
std::string quote(const std::vector<std::string>& lines, int line) {
  if (line < 1 || static_cast<size_t>(line) > lines.size()) return "";
  std::string s = lines[static_cast<size_t>(line) - 1];
  const auto b = s.find_first_not_of(" \t");
  s = b == std::string::npos ? "" : s.substr(b);
  constexpr size_t kMaxQuote = 160;  // one terminal line and a half; the line number points at the rest
  if (s.size() > kMaxQuote) s = s.substr(0, kMaxQuote) + " ...";
  return s;
}

const MegatronArg* arg_named(const MegatronLog& log, const std::string& name) {
  const MegatronArg* found = nullptr;
  for (const auto& a : log.arguments)
    if (a.name == name || a.flag == name) found = &a;
  return found;
}

/// The GPU whose peak the log's throughput is held against, and where it came from.
struct GpuChoice {
  std::optional<Scenario> given;          ///< the --scenario, when given
  GpuPeak peak;
  std::string preset_name = "dgx-h100";   ///< cluster preset of the scenario written from the arguments
  /// A GPU without a preset (datasheet_gpu): its peak is known, but the whole-step model has no cluster for it.
  std::optional<DatasheetGpu> datasheet;
};

/// The peak of a GPU known by its datasheet only, and the preset of its family for the arguments' placement rules.
void choose_datasheet_gpu(GpuChoice& choice, const DatasheetGpu& d, const std::string& where) {
  choice.datasheet = d;
  choice.preset_name = d.family;
  choice.peak.tflops = d.tflops;
  choice.peak.fp8_tflops = d.fp8_tflops;
  choice.peak.source = d.name + " (" + d.source + "), " + where;
}

/// The dense BF16 and FP8 peaks of `g` (TFLOP/s), with where they came from.
GpuPeak peak_of(const GpuSpec& g, std::string source) {
  GpuPeak peak;
  peak.tflops = g.peak_bf16_flops_per_s / 1e12;
  peak.fp8_tflops = g.peak_fp8_flops_per_s / 1e12;
  peak.source = std::move(source);
  return peak;
}

/// GPU peak: --scenario, else --gpu, else a GPU the log names, else the stated H100/H200-class assumption.
GpuChoice choose_gpu(const CheckLogOptions& o, const MegatronLog& log) {
  GpuChoice choice;
  GpuPeak& peak = choice.peak;
  if (!o.scenario_path.empty()) {
    choice.given = load_scenario(o.scenario_path);
    peak = peak_of(choice.given->cluster.gpu, choice.given->cluster.gpu.name + ", from --scenario " + o.scenario_path);
    if (!choice.given->cluster.preset.empty()) choice.preset_name = choice.given->cluster.preset;
  } else if (!o.gpu.empty()) {
    const auto p = preset_of_gpu_name(o.gpu);
    if (const auto d = datasheet_gpu(o.gpu); !p && d) {
      choose_datasheet_gpu(choice, *d, "from --gpu " + o.gpu);
      return choice;
    }
    if (!p) {
      std::string names;
      for (const auto& n : cluster_preset_names()) names += ", " + n;
      throw InputError(SourceLoc{}, "--gpu", "unknown GPU '" + o.gpu + "'",
                       "use H100, H200, A100, B200" + names + ", or H100 PCIe, H100 NVL, H200 NVL, A100 PCIe, GH200, H800, H20, A800, L40S");
    }
    choice.preset_name = *p;
    const auto c = cluster_preset(*p, 1);
    peak = peak_of(c->gpu, c->gpu.name + ", from --gpu " + o.gpu);
  } else if (const auto d = log.gpu_name ? datasheet_gpu(*log.gpu_name) : std::nullopt) {
    choose_datasheet_gpu(choice, *d, "named by the log at " + o.log_path + ":" + std::to_string(log.gpu_line));
  } else if (log.gpu_name) {
    choice.preset_name = *preset_of_gpu_name(*log.gpu_name);
    const auto c = cluster_preset(choice.preset_name, 1);
    peak = peak_of(c->gpu, c->gpu.name + ", named by the log at " + o.log_path + ":" + std::to_string(log.gpu_line));
  } else {
    const auto c = cluster_preset("dgx-h100", 1);
    peak = peak_of(c->gpu, "assumed H100/H200-class: no --scenario, --gpu or GPU name in the log");
    peak.assumed = true;
  }
  return choice;
}

/// The log's arguments block as a Megatron configuration; an argument the importer rejects becomes a finding at
/// its line (or the block's first line) and gives std::nullopt.
std::optional<MegatronConfig> interpret_log_arguments(const MegatronLog& log, const std::string& log_path,
                                                      std::vector<LogFinding>& findings) {
  if (log.arguments.empty()) return std::nullopt;
  try {
    return interpret_megatron_args(log.arguments, log_path, true);
  } catch (const InputError& e) {
    const MegatronArg* a = arg_named(log, e.key());
    findings.push_back({a ? a->line : log.arguments_begin_line,
                        "arguments: " + e.key() + ": " + e.problem() + "; fix: " + e.fix()});
  }
  return std::nullopt;
}

/// The scenario that the log's arguments describe, and the warnings of its validation.
struct ArgumentsScenario {
  std::optional<Scenario> scenario;   ///< std::nullopt when it fails to load or validate
  std::vector<std::string> warnings;
};

/// (c) the arguments through the scenario loader and validate_scenario, on the chosen GPU's preset. A failure is a
/// finding at the argument's line, unless an earlier finding already points at that line.
ArgumentsScenario scenario_of_arguments(const MegatronConfig& args, const MegatronLog& log, const std::string& file,
                                        const std::string& preset_name, std::vector<LogFinding>& findings) {
  ArgumentsScenario out;
  const size_t before = findings.size();
  const auto cluster = cluster_preset(preset_name, 1);
  try {
    ScenarioWriteOptions wo;
    wo.cluster_preset = preset_name;
    wo.gpus_per_node = cluster->gpus_per_node;
    wo.generator = "hcpsim check-log";
    Scenario s = load_scenario_text(scenario_yaml_of(args, wo), file + " (arguments)");
    out.warnings = validate_scenario(s, ValidationScope::placement).warnings;
    // The whole-step model needs the vocabulary when --vocab-size is not an argument.
    if (!s.model.vocab_size) s.model.vocab_size = log.padded_vocab_size;
    out.scenario = std::move(s);
  } catch (const InputError& e) {
    const int line = args.loc_of_scenario_key(e.key()).line;
    const bool seen = std::any_of(findings.begin(), findings.begin() + static_cast<std::ptrdiff_t>(before),
                                  [&](const LogFinding& f) { return line > 0 && f.line == line; });
    if (!seen)
      findings.push_back({line, "the arguments fail validation: " + e.key() + ": " + e.problem() + "; fix: " +
                                    e.fix()});
  }
  return out;
}

/// Throughput versus the whole-step model of `model_scenario` (the --scenario, else the arguments' scenario):
/// the comparison (its summary is the printed line), and a finding when the log reports more than the model allows.
ModelComparison compare_with_model(const MegatronLog& log, const Scenario* model_scenario,
                                   const std::optional<Scenario>& from_args, std::vector<LogFinding>& findings) {
  ModelComparison out;
  if (!model_scenario) {
    out.summary = "not checked (no scenario: give --scenario, or a log whose arguments validate)";
    return out;
  }
  const auto predicted = predicted_model_tflops_per_gpu(*model_scenario);
  if (!predicted) {
    out.summary = model_scenario->model.vocab_size
                      ? "not checked (the configuration does not validate on its cluster)"
                      : "not checked (the vocabulary size is unknown: neither the arguments nor a 'padded vocab' "
                        "line give it; pass --scenario with model.vocab_size)";
    return out;
  }
  const int64_t world = log.world ? log.world->world_size : 0;
  const auto convention = log_convention(log, from_args ? *from_args : *model_scenario, world);
  // In the log's own convention when its iteration times identify it; else the larger (full attention), so a
  // reported value far above it is implausible in either.
  const double value = convention == FlopsConvention::megatron_causal ? predicted->causal : predicted->full_attention;
  const std::string which =
      convention ? fmt::format("{} convention, identified from the log's iteration times", to_string(*convention))
                 : std::string("megatron_full_attention convention, the larger: the log's iteration times do not "
                               "identify its convention");
  if (log.throughput.empty()) {  // a prediction, but nothing reported to hold against it
    out.predicted_tflops_per_gpu = value;
    out.convention = to_string(convention.value_or(FlopsConvention::megatron_full_attention));
    out.convention_identified = convention.has_value();
    out.summary = fmt::format("not checked (predicted {:.1f} TFLOP/s per GPU, {}; the log reports no throughput)",
                              value, which);
    return out;
  }
  const auto f = check_throughput_vs_model(log, value);
  const auto low = check_throughput_below_model(log, value);
  for (const auto& x : f) findings.push_back(x);
  for (const auto& x : low) findings.push_back(x);
  out.status = !f.empty() ? "exceeded" : !low.empty() ? "far_below" : "consistent";
  out.predicted_tflops_per_gpu = value;
  out.convention = to_string(convention.value_or(FlopsConvention::megatron_full_attention));
  out.convention_identified = convention.has_value();
  out.summary = fmt::format("predicted {:.1f} TFLOP/s per GPU ({}); {} (limits: median at least {:.2g}x, every "
                            "iteration at most {:.2g}x)",
                            value, which, !f.empty() ? "exceeded" : !low.empty() ? "far below" : "consistent",
                            kThroughputModelLowFactor, kThroughputModelFactor);
  return out;
}

/// What the log states: its world-size line, its arguments block and its throughput reports.
void print_log_facts(const std::string& file, const MegatronLog& log, const std::optional<MegatronConfig>& args) {
  fmt::print("check-log {}\n", file);
  if (log.world) {
    const auto& w = *log.world;
    fmt::print("  world-size line {}:{}: world {}, data-parallel {}, context-parallel {}, hierarchical sizes {}, "
               "tensor-model-parallel {}, pipeline-model-parallel {}\n",
               file, w.line, w.world_size, w.data_parallel_size,
               w.context_parallel_size ? std::to_string(*w.context_parallel_size) : "not reported",
               !w.reports_hierarchical ? "not reported" : w.hierarchical_sizes ? join(*w.hierarchical_sizes) : "None",
               w.tensor_model_parallel_size, w.pipeline_model_parallel_size);
  } else {
    fmt::print("  world-size line: none\n");
  }
  if (log.arguments_begin_line > 0) {
    fmt::print("  arguments {}:{}-{}: {} arguments", file, log.arguments_begin_line, log.arguments_end_line,
               log.arguments.size());
    if (args) {
      std::string types;
      for (const auto& t : args->cp_comm_type) types += (types.empty() ? "" : ",") + t;
      fmt::print("; cp_comm_type {}, context_parallel_size {}, hierarchical_context_parallel_sizes {}", types,
                 args->context_parallel_size,
                 args->hierarchical_context_parallel_sizes ? join(*args->hierarchical_context_parallel_sizes)
                                                           : "None");
    }
    fmt::print("\n");
  } else {
    fmt::print("  arguments: no arguments block (validation not run)\n");
  }
  for (const ThroughputReport& r : log.resumed_at)
    fmt::print("  resumed run: iteration {} at {}:{} does not follow the iteration before it: a run resumed from a "
               "checkpoint appended to this log without its own arguments; each iteration counts once, its latest "
               "report\n",
               r.iteration, file, r.line);
  if (log.throughput.empty()) {
    fmt::print("  throughput: no iteration reports 'throughput per GPU (TFLOP/s/GPU)' ({})\n",
               log.iteration_lines == 0 ? "the log has no iteration lines" : "run with --log-throughput");
  } else {
    const auto mx = std::max_element(log.throughput.begin(), log.throughput.end(),
                                     [](const auto& a, const auto& b) { return a.tflops_per_gpu < b.tflops_per_gpu; });
    fmt::print("  throughput: {} iterations report TFLOP/s per GPU, max {:.1f} ({}:{})\n", log.throughput.size(),
               mx->tflops_per_gpu, file, mx->line);
  }
}

/// The warnings, then each finding with its file:line and the quoted line; the exit code (0 clean, 1 findings).
int print_findings(const std::string& file, const std::vector<std::string>& lines,
                   const std::vector<std::string>& warnings, const std::vector<LogFinding>& findings) {
  for (const auto& w : warnings) fmt::print("warning: {}\n", w);
  for (const auto& f : findings) {
    if (f.line > 0) {
      fmt::print("{}:{}: {}\n", file, f.line, f.message);
      fmt::print("    | {}\n", quote(lines, f.line));
    } else {
      fmt::print("{}: {}\n", file, f.message);
    }
  }
  if (findings.empty()) {
    fmt::print("result: clean\n");
    return kExitOk;
  }
  fmt::print("result: {} finding{}\n", findings.size(), findings.size() == 1 ? "" : "s");
  return kExitFailed;
}

/// The sizes in which the --scenario differs from the log's arguments and world-size line, as "name: scenario X,
/// log Y" items (empty when they agree or the log states none of them).
std::vector<std::string> scenario_differences(const Scenario& s, const std::optional<MegatronConfig>& args,
                                              const MegatronLog& log) {
  std::vector<std::string> out;
  auto differ = [&](const char* name, int64_t scenario, std::optional<int64_t> logged) {
    if (logged && *logged != scenario) out.push_back(fmt::format("{} {} (log {})", name, scenario, *logged));
  };
  if (args) {
    differ("tensor_model_parallel_size", s.parallel.tensor_model_parallel_size, args->tensor_model_parallel_size);
    differ("context_parallel_size", s.parallel.context_parallel_size, args->context_parallel_size);
    differ("pipeline_model_parallel_size", s.parallel.pipeline_model_parallel_size, args->pipeline_model_parallel_size);
    differ("seq_length", s.model.seq_length, args->seq_length);
    differ("num_attention_heads", s.model.num_attention_heads, args->num_attention_heads);
    differ("num_query_groups", s.model.num_query_groups, args->num_query_groups);
    if (args->num_layers) differ("num_layers", s.model.num_layers, args->num_layers);
    // The widths the FLOP model reads (hidden_size resolved as validation does: heads x kv_channels by default).
    differ("hidden_size", s.model.hidden_size.value_or(s.model.num_attention_heads * s.model.kv_channels),
           args->hidden_size);
    if (s.model.ffn_hidden_size) differ("ffn_hidden_size", *s.model.ffn_hidden_size, args->ffn_hidden_size);
  } else if (log.world) {
    differ("tensor_model_parallel_size", s.parallel.tensor_model_parallel_size, log.world->tensor_model_parallel_size);
    differ("context_parallel_size", s.parallel.context_parallel_size, log.world->context_parallel_size);
  }
  // The scenario's world: TP·CP·PP·DP with an explicit DP, else the cluster it fills (validation's default DP).
  if (log.world)
    differ("world size",
           s.parallel.data_parallel_size
               ? *s.parallel.data_parallel_size * s.parallel.tensor_model_parallel_size *
                     s.parallel.context_parallel_size * s.parallel.pipeline_model_parallel_size
               : s.cluster.world_size(),
           log.world->world_size);
  return out;
}

/// One run's checks: (a) hierarchical CP as configured versus as reported, (b) throughput versus the GPU's peak,
/// (c) the arguments against the validation rules, (d) throughput versus the whole-step model, (e) NaN or Inf in
/// the iteration lines. @throws InputError for a --scenario or --gpu that cannot be used.
struct RunCheck {
  MegatronLog log;
  LogRunRange lines;
  GpuChoice gpu;
  std::optional<MegatronConfig> args;
  ArgumentsScenario from_args;
  ModelComparison model;
  std::vector<LogFinding> findings;  ///< in line order
  std::optional<Provenance> provenance;
};

RunCheck check_run(const CheckLogOptions& o, MegatronLog log, const LogRunRange& lines) {
  RunCheck c;
  c.log = std::move(log);
  c.lines = lines;
  c.gpu = choose_gpu(o, c.log);
  const std::string& file = o.log_path;
  c.args = interpret_log_arguments(c.log, o.log_path, c.findings);
  for (auto& f : check_hierarchical_cp(c.log, c.args)) c.findings.push_back(std::move(f));
  for (auto& f : check_throughput_peak(c.log, c.gpu.peak, c.args && c.args->fp8)) c.findings.push_back(std::move(f));
  if (c.args) c.from_args = scenario_of_arguments(*c.args, c.log, file, c.gpu.preset_name, c.findings);
  const Scenario* model_scenario =
      c.gpu.given ? &*c.gpu.given : c.from_args.scenario ? &*c.from_args.scenario : nullptr;
  if (c.gpu.given) {  // a --scenario of another configuration predicts another run's throughput
    const auto diff = scenario_differences(*c.gpu.given, c.args, c.log);
    if (!diff.empty()) {
      std::string list;
      for (const auto& d : diff) list += (list.empty() ? "" : ", ") + d;
      c.from_args.warnings.push_back("--scenario " + o.scenario_path + " is not the logged configuration: " + list +
                                     "; the GPU peak and the model comparison are for the scenario");
    }
  }
  if (c.gpu.datasheet) {  // the preset's GPU would predict another GPU's throughput
    model_scenario = nullptr;
    c.model.summary = "not checked (no cluster preset for the " + c.gpu.datasheet->name +
                      ": give --scenario with its cluster.gpu)";
  } else if (!c.gpu.given && c.args && !c.args->unmodelled.empty()) {
    // MoE, MLA, ... (import refuses them): the dense model of the arguments would predict another run.
    std::string list;
    for (const auto& u : c.args->unmodelled) list += (list.empty() ? "" : ", ") + u;
    model_scenario = nullptr;
    c.model.summary = "not checked (the arguments use settings hcpsim does not model: " + list +
                      "; the dense model of the rest would predict another run)";
  } else {
    c.model = compare_with_model(c.log, model_scenario, c.from_args.scenario, c.findings);
  }
  for (auto& f : check_nan_iterations(c.log, c.args)) c.findings.push_back(std::move(f));
  std::stable_sort(c.findings.begin(), c.findings.end(),
                   [](const LogFinding& a, const LogFinding& b) { return a.line < b.line; });
  if (model_scenario) c.provenance = scenario_provenance(*model_scenario, {});
  return c;
}

/// The log's runs, each parsed on its own lines (a log with one run: the whole log). A run without a GPU line
/// of its own takes the one the log names first.
std::vector<RunCheck> check_runs(const CheckLogOptions& o, const std::string& bytes,
                                 const std::vector<std::string>& lines) {
  MegatronLog whole = parse_megatron_log(bytes, o.log_path);
  const std::vector<LogRunRange> ranges = megatron_log_runs(bytes);
  std::vector<RunCheck> out;
  if (ranges.size() == 1) {
    out.push_back(check_run(o, std::move(whole), ranges.front()));
    return out;
  }
  for (const LogRunRange& r : ranges) {
    std::string text;
    for (int i = r.first_line; i <= r.last_line && static_cast<size_t>(i) <= lines.size(); ++i)
      text += lines[static_cast<size_t>(i) - 1] + "\n";
    MegatronLog run = parse_megatron_log(text, o.log_path, r.first_line);
    if (!run.gpu_name && whole.gpu_name) {
      run.gpu_name = whole.gpu_name;
      run.gpu_line = whole.gpu_line;
    }
    out.push_back(check_run(o, std::move(run), r));
  }
  return out;
}

int run_check_log(const CheckLogOptions& o) {
  std::string bytes;
  std::vector<RunCheck> runs;
  std::vector<std::string> lines;
  try {
    bytes = read_bytes(o.log_path);
  } catch (const InputError& e) {
    if (!o.json.empty()) write_check_log_error_json(o.json, o.log_path, e);
    throw;
  }
  check_requested_outputs({{o.json, "--json", "check-log JSON"}});  // before the checks and their simulations
  try {
    lines = split_lines(bytes);
    runs = check_runs(o, bytes, lines);
  } catch (const InputError& e) {
    // The JSON carries the error too; it still goes to stderr with exit 2 as without --json.
    if (!o.json.empty()) write_check_log_error_json(o.json, o.log_path, e);
    throw;
  }
  const std::string& file = o.log_path;
  if (runs.size() > 1)
    fmt::print("check-log {}: {} runs in one log (a job restarted and appended to it); each run is checked against "
               "its own arguments\n", file, runs.size());
  int exit_code = kExitOk;
  size_t total = 0;
  std::vector<CheckLogReport> reports;
  for (size_t k = 0; k < runs.size(); ++k) {
    const RunCheck& c = runs[k];
    if (runs.size() > 1)
      fmt::print("== run {} of {}: lines {}-{} ==\n", k + 1, runs.size(), c.lines.first_line, c.lines.last_line);
    print_log_facts(file, c.log, c.args);
    const bool fp8 = c.args && c.args->fp8;  // check_throughput_peak holds an FP8 run to the FP8 peak
    fmt::print("  GPU peak: {:.1f} TFLOP/s dense bf16 ({}){}{}\n", c.gpu.peak.tflops, c.gpu.peak.source,
               c.gpu.peak.assumed ? " [assumption]" : "",
               !fp8 ? std::string()
               : c.gpu.peak.fp8_tflops > 0
                   ? fmt::format("; the run uses FP8, held to the dense FP8 peak {:.1f} TFLOP/s",
                                 held_peak_tflops(c.gpu.peak, fp8))
                   : std::string("; the run asks for FP8, but the GPU has no FP8 peak (no FP8 tensor cores, or "
                                 "none given for it): held to the bf16 peak"));
    fmt::print("  throughput vs. model: {}\n", c.model.summary);
    CheckLogReport report{file, &c.log, &c.args, c.gpu.peak, c.model, c.from_args.warnings, {}, c.provenance, c.lines};
    for (const auto& f : c.findings)
      report.findings.push_back({f.line, f.message, f.line > 0 ? quote(lines, f.line) : ""});
    reports.push_back(std::move(report));
    exit_code = std::max(exit_code, print_findings(file, lines, c.from_args.warnings, c.findings));
    total += c.findings.size();
  }
  if (runs.size() > 1)
    fmt::print("result: {} over {} runs\n",
               total == 0 ? std::string("clean") : fmt::format("{} finding{}", total, total == 1 ? "" : "s"),
               runs.size());
  if (!o.json.empty()) write_check_log_json(o.json, reports);
  return exit_code;
}

}  // namespace

CLI::App* add_check_log_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("check-log", "check a Megatron training log: hierarchical CP groups, throughput "
                                              "against the GPU peak, the arguments against the validation rules, "
                                              "NaN iterations");
  auto o = std::make_shared<CheckLogOptions>();
  cmd->add_option("log", o->log_path, "Megatron-LM training log (rank 0 stdout/stderr)")->required();
  auto* sc = cmd->add_option("--scenario", o->scenario_path, "scenario whose cluster.gpu gives the peak");
  auto* gpu = cmd->add_option("--gpu", o->gpu, "GPU or preset name: H100, H200, A100, B200, dgx-h100, ...");
  sc->excludes(gpu);
  cmd->add_option("--json", o->json, "also write what the log states, the model comparison and the findings as JSON");
  cmd->callback([&exit_code, o] { exit_code = run_check_log(*o); });
  return cmd;
}

}  // namespace hcpsim::app
