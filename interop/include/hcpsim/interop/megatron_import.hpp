#pragma once
/// Importing Megatron configurations into scenario YAML: a Megatron-LM command line (a torchrun line or a shell
/// launch script), a Megatron-Bridge YAML config, or the `arguments` block a Megatron training log prints.
/// All three become one MegatronConfig (megatron_config.hpp), which scenario_yaml_of (scenario_writer.hpp) writes
/// as a scenario (schema_version 1) in YAML text; this header includes both.
/// Sources: Megatron-LM megatron/training/arguments.py (flag names, defaults, validate_args derivations),
/// Megatron-Bridge docs/megatron-lm-to-megatron-bridge.md (the flag → config-key mapping).

#include <string>
#include <vector>

#include "hcpsim/interop/megatron_config.hpp"
#include "hcpsim/interop/scenario_writer.hpp"

namespace hcpsim {

/// A Slurm variable an `#SBATCH` directive of a batch script decides, as the job's environment holds it.
struct SbatchSetting {
  std::string variable;   ///< SLURM_NNODES (from -N / --nodes), SLURM_NTASKS_PER_NODE, SLURM_GPUS_ON_NODE
  std::string value;      ///< the count, e.g. "4" (a gres's count after its last ':', "gpu:h100:8" -> "8")
  int line = 0;           ///< 1-based line of the directive
  std::string directive;  ///< as read, e.g. "#SBATCH --nodes 4"
};

/// The counts of a batch script's `#SBATCH` lines: -N / --nodes, --ntasks-per-node, --gpus-per-node and --gres=gpu:N
/// ("--opt=value", "--opt value", "-N4" and "-N 4"); a range ("2-4") or a value without a count is skipped. Source:
/// Slurm's sbatch(1) (OUTPUT ENVIRONMENT VARIABLES: SLURM_NNODES / SLURM_JOB_NUM_NODES, SLURM_NTASKS_PER_NODE,
/// SLURM_GPUS_ON_NODE). No errors.
std::vector<SbatchSetting> sbatch_settings(const std::string& text);

/// Splits a shell launch script (or one command line) into the Megatron arguments of its training command.
/// Handles backslash-newline continuations, comments, single/double quotes, `NAME=value` and `export NAME=value`
/// assignments, `$NAME`, `${NAME}`, `${NAME:-default}`, integer `$(( ... ))` arithmetic, bash arrays
/// `NAME=( ... )` used as `${NAME[@]}`, env prefixes (`CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun ...`), and
/// `;`, `&&`, `|` separators and redirections. The training command is the first command that runs a `*.py`
/// script with `--` options (torchrun, `python -m torch.distributed.run/launch`, or python); launcher options
/// (before the script) are marked from_launcher. Control flow (if/for) is not executed: assignments are taken in
/// file order. The Slurm variables a batch script's `#SBATCH` lines decide (sbatch_settings: $SLURM_NNODES,
/// $SLURM_JOB_NUM_NODES, $SLURM_NTASKS_PER_NODE, $SLURM_GPUS_ON_NODE) are set before them, each with a note.
/// @param text          the script
/// @param display_name  file name used in messages ("-" → "<stdin>")
/// @param unresolved    receives one note per variable or `$(...)` that could not be resolved, naming its line
/// @throws InputError if no training command is found (names the file and what is missing).
std::vector<MegatronArg> split_megatron_command_line(const std::string& text, const std::string& display_name,
                                                     std::vector<std::string>* unresolved = nullptr);

/// Interprets Megatron arguments (from a command line or a log's arguments block) as arguments.py would:
/// GQA only with --group-query-attention, kv_channels = hidden_size / heads when absent, ffn_hidden_size
/// 4·hidden (SwiGLU: int(8·hidden/3 / 64)·64) when absent, virtual pipeline size from
/// --num-layers-per-virtual-pipeline-stage, --recompute-activations = selective, --fp8-format → fp8.
/// Log values use Python's spelling (True, False, None, [8, 2], ['p2p', 'a2a']); None means not set.
/// Unread arguments go to `ignored` (launcher options too); `log_block` = true leaves them out (a log prints
/// every argument).
/// @throws InputError naming file:line and the flag when a value the scenario needs is not an integer, is a
/// shell expression hcpsim could not resolve, or a choice is unknown (recompute granularity).
MegatronConfig interpret_megatron_args(const std::vector<MegatronArg>& args, const std::string& display_name,
                                       bool log_block = false);

/// Reads a Megatron-Bridge YAML config (ConfigContainer dump): `model:` (TransformerConfig / GPTModelProvider
/// names), `train:` (micro_batch_size, global_batch_size), `ddp:` (use_distributed_optimizer), `dist:`
/// (use_decentralized_pg), `mixed_precision:` (bf16_mixed, fp16_mixed, ...). Every other key of these sections,
/// and every other section, goes to `ignored` as "key.path value".
/// `model.share_embeddings_and_output_weights: false` means untied; `model.fp8` set (not null) means FP8.
/// `overrides` ("section.key=value", the value YAML; Megatron-Bridge's command-line override syntax, applied in
/// order, a later one of the same key winning, missing sections created) change the config before it is read; a
/// value they set is located at its override in messages and in the written scenario's comments.
/// @throws InputError naming file:line:col (or the override) and the key for YAML syntax errors, a malformed
/// override, or a value of the wrong type.
MegatronConfig parse_bridge_config(const std::string& text, const std::string& display_name,
                                   const std::vector<std::string>& overrides = {});

}  // namespace hcpsim
