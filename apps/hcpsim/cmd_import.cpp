// hcpsim import megatron-args | bridge-config: a Megatron-LM command line or a Megatron-Bridge YAML config in,
// a scenario YAML out. The result goes through the real loader and validate_scenario before anything is written.
#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "app_common.hpp"
#include "hcpsim/core/input_file.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/interop/megatron_import.hpp"
#include "hcpsim/config/scenario_loader.hpp"

namespace hcpsim::app {
namespace {

struct ImportOptions {
  std::string input;
  std::string output;                  ///< empty: stdout
  std::string cluster = "dgx-h100";
  int64_t nodes = 0;                   ///< 0: from the launcher (or the nodes TP*CP*PP needs)
};

/// Reads a whole file, or stdin for "-". @throws InputError if it cannot be read.
std::string read_input(const std::string& path) {
  return read_input_file({path, "file", kMaxLaunchScriptBytes, true, "check the path (use '-' to read standard input)"});
}

/// Re-raises a loader or validation error at the Megatron argument behind the scenario key.
[[noreturn]] void rethrow_at_source(const InputError& e, const MegatronConfig& c) {
  throw InputError(c.loc_of_scenario_key(e.key()), e.key(), e.problem(), e.fix());
}

int run_import(const ImportOptions& o, bool bridge) {
  const auto preset = cluster_preset(o.cluster, 1);
  if (!preset) {
    std::string names;
    for (const auto& n : cluster_preset_names()) names += (names.empty() ? "" : ", ") + n;
    SourceLoc l;
    throw InputError(l, "--cluster", "unknown cluster preset '" + o.cluster + "'", "use one of: " + names);
  }
  const std::string text = read_input(o.input);
  std::vector<std::string> unresolved;
  MegatronConfig cfg = bridge ? parse_bridge_config(text, o.input)
                              : interpret_megatron_args(split_megatron_command_line(text, o.input, &unresolved),
                                                        o.input);
  if (o.nodes > 0) {
    cfg.nnodes = o.nodes;
    if (!cfg.nproc_per_node) cfg.nproc_per_node = preset->gpus_per_node;
    cfg.world_size = o.nodes * *cfg.nproc_per_node;
  }
  for (const auto& u : unresolved) fmt::print(stderr, "note: {}\n", u);
  for (const auto& n : cfg.notes) fmt::print(stderr, "note: {}\n", n);
  for (const auto& i : cfg.ignored) fmt::print(stderr, "ignored (not modelled): {}\n", i);
  if (!cfg.world_size)
    fmt::print(stderr, "note: world size unknown ({}): data_parallel_size 1 assumed; give --nodes N\n",
               bridge ? "a Bridge config has no launcher" : "no torchrun --nnodes and --nproc_per_node");

  ScenarioWriteOptions wo;
  wo.cluster_preset = o.cluster;
  wo.gpus_per_node = preset->gpus_per_node;
  wo.generator = bridge ? "hcpsim import bridge-config" : "hcpsim import megatron-args";
  const std::string yaml = scenario_yaml_of(cfg, wo);

  // The same checks as `hcpsim validate`, on what the real loader makes of the text.
  ValidationReport report;
  try {
    const Scenario s = load_scenario_text(yaml, o.output.empty() ? "<imported scenario>" : o.output);
    report = validate_scenario(s, ValidationScope::placement);
  } catch (const InputError& e) {
    rethrow_at_source(e, cfg);
  }
  for (const auto& w : report.warnings) fmt::print(stderr, "warning: {}\n", w);
  if (o.output.empty()) {
    fmt::print("{}", yaml);
  } else {
    write_output_file(o.output, yaml, "scenario", "-o");
    fmt::print(stderr, "wrote {} (scenario {}, valid)\n", o.output, cfg.name);
  }
  return kExitOk;
}

void add_import_options(CLI::App* cmd, ImportOptions& o, const char* what) {
  cmd->add_option("file", o.input, what)->required();
  cmd->add_option("-o,--output", o.output, "write the scenario here (default: standard output)");
  cmd->add_option("--cluster", o.cluster, "cluster preset: dgx-h100 (default), dgx-h200, dgx-a100, dgx-b200");
  cmd->add_option("--nodes", o.nodes, "node count, when the input does not say it (a Bridge config never does)")
      ->check(CLI::PositiveNumber);
}

}  // namespace

CLI::App* add_import_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("import", "write a scenario from a Megatron-LM command line or Megatron-Bridge config");
  cmd->require_subcommand(1);
  auto args_opts = std::make_shared<ImportOptions>();
  auto* args = cmd->add_subcommand(
      "megatron-args", "read a torchrun / pretrain_gpt.py command line or launch script ('-' = standard input)");
  add_import_options(args, *args_opts, "launch script or command line file, or '-'");
  args->callback([&exit_code, args_opts] { exit_code = run_import(*args_opts, false); });
  auto bridge_opts = std::make_shared<ImportOptions>();
  auto* bridge = cmd->add_subcommand("bridge-config", "read a Megatron-Bridge ConfigContainer YAML");
  add_import_options(bridge, *bridge_opts, "Megatron-Bridge YAML config");
  bridge->callback([&exit_code, bridge_opts] { exit_code = run_import(*bridge_opts, true); });
  return cmd;
}

}  // namespace hcpsim::app
