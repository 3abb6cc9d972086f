#pragma once
/// Value types of a scenario file (schema_version 1). Field names follow Megatron-Core / Megatron-Bridge.
/// Loading lives in scenario_loader.hpp, rules in validation.hpp.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hcpsim/config/attention_backend.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/types.hpp"

namespace hcpsim {

/// `model.packing`: a seeded generator of the actual lengths of THD packed sequences (thd_packing.hpp
/// generate_packed_lengths). The seed is the data seed, independent of oracle.seed.
struct PackingGenerator {
  uint64_t seed = 0;           ///< data seed
  int64_t num_sequences = 0;   ///< n ≥ 1
  int64_t min_length = 0;      ///< shortest actual length, ≥ 1
  int64_t max_length = 0;      ///< longest actual length, ≥ min_length
};

/// Attention shapes of the model (Megatron TransformerConfig names). Head counts are global (before TP).
struct ModelConfig {
  int64_t num_attention_heads = 0;   ///< H (query heads)
  int64_t num_query_groups = 0;      ///< Hkv (KV heads); defaults to num_attention_heads (MHA)
  int64_t kv_channels = 0;           ///< dk, head dim of Q and K
  int64_t kv_channels_v = 0;         ///< dv, head dim of V; defaults to kv_channels
  int64_t seq_length = 0;            ///< S, global tokens per sample
  int64_t micro_batch_size = 1;      ///< b
  int64_t num_layers = 1;
  /// h; default num_attention_heads·kv_channels (Megatron's kv_channels = hidden_size / heads). Used by the
  /// whole-step model (GEMM shapes, parameter count, activation memory).
  std::optional<int64_t> hidden_size;
  /// MLP width; default from Megatron-LM's arguments (megatron_defaults.hpp): 4·hidden_size, or the SwiGLU
  /// rule int(8·hidden_size/3/64)·64 with gated_linear_unit.
  std::optional<int64_t> ffn_hidden_size;
  /// Samples per optimizer step; default micro_batch_size·data_parallel_size (Megatron's default).
  std::optional<int64_t> global_batch_size;
  /// Vocabulary size (before Megatron's padding to a multiple of 128·TP); required by the whole-step model.
  std::optional<int64_t> vocab_size;
  /// Gated MLP (SwiGLU, Megatron --swiglu): three GEMMs of hidden × ffn instead of two.
  bool gated_linear_unit = false;
  /// Separate output-layer weights (Megatron --untie-embeddings-and-output-weights); else tied to the embedding.
  bool untie_embeddings_and_output_weights = false;
  AttnMaskType attn_mask_type = AttnMaskType::causal;
  QkvFormat qkv_format = QkvFormat::sbhd;  ///< Megatron hands TE sbhd by default
  /// qkv_format thd: the actual lengths of the packed sequences of one micro-batch, in packing order (each ≥ 1).
  /// Exactly one of this and `packing` is given with thd (validation.hpp). Each is padded to a multiple of
  /// 2·context_parallel_size and seq_length is the padded total (thd_packing.hpp).
  std::optional<std::vector<int64_t>> packed_sequence_lengths;
  /// qkv_format thd: the generator of the actual lengths (instead of packed_sequence_lengths).
  std::optional<PackingGenerator> packing;
  /// TE's pad_between_seqs: true, false, or std::nullopt = auto (true when some sequence is padded, as TE's
  /// auto-detection does when padded cu_seqlens are supplied). false with a padded sequence is rejected.
  std::optional<bool> pad_between_seqs;
  std::optional<std::vector<int64_t>> window_size;  ///< sliding window [left, right]; absent, [-1, 0] or [-1, -1] = none
  bool attention_bias = false;       ///< TE core-attention bias (attn_bias_type != no_bias)
  Dtype params_dtype = Dtype::bf16;
  /// Megatron-Core --attention-backend: which TE attention kernel may run (resolve_attention_kernel picks it with
  /// the GPU and parallel.te_version); the preset GPU's efficiency tables are that kernel's.
  AttentionBackend attention_backend = AttentionBackend::auto_select;

