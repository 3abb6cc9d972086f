#pragma once
/// The Megatron settings hcpsim imports (MegatronConfig) and the raw arguments they are read from (MegatronArg):
/// what a Megatron-LM command line, a Megatron-Bridge config or a training log's arguments block becomes before
/// it is written as a scenario (scenario_writer.hpp). The importers are declared in megatron_import.hpp.
/// Source: Megatron-LM megatron/training/arguments.py (argument names, defaults, validate_args derivations).

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
  /// --attention-backend auto | flash | fused (Bridge model.attention_backend); absent: Megatron's default, auto.
  std::optional<std::string> attention_backend;

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
  /// The main-gradient dtype of the DP reduction when the input decides it: Bridge ddp.grad_reduce_in_fp32;
  /// Megatron-LM --grad-reduce-in-bf16 (false), --accumulate-allreduce-grads-in-fp32 (true), or --fp16 without
  /// it (false: arguments.py turns accumulate_allreduce_grads_in_fp32 on for bf16 only). Else Megatron's bf16
  /// default, true, and no key is written.
  std::optional<bool> grad_reduce_in_fp32;
  /// --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split (Bridge model.*).
  bool tp_comm_overlap = false;  ///< --tp-comm-overlap (Bridge comm_overlap.tp_comm_overlap)
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  /// --decoder-first/last-pipeline-num-layers (Bridge model.num_layers_in_first/last_pipeline_stage).
  std::optional<int64_t> decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers;
  bool use_decentralized_pg = false;  ///< Megatron-Bridge dist.use_decentralized_pg

  // Training step.
  std::string recompute_granularity = "none";  ///< none | selective | full
  /// --recompute-method uniform | block (Bridge model.recompute_method), with full granularity.
  std::optional<std::string> recompute_method;
  /// --recompute-num-layers (Bridge model.recompute_num_layers).
  std::optional<int64_t> recompute_num_layers;
  bool fp8 = false;                             ///< --fp8-format set
  /// --fp8-recipe delayed | tensorwise (Bridge mixed_precision.fp8_recipe); absent: Megatron's default delayed.
  std::optional<std::string> fp8_recipe;
  bool fp8_param_gather = false;                ///< --fp8-param-gather (Bridge mixed_precision.fp8_param_gather)

  // Launch.
  std::optional<int64_t> nnodes;          ///< torchrun --nnodes
  std::optional<int64_t> nproc_per_node;  ///< torchrun --nproc_per_node / --nproc-per-node
  /// torchrun --nproc_per_node gpu (or auto): one process per GPU of the node, so the cluster preset's GPUs per
  /// node stand for the count (nproc_per_node stays unset; the importer fills it from the preset).
  bool nproc_per_node_is_gpus = false;
  std::optional<int64_t> world_size;      ///< nnodes·nproc_per_node, or the log's world_size
  /// A torchrun --nnodes whose value the script leaves to the environment ("--nnodes $SLURM_NNODES"), as written;
  /// empty when resolved or absent. The importer takes the count from its --nodes option, or fails naming this.
  std::string nnodes_unresolved;
  /// The same for a torchrun --nproc_per_node ("--nproc_per_node $SLURM_GPUS_ON_NODE"); the importer takes the
  /// count from its --gpus-per-node option, or fails naming this.
  std::string nproc_per_node_unresolved;

  /// Megatron argument name (underscores) → line that set it; scenario keys map to these for error messages.
  std::map<std::string, int> lines;
  /// Megatron argument name → 1-based column of the flag or key on its line (absent or 0: unknown).
  std::map<std::string, int> columns;
  /// Megatron argument name → the key that set it as a Megatron-Bridge config writes it
  /// ("model.share_embeddings_and_output_weights" for untie_embeddings_and_output_weights); empty for a command line,
  /// whose flag is the argument.
  std::map<std::string, std::string> source_keys;
  /// Flags hcpsim does not model, as "--flag value" text, in input order (printed "ignored (not modelled): ...").
  std::vector<std::string> ignored;
  /// Settings that change the model in ways hcpsim cannot simulate (MoE, MLA, multi-token prediction, hybrid
  /// Mamba), as "--flag value" (or "model.key value") text in input order. The import refuses them unless
  /// --allow-unmodelled is given; then the scenario records them in a comment (interop::unmodelled_setting).
  std::vector<std::string> unmodelled;
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

}  // namespace hcpsim
