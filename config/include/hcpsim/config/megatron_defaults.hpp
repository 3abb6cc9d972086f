#pragma once
/// Megatron's defaults for model sizes a configuration leaves out, written once. The scenario model
/// (ModelConfig), the `megatron-args` importer and the Megatron-Bridge importer all take them from here.

#include <cstdint>

namespace hcpsim {

/// Which configuration system filled in the default: they disagree on the gated MLP width.
enum class MegatronConfigSource {
  /// Megatron-LM command-line arguments (megatron/training/arguments.py validate_args); hcpsim scenarios use
  /// these terms (`model.gated_linear_unit` is `--swiglu`).
  megatron_lm_arguments,
  /// megatron.core TransformerConfig.__post_init__, which Megatron-Bridge model providers inherit.
  transformer_config,
};

/// ffn_hidden_size when it is not set.
/// - megatron_lm_arguments: 4·hidden_size, or with --swiglu int(4·hidden_size·2/3 / 64)·64 (two thirds of 4h so a
///   three-GEMM gated MLP keeps the parameter count of a 4h one, rounded down to a multiple of 64);
///   e.g. hidden 4096 → 16384, or 10880 gated.
/// - transformer_config: 4·hidden_size whether or not the MLP is gated.
/// @param hidden_size  > 0.
/// Source: Megatron-LM megatron/training/arguments.py (validate_args, `if args.ffn_hidden_size is None`);
///   megatron/core/transformer/transformer_config.py (__post_init__).
int64_t default_ffn_hidden_size(int64_t hidden_size, bool gated_linear_unit, MegatronConfigSource source);

/// kv_channels when it is not set: hidden_size / num_attention_heads (integer division).
/// @param num_attention_heads  > 0.
/// Source: Megatron-LM arguments.py (`args.kv_channels = args.hidden_size // args.num_attention_heads`);
///   TransformerConfig.__post_init__ likewise.
int64_t default_kv_channels(int64_t hidden_size, int64_t num_attention_heads);

}  // namespace hcpsim
