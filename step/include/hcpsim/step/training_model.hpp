#pragma once
/// Closed forms of the whole training step that are not simulated: parameter counts, model FLOPs as Megatron
/// reports them, and the per-GPU memory model (weights, gradients, optimizer states, activations).
/// The layer's time is simulated (layer_builder.hpp, sim/step.hpp); these formulas size what the simulator does
/// not see. Every formula names its source.

#include <cstdint>
#include <string>

#include "hcpsim/config/scenario.hpp"

namespace hcpsim {

/// Bytes of one FP8 element (E4M3 or E5M2, the OCP FP8 formats TE uses).
inline constexpr double kFp8Bytes = 1;

/// Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by · TP (default 128 · TP).
/// Source: megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding.
/// @param vocab_size ≥ 1; @param tp ≥ 1. @return the padded size.
int64_t padded_vocab_size(int64_t vocab_size, int64_t tp);

/// Bytes per parameter of the main gradient buffer and of the DP gradient reduction: 4 (fp32) with
/// parallel.grad_reduce_in_fp32, else the size of model.params_dtype.
/// Source: megatron/core/distributed/param_and_grad_buffer.py (grad dtype = torch.float if grad_reduce_in_fp32).
double main_grad_bytes_per_param(const Scenario& scenario);

/// Parameter counts of the model (whole model, before any sharding), as doubles (exact below 2^53).
/// No biases (Llama-style add_bias_linear = false); RMSNorm with one weight vector of h per norm.
struct ParameterCounts {
  double attention_per_layer = 0;  ///< QKV h·(H·dk + Hkv·(dk + dv)) + output projection H·dv·h
  double mlp_per_layer = 0;        ///< (2 or 3)·h·ffn (3 when gated_linear_unit)
  double norms_per_layer = 0;      ///< 2·h (input and pre-MLP norm)
  double embedding = 0;            ///< padded V · h
  double output_layer = 0;         ///< padded V · h when untied, else 0 (tied to the embedding)
  double final_norm = 0;           ///< h
  double total = 0;                ///< num_layers · (attention + mlp + norms) + embedding + output + final norm
  int64_t padded_vocab = 0;        ///< padded_vocab_size(vocab, tp)
};

/// Counts of `model` with vocabulary padding for `tp`. @throws InputError when model.vocab_size is absent
/// (naming the key and the fix), because the embedding cannot be sized without it.
ParameterCounts parameter_counts(const Scenario& scenario);

/// The two ways Megatron has counted core attention in its reported model FLOPs (docs/architecture.md "Numbers we stand on").
enum class FlopsConvention {
  megatron_causal,          ///< since 2025-03-06: a causal mask counts half of the s² score matrix
  megatron_full_attention,  ///< before 2025-03-06: the full s² whatever the mask
};
/// "megatron_causal" | "megatron_full_attention".
std::string to_string(FlopsConvention c);

/// Model FLOPs of one iteration (forward + backward, global batch), Megatron's num_floating_point_operations:
/// 12·B·s·L·h²·[(1 + Hkv/H + f·s/h)·(H·dk/h) + (ffn/h)·g + Vpad/(2·L·h)], with g = 3/2 for a gated MLP and
/// f = 1 (full attention) or 1/2 (causal mask, megatron_causal). Recomputation is not counted (model FLOPs).
/// Packed sequences (qkv_format thd): B·s becomes the real tokens B·Σ L_s and the attention term's B·s² becomes
/// B·Σ L_s² (each sequence attends only to itself); Megatron's function uses the padded packed length s for both,
/// which overstates a packed run's work (hcpsim reports the useful work, so MFU stays below 100%).
/// Source: megatron/training/training.py num_floating_point_operations; Narayanan et al. 2021 (arXiv:2104.04473)
/// appendix "Floating-point operations".
/// @param global_batch_size samples per iteration (B). @throws InputError without model.vocab_size.
double megatron_model_flops(const Scenario& scenario, int64_t global_batch_size, FlopsConvention convention);

/// Per-GPU memory in bytes, by category, of the pipeline stage that needs the most: with PP > 1 the first stage
/// (embedding, the most micro-batches in flight), the fullest middle stage, or the last (output layer and its
/// logits), whichever is largest.
struct MemoryBreakdown {
  double parameters_per_gpu = 0;       ///< parameters this GPU holds (its stage, / TP)
  double weights_bytes = 0;            ///< parameters · element size of params_dtype
  double fp8_weight_copies_bytes = 0;  ///< training.fp8: TE's cached FP8 weight and transpose, 2 B per linear weight
                                      ///< (with fp8_param_gather: the transpose of the FP8 weight, 1 B)
  double fp8_parameters_per_gpu = 0;  ///< training.fp8_param_gather: linear weights held in FP8 (count, not bytes)
  double gradients_bytes = 0;          ///< main gradients: 4 B / parameter with grad_reduce_in_fp32, else params_dtype
  double optimizer_bytes = 0;          ///< Adam: fp32 master + 2 moments = 12 bytes / parameter, / (DP·CP) when distributed
  double activations_bytes = 0;        ///< saved activations of the in-flight micro-batches (transformer layers)
  double output_layer_activations_bytes = 0;  ///< logits (params dtype) + their fp32 copy for the loss, last stage
  double cp_attention_buffers_bytes = 0;      ///< transient CP attention buffers (simulator peak − inputs)
  double framework_overhead_bytes = 0; ///< TrainingConfig::framework_overhead_bytes
  double total_bytes = 0;
  double capacity_bytes = 0;           ///< GpuSpec::memory_bytes
  double headroom_bytes = 0;           ///< capacity − total (negative: does not fit)
  bool fits = false;
  double activations_per_layer_bytes = 0;  ///< one layer, one micro-batch, as stored for backward
  double in_flight_microbatches = 0;       ///< micro-batches whose activations the reported stage holds at peak
  double recompute_working_bytes = 0;      ///< full recompute: the layer being recomputed (in activations_bytes)
  int64_t pipeline_stage = 0;              ///< the reported (worst) stage, 0-based
  int64_t stage_layers = 0;                ///< transformer layers on the reported stage
};

/// Saved activation bytes of one transformer layer for one micro-batch on one GPU, Megatron + TE with flash
/// attention and no dropout (Llama-style), tokens t = b·s/CP per GPU, element size e of params_dtype:
/// norm regions (2 norm inputs + 2 GEMM inputs, each t·h·e) are divided by TP only with sequence parallelism;
/// Q, K, V t·(H·dk + Hkv·(dk + dv))·e/TP; attention output t·H·dv·e/TP and softmax_lse t·H·4/TP;
/// MLP fc1 output t·(1 or 2)·ffn·e/TP and activation output t·ffn·e/TP; with training.fp8 the four linear-layer
/// inputs (QKV, projection, fc1, fc2) are saved in FP8, 1 B per element (TE saves the quantized input for the
/// wgrad GEMM). recompute full: only the layer input
/// t·h·e (/TP with SP); selective: as none (flash attention already recomputes the scores, and the
/// checkpointed core attention keeps its Q/K/V inputs).
/// Source: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
/// (arXiv:2205.05198) §4, per-tensor accounting (their 34·s·b·h with dropout masks and GELU, 5·a·s²·b without
/// flash attention), adapted to GQA, gated MLPs and TE's softmax_lse; CP divides s (Megatron context parallelism
/// docs).
double activation_bytes_per_layer(const Scenario& scenario);

/// What full recompute does on one pipeline stage of `stage_layers` layers split into V model chunks (V =
/// virtual_pipeline_model_parallel_size, chunk j holding stage_layers / V layers, the first stage_layers % V one
/// more), per micro-batch. Source: Megatron-LM megatron/core/transformer/transformer_block.py
/// _checkpointed_forward: uniform = each chunk's layers in groups of N = recompute_num_layers, the group input
/// saved and the whole group rerun in backward (its N layers' activations live at once); block = the first N
/// layers of each chunk checkpointed one by one, the others keep their activations (backward frees those before it
/// recomputes the first checkpointed layer, so a recomputed layer is a working layer only in a chunk that keeps
/// no layer whole).
struct RecomputePlan {
  int64_t recomputed_layers = 0;  ///< layers whose forward runs again in backward
  int64_t saved_inputs = 0;       ///< checkpoint inputs kept (t·h·e each, /TP with SP)
  int64_t full_layers = 0;        ///< layers keeping all their activations
  int64_t working_layers = 0;     ///< layers whose full activations are rebuilt at once during backward, beyond
                                  ///< what the micro-batch's stored activations already held
};
/// none / selective: nothing recomputed (full_layers = stage_layers).
RecomputePlan recompute_plan(const Scenario& scenario, int64_t stage_layers);

/// Memory per GPU. @param data_parallel_size resolved DP; @param num_microbatches m = global batch / (b·DP);
/// @param cp_attention_buffer_bytes transient attention buffers from the simulator (≥ 0).
/// Stages hold pipeline_split(scenario) layers. In-flight micro-batches of stage k: PP − k, or with V model chunks
/// ((PP − k − 1)·2 + (V − 1)·PP + 1)/V (Megatron-LM schedules.py: stage k warms up (PP − k − 1)·2 + (V − 1)·PP
/// chunk micro-batches; Korthikanti et al. 2022 §4.2.3), capped by m (Megatron caps the warm-up at m·V chunks).
/// The first stage, the fullest middle stage (stage 1) and the last stage are evaluated; the worst is reported
/// (MemoryBreakdown::pipeline_stage). training.fp8 adds TE's cached FP8 weight copies (weight and transpose, 2 B
/// per linear weight). The logits are on the last stage only. Full recompute (recompute_plan): saved inputs and
/// the full activations of the layers not recomputed, per in-flight micro-batch, plus the full activations of the
/// working layers (the group being recomputed) once.
/// Source: Megatron-LM docs, distributed optimizer: 18 bytes / parameter without it (2 param + 4 grad + 12
/// optimizer) and 6 + 12/d with it; the optimizer shards over DP·CP (docs/architecture.md "Numbers we stand on").
/// @throws InputError without model.vocab_size.
MemoryBreakdown memory_per_gpu(const Scenario& scenario, int64_t data_parallel_size, int64_t num_microbatches,
                               double cp_attention_buffer_bytes);

}  // namespace hcpsim
