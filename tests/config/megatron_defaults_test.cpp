#include "catch_compat.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/config/megatron_defaults.hpp"
#include "hcpsim/config/scenario.hpp"

using namespace hcpsim;

TEST_CASE("config: ffn_hidden_size defaults follow Megatron-LM's arguments and TransformerConfig", "[config]") {
  using S = MegatronConfigSource;
  // arguments.py: 4h = 16384 without --swiglu; int(4·4096·2/3 / 64)·64 = int(170.67)·64 = 10880 with it.
  REQUIRE(default_ffn_hidden_size(4096, false, S::megatron_lm_arguments) == 16384);
  REQUIRE(default_ffn_hidden_size(4096, true, S::megatron_lm_arguments) == 10880);
  // h = 2048 (Llama-3.2-1B's width): 8·2048/3 = 5461.33 → /64 = 85.33 → 85·64 = 5440.
  REQUIRE(default_ffn_hidden_size(2048, true, S::megatron_lm_arguments) == 5440);
  // h = 96: 8·96/3 = 256 exactly → 4·64 = 256 (no rounding lost at an exact multiple).
  REQUIRE(default_ffn_hidden_size(96, true, S::megatron_lm_arguments) == 256);
  // TransformerConfig.__post_init__ sets 4h whether or not the MLP is gated.
  REQUIRE(default_ffn_hidden_size(4096, true, S::transformer_config) == 16384);
  REQUIRE(default_kv_channels(4096, 32) == 128);
  REQUIRE(default_kv_channels(4096, 24) == 170);  // integer division, as Megatron's //
}

TEST_CASE("config: a scenario's MLP width without ffn_hidden_size uses the SwiGLU rule when gated", "[config]") {
  ModelConfig m;
  m.num_attention_heads = 32;
  m.kv_channels = 128;  // hidden() = 4096
  REQUIRE(m.ffn_hidden() == 16384);
  m.gated_linear_unit = true;
  REQUIRE(m.ffn_hidden() == 10880);
  m.ffn_hidden_size = 14336;  // an explicit width always wins (Llama 3 8B)
  REQUIRE(m.ffn_hidden() == 14336);
}

TEST_CASE("config: every preset's GPU memory is the capacity the driver reports (nvidia-smi memory.total)",
          "[config]") {
  // H100 SXM5 81559 MiB, A100-SXM4-80GB 81920 MiB, H200 SXM 143771 MiB, B200 183359 MiB: the bytes PyTorch's
  // allocator can fill, so "fits" means the same on every preset (the H200 and B200 were datasheet decimal GB, 141e9
  // and 180e9 B, up to 7% below what the device holds).
  const double mib = 1024.0 * 1024.0;
  CHECK(cluster_preset("dgx-h100", 1)->gpu.memory_bytes == 81559 * mib);
  CHECK(cluster_preset("dgx-a100", 1)->gpu.memory_bytes == 81920 * mib);
  CHECK(cluster_preset("dgx-h200", 1)->gpu.memory_bytes == 143771 * mib);
  CHECK(cluster_preset("dgx-b200", 1)->gpu.memory_bytes == 183359 * mib);
}