  /// True when a sliding window is actually set: left >= 0 (TE's check_set_window_size: absent, [-1, 0] and
  /// [-1, -1] are no window; validation refuses the other negative pairs).
  [[nodiscard]] bool has_sliding_window() const;
  /// hidden_size, or num_attention_heads·kv_channels when absent.
  [[nodiscard]] int64_t hidden() const;
  /// ffn_hidden_size, or default_ffn_hidden_size(hidden(), gated_linear_unit, megatron_lm_arguments) when absent.
  [[nodiscard]] int64_t ffn_hidden() const;
};

/// Parallel layout (Megatron names). cp_comm_type holds one value, or one per layer.
struct ParallelConfig {
  int64_t tensor_model_parallel_size = 1;
  int64_t pipeline_model_parallel_size = 1;
  int64_t context_parallel_size = 1;
  std::optional<int64_t> data_parallel_size;  ///< default: whatever fills the cluster
  std::vector<CpCommType> cp_comm_type{CpCommType::p2p};
  std::optional<std::vector<int64_t>> hierarchical_context_parallel_sizes;  ///< [A, P]
  std::string order = "tp-cp-ep-dp-pp";
  bool use_decentralized_pg = false;
  std::optional<std::string> te_version;  ///< e.g. "2.4" or "1.11.0"
  /// Megatron --sequence-parallel: norms/dropout sharded over TP along the sequence, TP all-reduces replaced by
  /// all-gather + reduce-scatter. Requires tensor_model_parallel_size > 1.
  bool sequence_parallel = false;
  /// Interleaved 1F1B model chunks per pipeline stage (Megatron --virtual-pipeline-model-parallel-size).
  std::optional<int64_t> virtual_pipeline_model_parallel_size;
  /// Megatron --use-distributed-optimizer: optimizer states and fp32 master weights sharded over DP·CP.
  bool use_distributed_optimizer = false;
  /// Megatron --overlap-grad-reduce: the DP gradient reduction runs bucket by bucket during the last micro-batch's
  /// backward (default false, Megatron's default: it runs after the backward, fully exposed).
  bool overlap_grad_reduce = false;
  /// Megatron --overlap-param-gather: the distributed optimizer's parameter all-gather runs during the next
  /// forward (default false: exposed before it).
  bool overlap_param_gather = false;
  /// Megatron's grad_reduce_in_fp32 (DistributedDataParallelConfig; Bridge `ddp.grad_reduce_in_fp32`): the main
  /// gradient buffer and the DP gradient reduction in fp32 (default true, as Megatron-LM sets it for bf16 training
  /// and NeMo's bf16-mixed plugin), else in params_dtype (the NeMo / Megatron-Bridge performance recipes set false).
  bool grad_reduce_in_fp32 = true;
  /// Megatron-Core's account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split
  /// (--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split): the embedding (loss)
  /// counts as one layer of the first (last) pipeline stage's first (last) model chunk when layers are split,
  /// so that stage builds one transformer layer fewer. Source: megatron/core/transformer/transformer_config.py.
  bool account_for_embedding_in_pipeline_split = false;
  /// Megatron's --tp-comm-overlap (Transformer Engine userbuffers): the sequence-parallel all-gathers and
  /// reduce-scatters run as ring exchanges pipelined with the GEMMs that consume or produce them. Needs
  /// sequence_parallel (Megatron asserts it). Source: Megatron-LM arguments.py; TE pytorch/module/base.py.
  bool tp_comm_overlap = false;
  bool account_for_loss_in_pipeline_split = false;
  /// Megatron's --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers
  /// (TransformerConfig num_layers_in_first/last_pipeline_stage): transformer layers of the first (last) stage;
  /// the other stages share the rest evenly. Not together with the account_for_* options.
  std::optional<int64_t> decoder_first_pipeline_num_layers;
  std::optional<int64_t> decoder_last_pipeline_num_layers;

