#include "hcpsim/config/megatron_defaults.hpp"

namespace hcpsim {

namespace {

/// Megatron keeps the SwiGLU width a multiple of 64 so that it splits evenly over common TP sizes.
/// Source: megatron/training/arguments.py ("we keep it a multiple of 64").
constexpr int64_t kSwigluWidthMultiple = 64;

}  // namespace

int64_t default_ffn_hidden_size(int64_t hidden_size, bool gated_linear_unit, MegatronConfigSource source) {
  if (gated_linear_unit && source == MegatronConfigSource::megatron_lm_arguments) {
    // int((4·h·2/3) / 64)·64 in exact integer arithmetic: floor(8h / (3·64))·64.
    return (8 * hidden_size) / (3 * kSwigluWidthMultiple) * kSwigluWidthMultiple;
  }
  return 4 * hidden_size;
}

int64_t default_kv_channels(int64_t hidden_size, int64_t num_attention_heads) {
  return hidden_size / num_attention_heads;
}

}  // namespace hcpsim
