// hcpsim import megatron-args | bridge-config: a Megatron-LM command line or a Megatron-Bridge YAML config in,
// a scenario YAML out. The result goes through the real loader and validate_scenario before anything is written.
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "app_common.hpp"
#include "hcpsim/core/input_file.hpp"
#include "hcpsim/config/key_aliases.hpp"
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
  int64_t gpus_per_node = 0;           ///< 0: from the launcher's --nproc_per_node (or the preset)
  bool allow_unmodelled = false;       ///< import MoE / MLA / ... launches anyway, noting it in the scenario
  std::vector<std::string> overrides;  ///< bridge-config: Bridge-style "section.key=value" overrides, in order
};

/// Refuses model-changing settings hcpsim cannot simulate (MegatronConfig::unmodelled) unless allowed.
/// @throws InputError at the first such flag's line, naming all of them.
void check_unmodelled(const MegatronConfig& cfg, bool allowed) {
  if (cfg.unmodelled.empty()) return;
  std::string list;
  for (const auto& u : cfg.unmodelled) list += (list.empty() ? "" : ", ") + u;
  if (allowed) {
    fmt::print(stderr, "note: not modelled (--allow-unmodelled): {}; simulated as a dense model\n", list);
    return;
  }
  SourceLoc l;
  l.file = cfg.source_path == "-" ? "<stdin>" : cfg.source_path;
  std::string first = cfg.unmodelled.front().substr(0, cfg.unmodelled.front().find_first_of(" :"));
  std::string name = first.rfind("model.", 0) == 0 ? first.substr(6) : first.substr(first.find_first_not_of('-'));
  for (char& ch : name) ch = ch == '-' ? '_' : ch;
  if (const auto it = cfg.lines.find(name); it != cfg.lines.end()) l.line = it->second;
  throw InputError(l, "", "model-changing settings hcpsim does not simulate (MoE, multi-latent attention, ...): " +
                              list + "; the scenario would describe a different, dense model",
                   "remove them, or pass --allow-unmodelled to import anyway (the scenario then names them in a "
                   "comment)");
}

/// Reads a whole file, or stdin for "-". @throws InputError if it cannot be read.
std::string read_input(const std::string& path) {
  return read_input_file({path, "file", kMaxLaunchScriptBytes, true, "check the path (use '-' to read standard input)"});
}

/// Re-raises a loader or validation error at the Megatron argument behind the scenario key.
[[noreturn]] void rethrow_at_source(const InputError& e, const MegatronConfig& c, bool bridge) {
  if (!bridge) throw InputError(c.loc_of_scenario_key(e.key()), e.key(), e.problem(), e.fix());
  // A Bridge config names its keys in Bridge's spelling: ddp.use_distributed_optimizer, not the scenario's
  // parallel.use_distributed_optimizer (config/key_aliases.hpp; the first alias of each scenario key).
  std::string key = e.key(), problem = e.problem(), fix = e.fix();
  std::vector<std::string> done;
  for (const KeyAlias& a : bridge_key_aliases()) {
    if (std::find(done.begin(), done.end(), a.canonical) != done.end()) continue;
    done.push_back(a.canonical);
    for (std::string* text : {&key, &problem, &fix})
      for (size_t at = text->find(a.canonical); at != std::string::npos; at = text->find(a.canonical, at + a.alias.size()))
        text->replace(at, a.canonical.size(), a.alias);
  }
  throw InputError(c.loc_of_scenario_key(e.key()), key, problem, fix);
}

/// Full recompute needs its method and layer count: Megatron-Core's TransformerConfig.__post_init__ raises
/// "Using recompute_granularity: full so recompute_method must be "block" or "uniform"" and asks for
/// recompute_num_layers. @throws InputError at the granularity's line when either is missing.
void check_full_recompute(const MegatronConfig& cfg, bool bridge) {
  if (cfg.recompute_granularity != "full" || (cfg.recompute_method && cfg.recompute_num_layers)) return;
  const std::string method = bridge ? "model.recompute_method" : "--recompute-method";
  const std::string layers = bridge ? "model.recompute_num_layers" : "--recompute-num-layers";
  const std::string missing = !cfg.recompute_method && !cfg.recompute_num_layers ? method + " and " + layers
                              : !cfg.recompute_method                            ? method
                                                                                 : layers;
  throw InputError(cfg.loc_of_scenario_key("training.recompute_granularity"),
                   bridge ? "model.recompute_granularity" : "--recompute-granularity",
                   "full recompute without " + missing + ": Megatron-Core's TransformerConfig raises (recompute_method "
                   "must be block or uniform, recompute_num_layers between 1 and the layers per pipeline rank)",
                   "add " + (bridge ? method + ": uniform and " + layers + ": 1" : method + " uniform " + layers + " 1") +
                       " (every layer recomputed, its input saved), or the values the run uses");
}

/// A launch line whose --nnodes the job's environment sets ("--nnodes $SLURM_NNODES") takes the count from
/// --nodes. @throws InputError at that --nnodes when --nodes is not given.
void resolve_node_count(MegatronConfig& cfg, const ImportOptions& o) {
  if (cfg.nnodes_unresolved.empty()) return;
  if (o.nodes > 0) {
    cfg.notes.push_back(fmt::format("{}: {} nodes, from --nodes", cfg.nnodes_unresolved, o.nodes));
    return;
  }
  throw InputError(cfg.loc_of_scenario_key("cluster.nodes"), "--nnodes",
                   "cannot resolve '" + cfg.nnodes_unresolved + "': the job's environment sets the node count",
                   "give the node count the job runs on: hcpsim import megatron-args FILE --nodes N");
}