  /// The distinct comm types, in first-use order (a per-layer list may repeat them).
  [[nodiscard]] std::vector<CpCommType> distinct_cp_comm_types() const;
};

/// Megatron --recompute-granularity (plus none = no recomputation).
enum class RecomputeGranularity { none, selective, full };
std::string to_string(RecomputeGranularity g);

/// Megatron --recompute-method, with --recompute-granularity full. Source: Megatron-LM
/// megatron/core/transformer/transformer_block.py _checkpointed_forward: uniform = the layers of a model chunk in
/// groups of recompute_num_layers, each group's input saved and the whole group rerun in backward; block = the
/// first recompute_num_layers layers of each model chunk (pipeline stage) rerun one by one, the rest keep their
/// activations.
enum class RecomputeMethod { uniform, block };
std::string to_string(RecomputeMethod m);
/// Megatron --fp8-recipe (Bridge mixed_precision.fp8_recipe; megatron/core/fp8_utils.py get_fp8_recipe): how
/// Transformer Engine scales FP8 tensors. `delayed` (TE DelayedScaling): the scale comes from the amax history and
/// the amax is taken inside the cast kernel. `tensorwise` (TE Float8CurrentScaling): each tensor's amax is computed
/// in its own pass before the cast (transformer_engine/pytorch/csrc/quantizer.cpp,
/// Float8CurrentScalingQuantizer::quantize_impl), reduced over the TP group for sequence-parallel inputs.
/// Megatron's mxfp8 and blockwise recipes are not modelled (refused by the loader).
enum class Fp8Recipe { delayed, tensorwise };
std::string to_string(Fp8Recipe r);

/// Training-step knobs of the whole-step model (section `training:`).
struct TrainingConfig {
  /// none: keep every activation; selective: recompute core attention (Megatron's selective recompute,
  /// what FlashAttention/TE does anyway); full: recompute whole layers as recompute_method and
  /// recompute_num_layers say (default uniform over groups of one layer: every layer's input saved).
  RecomputeGranularity recompute_granularity = RecomputeGranularity::none;
  /// Megatron --recompute-method (full granularity only).
  RecomputeMethod recompute_method = RecomputeMethod::uniform;
  /// Megatron --recompute-num-layers: the group size (uniform) or the recomputed layers per chunk (block); at
  /// least 1 (uniform) or 0 (block), at most the layers of one model chunk. Absent: 1 (uniform), every layer of
  /// the chunk (block).
  std::optional<int64_t> recompute_num_layers;
  /// Transformer Engine FP8 (Megatron --fp8-format): the linear layers' GEMMs run at the GPU's FP8 peak;
  /// attention, weights and optimizer states stay as without FP8.
  bool fp8 = false;
  /// Megatron --fp8-recipe (used with fp8 only; Megatron's default delayed).
  Fp8Recipe fp8_recipe = Fp8Recipe::delayed;
  /// Megatron --fp8-param-gather (Bridge mixed_precision.fp8_param_gather; needs fp8 and the distributed
  /// optimizer, as Megatron asserts): the linear layers' weights are kept in FP8 (TE's primary FP8 weights, 1 B
  /// and 1 B for the transpose, instead of the BF16 weight and TE's cached FP8 copies) and the DP parameter
  /// all-gather moves them in FP8.
  bool fp8_param_gather = false;
  /// Memory each GPU loses to the framework (CUDA context, NCCL buffers, allocator fragmentation), bytes.
  /// Source: assumption, 3 GB: a CUDA context with cuBLAS/cuDNN workspaces takes ~0.5–1 GB and NCCL 0.5–1 GB per
  /// communicator set; PyTorch's caching allocator commonly leaves 5–10% of an 80 GB device fragmented.
  double framework_overhead_bytes = 3e9;
};

/// How the CPU/GPU oracles generate inputs and at which precision they run.
struct OracleSpec {
  uint64_t seed = 1234;
  /// Precision the oracle emulates (fp64, fp32, bf16, fp16); default fp32. Never taken from params_dtype.
  Dtype dtype = Dtype::fp32;
  std::string input_distribution = "clamped_normal";  ///< clamped_normal | normal | uniform | adversarial
  /// "all", or a positive integer N: check only the first N q-heads of each a2a member (and their KV heads);
  /// N is capped at H/A and rounded up to a multiple of H/Hkv by the verifier.
  std::string heads = "all";
  std::optional<std::string> inject;  ///< a fault injector name (fault_injection.hpp), e.g. "stale_kv_backward"
};

/// Golden expectations (the `expect:` block). Only what this version checks is modelled.
struct ExpectSpec {
  std::optional<int> validate_exit_code;
  std::optional<std::string> validate_error;  ///< substring of the expected error message
  std::optional<std::string> verify_result;   ///< "pass" | "precision_limited" | "fail"
  /// Upper bounds on the relative L2 error per tensor ("out", "lse", "dq", "dk", "dv"); NaN (.nan) states that the
  /// tensor has non-finite entries.
  std::map<std::string, double> verify_max_rel_l2;
  /// Exact simulator goldens (integer picoseconds, bytes, counts) by field name, e.g. "forward_ps".
  std::map<std::string, int64_t> simulate;
  bool present = false;  ///< the file has an `expect:` block
};

/// A whole scenario plus where each value came from (for error messages).
struct Scenario {
  int schema_version = 1;
  std::string name;
  ModelConfig model;
  ParallelConfig parallel;
  ClusterSpec cluster;
  TrainingConfig training;
  OracleSpec oracle;
  ExpectSpec expect;
  std::string source_path;  ///< file the scenario was read from ("" for one built in code)
  /// dotted key path → where its value was set (file position or override).
  std::map<std::string, SourceLoc> locations;

  /// Location of `key`, or of its nearest parent that has one, or of the file.
  [[nodiscard]] SourceLoc loc(const std::string& key) const;
};

}  // namespace hcpsim
