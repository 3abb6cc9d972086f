#include "hcpsim/step/training_model.hpp"

#include <algorithm>
#include <vector>

#include "hcpsim/config/pipeline_split.hpp"
#include "hcpsim/config/thd_packing.hpp"
#include "hcpsim/core/error.hpp"

namespace hcpsim {
namespace {

// Source: Megatron-LM --make-vocab-size-divisible-by default 128.
constexpr int64_t kVocabDivisor = 128;
// Source: Megatron-LM docs (distributed optimizer): Adam's fp32 master weights, first and second moments
// (4 + 4 + 4 B) per parameter. The main gradients are fp32 (4 B) with grad_reduce_in_fp32, else params_dtype
// (megatron/core/distributed param_and_grad_buffer: grad dtype = fp32 if grad_reduce_in_fp32 else param dtype).
constexpr double kOptimizerBytesPerParam = 12;
// softmax_lse is fp32 (TE flash attention).
constexpr double kLseBytes = 4;
// The loss takes the logits in fp32 (Megatron vocab_parallel_cross_entropy upcasts to float).
constexpr double kFp32Bytes = 4;

bool training_fp8(const Scenario& s) { return s.training.fp8; }

int64_t require_vocab(const Scenario& s) {
  if (!s.model.vocab_size)
    throw InputError(s.loc("model"), "model.vocab_size",
                     "the whole-step model needs the vocabulary size (embedding, logits, parameter count)",
                     "add 'model.vocab_size: <tokens>', e.g. 128256 for Llama 3");
  return *s.model.vocab_size;
}

}  // namespace

double main_grad_bytes_per_param(const Scenario& s) {
  return s.parallel.grad_reduce_in_fp32 ? kFp32Bytes : static_cast<double>(dtype_size_bytes(s.model.params_dtype));
}

int64_t padded_vocab_size(int64_t vocab_size, int64_t tp) {
  const int64_t multiple = kVocabDivisor * tp;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

std::string to_string(FlopsConvention c) {
  return c == FlopsConvention::megatron_causal ? "megatron_causal" : "megatron_full_attention";
}

ParameterCounts parameter_counts(const Scenario& s) {
  const ModelConfig& m = s.model;
  const double h = static_cast<double>(m.hidden());
  const double ffn = static_cast<double>(m.ffn_hidden());
  const double H = static_cast<double>(m.num_attention_heads), Hkv = static_cast<double>(m.num_query_groups);
  const double dk = static_cast<double>(m.kv_channels), dv = static_cast<double>(m.kv_channels_v);
  ParameterCounts p;
  p.padded_vocab = padded_vocab_size(require_vocab(s), s.parallel.tensor_model_parallel_size);
  p.attention_per_layer = h * (H * dk + Hkv * (dk + dv)) + H * dv * h;
  p.mlp_per_layer = (m.gated_linear_unit ? 3.0 : 2.0) * h * ffn;
  p.norms_per_layer = 2 * h;
  p.embedding = static_cast<double>(p.padded_vocab) * h;
  p.output_layer = m.untie_embeddings_and_output_weights ? p.embedding : 0;
  p.final_norm = h;
  p.total = static_cast<double>(m.num_layers) * (p.attention_per_layer + p.mlp_per_layer + p.norms_per_layer) +
            p.embedding + p.output_layer + p.final_norm;
  return p;
}

double megatron_model_flops(const Scenario& s, int64_t global_batch_size, FlopsConvention convention) {
  const ModelConfig& m = s.model;
  const double B = static_cast<double>(global_batch_size), S = static_cast<double>(m.seq_length);
  const double L = static_cast<double>(m.num_layers), h = static_cast<double>(m.hidden());
  const double H = static_cast<double>(m.num_attention_heads), Hkv = static_cast<double>(m.num_query_groups);
  const double q_ratio = static_cast<double>(m.kv_channels) * H / h;
  const double vpad = static_cast<double>(padded_vocab_size(require_vocab(s), s.parallel.tensor_model_parallel_size));
  const double gated = m.gated_linear_unit ? 1.5 : 1.0;
  const double causal_factor =
      convention == FlopsConvention::megatron_causal && m.attn_mask_type == AttnMaskType::causal ? 0.5 : 1.0;
  const double expansion = 3 * 2 * 2;
  if (m.qkv_format == QkvFormat::thd) {
    // Packed sequences: the real tokens Σ L_s in the linear terms and Σ L_s² in the core attention (each sequence
    // attends only to itself); the formula's s·s would count attention across the whole packed length.
    double tokens = 0, squares = 0;
    for (int64_t len : packed_actual_lengths(m)) {
      tokens += static_cast<double>(len);
      squares += static_cast<double>(len) * static_cast<double>(len);
    }
    return expansion * B * L * h * h *
           (tokens * ((1 + Hkv / H) * q_ratio + static_cast<double>(m.ffn_hidden()) / h * gated + vpad / (2 * L * h)) +
            causal_factor * squares / h * q_ratio);
  }
  return expansion * B * S * L * h * h *
         ((1 + Hkv / H + causal_factor * S / h) * q_ratio + static_cast<double>(m.ffn_hidden()) / h * gated +
          vpad / (2 * L * h));
}

double activation_bytes_per_layer(const Scenario& s) {
  const ModelConfig& m = s.model;
  const ParallelConfig& p = s.parallel;
  const double e = dtype_size_bytes(m.params_dtype);
  const double t = static_cast<double>(m.micro_batch_size) * static_cast<double>(m.seq_length) /
                   static_cast<double>(p.context_parallel_size);
  const double tp = static_cast<double>(p.tensor_model_parallel_size);
  const bool sp = p.sequence_parallel && p.tensor_model_parallel_size > 1;
  const double h = static_cast<double>(m.hidden()), ffn = static_cast<double>(m.ffn_hidden());
  const double H = static_cast<double>(m.num_attention_heads), Hkv = static_cast<double>(m.num_query_groups);
  const double dk = static_cast<double>(m.kv_channels), dv = static_cast<double>(m.kv_channels_v);
  const double norm_region = t * h * e / (sp ? tp : 1.0);
  if (s.training.recompute_granularity == RecomputeGranularity::full) return norm_region;
  // With FP8, Transformer Engine saves each linear layer's input as its FP8 cast (1 B per element) for the
  // wgrad GEMM instead of the BF16 tensor (module/linear.py and layernorm_linear.py save the quantized input).
  const double gemm_in = training_fp8(s) ? 1.0 / e : 1.0;
  const double attention = norm_region + norm_region * gemm_in    // input norm input, QKV GEMM input
                           + t * (H * dk + Hkv * (dk + dv)) * e / tp  // Q, K, V
                           + t * H * dv * e / tp * gemm_in        // attention output (= projection input)
                           + t * H * kLseBytes / tp;              // softmax_lse
  const double mlp = norm_region + norm_region * gemm_in          // pre-MLP norm input, fc1 input
                     + t * (m.gated_linear_unit ? 2.0 : 1.0) * ffn * e / tp  // fc1 output
                     + t * ffn * e / tp * gemm_in;                // activation output (= fc2 input)
  return attention + mlp;
}

RecomputePlan recompute_plan(const Scenario& s, int64_t stage_layers) {
  RecomputePlan r;
  const TrainingConfig& t = s.training;
  if (t.recompute_granularity != RecomputeGranularity::full) {
    r.full_layers = stage_layers;
    return r;
  }
  const int64_t v = std::max<int64_t>(1, s.parallel.virtual_pipeline_model_parallel_size.value_or(1));
  const bool block = t.recompute_method == RecomputeMethod::block;
  for (int64_t j = 0; j < v; ++j) {
    const int64_t c = stage_layers / v + (j < stage_layers % v ? 1 : 0);
    if (block) {
      const int64_t n = std::min(c, t.recompute_num_layers.value_or(c));
      r.recomputed_layers += n;
      r.saved_inputs += n;
      r.full_layers += c - n;
      // Backward runs the chunk's last layers first and frees their activations before it recomputes the
      // first checkpointed layer, so that layer rebuilds its activations in memory the whole layers held: it
      // adds a working layer only where the chunk keeps no layer whole (n = c).
      if (n > 0 && n == c) r.working_layers = 1;
    } else {
      const int64_t n = std::max<int64_t>(1, t.recompute_num_layers.value_or(1));
      r.recomputed_layers += c;
      r.saved_inputs += (c + n - 1) / n;
      r.working_layers = std::max(r.working_layers, std::min(n, c));
    }
  }
  return r;
}

MemoryBreakdown memory_per_gpu(const Scenario& s, int64_t data_parallel_size, int64_t num_microbatches,
                               double cp_attention_buffer_bytes) {
  const ModelConfig& m = s.model;
  const ParallelConfig& p = s.parallel;
  const ParameterCounts pc = parameter_counts(s);
  const double tp = static_cast<double>(p.tensor_model_parallel_size);
  const int64_t pp = p.pipeline_model_parallel_size;
  const std::vector<int64_t> stage_layers = pipeline_split(s).stage_layers;
  const double linear_params = (pc.attention_per_layer + pc.mlp_per_layer) / tp;
  const double layer_params = linear_params + pc.norms_per_layer;
  // First stage: embedding; last stage: output layer (or, with PP > 1 and tied weights, a copy of the
  // embedding, Megatron's shared embedding) and the final norm. PP = 1: both on one stage.
  const double first_extra = pc.embedding / tp;
  const double last_extra = (pp == 1 ? pc.output_layer : (m.untie_embeddings_and_output_weights ? pc.output_layer
                                                                                                    : pc.embedding)) /
                                tp +
                            pc.final_norm;
  const int64_t v = p.virtual_pipeline_model_parallel_size.value_or(1);
  const double m_micro = static_cast<double>(std::max<int64_t>(num_microbatches, 1));
  const double tokens = static_cast<double>(m.micro_batch_size) * static_cast<double>(m.seq_length) /
                        static_cast<double>(p.context_parallel_size);
  const double logits = tokens * static_cast<double>(pc.padded_vocab) / tp;
  const double shards =
      p.use_distributed_optimizer ? static_cast<double>(data_parallel_size * p.context_parallel_size) : 1.0;
  const double per_layer = activation_bytes_per_layer(s);
  double full_layer = per_layer;  // a layer's activations without recompute
  if (s.training.recompute_granularity == RecomputeGranularity::full) {
    Scenario none = s;
    none.training.recompute_granularity = RecomputeGranularity::none;
    full_layer = activation_bytes_per_layer(none);
  }
  const double saved_input = s.training.recompute_granularity == RecomputeGranularity::full ? per_layer : 0.0;
  // One pipeline stage's memory: `params` parameters, activations of `in_flight` micro-batches, and the logits
  // when the stage holds the output layer.
  auto stage = [&](int64_t k, double extra_params, double in_flight, bool holds_logits) {
    MemoryBreakdown mb;
    mb.pipeline_stage = k;
    mb.stage_layers = stage_layers[static_cast<size_t>(k)];
    const auto layers = static_cast<double>(mb.stage_layers);
    const RecomputePlan plan = recompute_plan(s, mb.stage_layers);
    const double stored = static_cast<double>(plan.saved_inputs) * saved_input +
                          static_cast<double>(plan.full_layers) * full_layer;
    const double recompute_bytes = static_cast<double>(plan.working_layers) * full_layer;
    const double params = layers * layer_params + extra_params;
    mb.parameters_per_gpu = params;
    mb.weights_bytes = params * dtype_size_bytes(m.params_dtype);
    // TE caches each FP8 linear weight and its transpose (1 + 1 B per element) for the micro-batches of a step.
    mb.fp8_weight_copies_bytes = s.training.fp8 ? layers * linear_params * 2 : 0.0;
    if (s.training.fp8_param_gather) {
      // Primary FP8 weights (TE fp8_model_init, Megatron --fp8-param-gather): each linear weight is an FP8
      // tensor (1 B) with its transpose (1 B) and no BF16 copy; norms, embedding and output layer stay BF16.
      mb.fp8_parameters_per_gpu = layers * linear_params;
      mb.weights_bytes = (params - mb.fp8_parameters_per_gpu) * dtype_size_bytes(m.params_dtype) +
                         mb.fp8_parameters_per_gpu * kFp8Bytes;
      mb.fp8_weight_copies_bytes = mb.fp8_parameters_per_gpu * kFp8Bytes;
    }
    mb.gradients_bytes = params * main_grad_bytes_per_param(s);
    mb.optimizer_bytes = params * kOptimizerBytesPerParam / shards;
    mb.activations_per_layer_bytes = per_layer;
    mb.in_flight_microbatches = in_flight;
    mb.activations_bytes = stored * in_flight + recompute_bytes;
    mb.recompute_working_bytes = recompute_bytes;
    mb.output_layer_activations_bytes = holds_logits ? logits * (dtype_size_bytes(m.params_dtype) + kFp32Bytes) : 0.0;
    mb.cp_attention_buffers_bytes = cp_attention_buffer_bytes;
    mb.framework_overhead_bytes = s.training.framework_overhead_bytes;
    mb.total_bytes = mb.weights_bytes + mb.fp8_weight_copies_bytes + mb.gradients_bytes + mb.optimizer_bytes + mb.activations_bytes +
                     mb.output_layer_activations_bytes + mb.cp_attention_buffers_bytes + mb.framework_overhead_bytes;
    return mb;
  };
  MemoryBreakdown mb;
  if (pp == 1) {
    mb = stage(0, first_extra + last_extra, 1.0, true);
  } else {
    // 1F1B keeps PP − k micro-batches in flight on stage k; with V model chunks stage k warms up
    // (PP − k − 1)·2 + (V − 1)·PP chunk micro-batches, each 1/V of the stage: ((PP − k − 1)·2 + (V − 1)·PP + 1)/V
    // (PP + (PP − 1)/V on the first stage, ((V − 1)·PP + 1)/V on the last); capped by m.
    auto in_flight = [&](int64_t k) {
      const double f = v > 1 ? static_cast<double>((pp - k - 1) * 2 + (v - 1) * pp + 1) / static_cast<double>(v)
                             : static_cast<double>(pp - k);
      return std::min(m_micro, f);
    };
    // Stage 0 (embedding), stage 1 (the fullest middle stage: middle stages share one size, and stage 1 has the
    // most in flight of them) and the last stage (logits); the worst is reported, ties the earlier stage.
    mb = stage(0, first_extra, in_flight(0), false);
    std::vector<int64_t> others{pp - 1};
    if (pp > 2) others.insert(others.begin(), 1);
    for (const int64_t k : others) {
      const bool last = k == pp - 1;
      const MemoryBreakdown z = stage(k, last ? last_extra : 0.0, in_flight(k), last);
      if (z.total_bytes > mb.total_bytes) mb = z;
    }
  }
  mb.capacity_bytes = s.cluster.gpu.memory_bytes;
  mb.headroom_bytes = mb.capacity_bytes - mb.total_bytes;
  mb.fits = mb.headroom_bytes >= 0;
  return mb;
}

}  // namespace hcpsim
