#pragma once
/// Importing Megatron configurations into scenario YAML: a Megatron-LM command line (a torchrun line or a shell
/// launch script), a Megatron-Bridge YAML config, or the `arguments` block a Megatron training log prints.
/// All three become one MegatronConfig, which writes a scenario (schema_version 1) as YAML text.
/// Sources: Megatron-LM megatron/training/arguments.py (flag names, defaults, validate_args derivations),
/// Megatron-Bridge docs/megatron-lm-to-megatron-bridge.md (the flag → config-key mapping).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

/// One argument as Megatron would receive it, before interpretation.
/// `name` uses underscores (`--num-attention-heads` and the log's `num_attention_heads` are the same name);
/// `values` holds the words after the flag (empty for a switch such as `--bf16`).
struct MegatronArg {
  std::string name;                 ///< e.g. "hierarchical_context_parallel_sizes"
  std::string flag;                 ///< as written, e.g. "--hierarchical-context-parallel-sizes" (log: the name)
  std::vector<std::string> values;  ///< e.g. {"8", "2"}
  int line = 0;                     ///< 1-based line of the flag in its file; 0 if unknown
  int column = 0;                   ///< 1-based column of the flag; 0 if unknown
  bool from_launcher = false;       ///< a torchrun option (before the training script)
};

/// The Megatron settings hcpsim models, with where each came from. Optional fields are absent when the input
/// did not set them and Megatron's default could not be derived.
struct MegatronConfig {
  std::string source_path;  ///< the input file as the user named it ("-" for stdin)
  std::string name;         ///< scenario name (from the file name)

  // Model (Megatron TransformerConfig / arguments.py names).
  std::optional<int64_t> num_attention_heads;
  std::optional<int64_t> num_query_groups;  ///< resolved: num_attention_heads unless GQA is on
  std::optional<int64_t> kv_channels;       ///< resolved: hidden_size / num_attention_heads when absent
  std::optional<int64_t> seq_length;
  int64_t micro_batch_size = 1;
  std::optional<int64_t> global_batch_size;
  std::optional<int64_t> num_layers;
  std::optional<int64_t> hidden_size;
  std::optional<int64_t> ffn_hidden_size;  ///< resolved by Megatron's rule when absent and hidden_size is known
  std::optional<int64_t> vocab_size;       ///< absent: it comes from the tokenizer (see notes)
  bool gated_linear_unit = false;          ///< --swiglu
  bool untie_embeddings_and_output_weights = false;
  std::string params_dtype = "fp32";       ///< bf16 | fp16 | fp32 (--bf16 / --fp16; Megatron's default is fp32)

  // Parallel layout.
  int64_t tensor_model_parallel_size = 1;
  int64_t pipeline_model_parallel_size = 1;
  int64_t context_parallel_size = 1;
  std::optional<int64_t> virtual_pipeline_model_parallel_size;
  std::vector<std::string> cp_comm_type{"p2p"};  ///< one value, or one per layer (Megatron's default p2p)
  std::optional<std::vector<int64_t>> hierarchical_context_parallel_sizes;
  bool sequence_parallel = false;
  bool use_distributed_optimizer = false;
  bool overlap_grad_reduce = false;   ///< --overlap-grad-reduce (Bridge ddp.overlap_grad_reduce)
  bool overlap_param_gather = false;  ///< --overlap-param-gather (Bridge ddp.overlap_param_gather)
  bool use_decentralized_pg = false;  ///< Megatron-Bridge dist.use_decentralized_pg

  // Training step.
  std::string recompute_granularity = "none";  ///< none | selective | full
  bool fp8 = false;                             ///< --fp8-format set

  // Launch.
  std::optional<int64_t> nnodes;          ///< torchrun --nnodes
  std::optional<int64_t> nproc_per_node;  ///< torchrun --nproc_per_node / --nproc-per-node
  std::optional<int64_t> world_size;      ///< nnodes·nproc_per_node, or the log's world_size

  /// Megatron argument name (underscores) → line that set it; scenario keys map to these for error messages.
  std::map<std::string, int> lines;
  /// Megatron argument name → 1-based column of the flag or key on its line (absent or 0: unknown).
  std::map<std::string, int> columns;
  /// Flags hcpsim does not model, as "--flag value" text, in input order (printed "ignored (not modelled): ...").
  std::vector<std::string> ignored;
  /// Facts the user should know (defaults applied, values taken from elsewhere, shell text not resolved).
  std::vector<std::string> notes;

  /// Data-parallel size world / (TP·CP·PP) (Megatron validate_args), when the world size is known.
  /// @throws InputError naming the launcher line if the world size is not divisible by TP·CP·PP.
  [[nodiscard]] std::optional<int64_t> data_parallel_size() const;

  /// Where the value behind a scenario key came from: `file:line` of the Megatron argument that set it
  /// (e.g. "parallel.hierarchical_context_parallel_sizes" → the `--hierarchical-context-parallel-sizes` line),
  /// or just the file when no argument set it.
  [[nodiscard]] SourceLoc loc_of_scenario_key(const std::string& scenario_key) const;
  /// The Megatron argument names (underscores) a scenario key is read from, most specific first.
  [[nodiscard]] static std::vector<std::string> megatron_names_of(const std::string& scenario_key);
};

/// Splits a shell launch script (or one command line) into the Megatron arguments of its training command.
/// Handles backslash-newline continuations, comments, single/double quotes, `NAME=value` and `export NAME=value`
/// assignments, `$NAME`, `${NAME}`, `${NAME:-default}`, integer `$(( ... ))` arithmetic, bash arrays
/// `NAME=( ... )` used as `${NAME[@]}`, env prefixes (`CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun ...`), and
/// `;`, `&&`, `|` separators and redirections. The training command is the first command that runs a `*.py`
/// script with `--` options (torchrun, `python -m torch.distributed.run/launch`, or python); launcher options
/// (before the script) are marked from_launcher. Control flow (if/for) is not executed: assignments are taken in
/// file order.
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
/// @throws InputError naming file:line:col and the key for YAML syntax errors or a value of the wrong type.
MegatronConfig parse_bridge_config(const std::string& text, const std::string& display_name);

/// Options of the scenario written by scenario_yaml_of.
struct ScenarioWriteOptions {
  std::string cluster_preset = "dgx-h100";  ///< a cluster_preset() name
  int64_t gpus_per_node = 8;                ///< the preset's GPUs per node
  std::string generator;                    ///< first comment line, e.g. "hcpsim import megatron-args"
};

/// Writes the scenario as YAML (schema_version 1), keys in the README's order, one `# from file:line` comment per
/// imported value. cluster.nodes = torchrun --nnodes, else ceil(world / gpus_per_node), else the nodes that
/// TP·CP·PP needs (DP 1, noted); gpus_per_node is written only when --nproc_per_node differs from the preset.
/// Deterministic: the same config gives byte-identical text.
/// @throws InputError naming the file and the missing flag when num_attention_heads, seq_length or kv_channels
/// (or hidden_size) is unknown, or the world size is not divisible by TP·CP·PP.
std::string scenario_yaml_of(const MegatronConfig& config, const ScenarioWriteOptions& options);

}  // namespace hcpsim