/// The GPUs per node from the importer's --gpus-per-node: it stands for a torchrun --nproc_per_node the script
/// leaves to the environment (--nproc_per_node $SLURM_GPUS_ON_NODE) and replaces one the script gives, with a
/// note. @return true when it set the count. @throws InputError at an unresolved --nproc_per_node when
/// --gpus-per-node is not given.
bool resolve_gpus_per_node(MegatronConfig& cfg, const ImportOptions& o) {
  if (o.gpus_per_node <= 0) {
    if (cfg.nproc_per_node_unresolved.empty()) return false;
    throw InputError(cfg.loc_of_scenario_key("cluster.gpus_per_node"), "--nproc_per_node",
                     "cannot resolve '" + cfg.nproc_per_node_unresolved +
                         "': the job's environment sets the processes per node",
                     "give the GPUs per node the job uses: hcpsim import megatron-args FILE --gpus-per-node G");
  }
  if (!cfg.nproc_per_node_unresolved.empty())
    cfg.notes.push_back(fmt::format("{}: {} GPUs per node, from --gpus-per-node", cfg.nproc_per_node_unresolved,
                                    o.gpus_per_node));
  else if (cfg.nproc_per_node && *cfg.nproc_per_node != o.gpus_per_node && cfg.lines.count("nproc_per_node"))
    cfg.notes.push_back(fmt::format("--gpus-per-node {} replaces the script's --nproc_per_node {} (line {})",
                                    o.gpus_per_node, *cfg.nproc_per_node, cfg.lines.at("nproc_per_node")));
  cfg.nproc_per_node = o.gpus_per_node;
  return true;
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
  MegatronConfig cfg = bridge ? parse_bridge_config(text, o.input, o.overrides)
                              : interpret_megatron_args(split_megatron_command_line(text, o.input, &unresolved),
                                                        o.input);
  check_unmodelled(cfg, o.allow_unmodelled);
  check_full_recompute(cfg, bridge);
  resolve_node_count(cfg, o);
  const bool gpus_given = resolve_gpus_per_node(cfg, o);
  if ((cfg.nproc_per_node_is_gpus && !cfg.nproc_per_node) || gpus_given) {
    // torchrun --nproc_per_node gpu: every GPU of a node; or the count --gpus-per-node gives
    if (!cfg.nproc_per_node) cfg.nproc_per_node = preset->gpus_per_node;
    // torchrun's --nnodes default, as for a numeric --nproc_per_node (not without a launcher line)
    if (!cfg.nnodes && o.nodes <= 0 && cfg.lines.count("nproc_per_node")) {
      cfg.nnodes = 1;
      cfg.notes.push_back("no --nnodes: one node, torchrun's default");
    }
    if (cfg.nnodes) cfg.world_size = *cfg.nnodes * *cfg.nproc_per_node;
  }
  if (o.nodes > 0) {
    if (cfg.nnodes && *cfg.nnodes != o.nodes && cfg.lines.count("nnodes"))
      cfg.notes.push_back(fmt::format("--nodes {} replaces the script's --nnodes {} (line {})", o.nodes, *cfg.nnodes,
                                      cfg.lines.at("nnodes")));
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
  wo.nics_per_node = preset->nics_per_node;
  wo.generator = bridge ? "hcpsim import bridge-config" : "hcpsim import megatron-args";
  wo.nodes_option = o.nodes;
  const std::string yaml = scenario_yaml_of(cfg, wo);

  // The same checks as `hcpsim validate`, on what the real loader makes of the text.
  ValidationReport report;
  try {
    const Scenario s = load_scenario_text(yaml, o.output.empty() ? "<imported scenario>" : o.output);
    report = validate_scenario(s, ValidationScope::placement);
  } catch (const InputError& e) {
    rethrow_at_source(e, cfg, bridge);
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
  cmd->add_option("--nodes", o.nodes,
                  "node count: needed when the input does not give it (a Bridge config never does) or leaves it to "
                  "the environment (--nnodes $SLURM_NNODES); replaces a --nnodes the script gives, with a note")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpus-per-node", o.gpus_per_node,
                  "GPUs (processes) per node: needed when the launcher leaves --nproc_per_node to the environment "
                  "(--nproc_per_node $SLURM_GPUS_ON_NODE); replaces a --nproc_per_node the script gives, with a note")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--allow-unmodelled", o.allow_unmodelled,
                "import settings hcpsim cannot simulate (MoE, MLA, MTP, hybrid Mamba) as a dense model, noting them "
                "in the scenario");
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
  bridge->add_option("overrides", bridge_opts->overrides,
                     "Megatron-Bridge overrides of the config, applied before it is read, e.g. "
                     "model.context_parallel_size=8 \"model.hierarchical_context_parallel_sizes=[4,2]\"");
  bridge->callback([&exit_code, bridge_opts] { exit_code = run_import(*bridge_opts, true); });
  return cmd;
}

}  // namespace hcpsim::app
