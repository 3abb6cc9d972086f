#include <string>

#include "catch_compat.hpp"
#include "hcpsim/config/attention_backend.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/scenario_yaml.hpp"
#include "hcpsim/core/error.hpp"

using namespace hcpsim;

namespace {

const char* kScenario = R"(schema_version: 1
model:
  num_attention_heads: 16
  kv_channels: 128
  seq_length: 4096
parallel:
  context_parallel_size: 1
)";

AttentionKernel kernel(const char* gpu, std::optional<std::string> te, AttentionBackend b) {
  return resolve_attention_kernel(gpu, te, b).kernel;
}

/// The efficiency of point (hd, n × n, causal) of `t`; -1 when absent.
double at(const std::vector<EfficiencyPoint>& t, int64_t hd, int64_t n, bool causal) {
  for (const auto& p : t)
    if (p.head_dim == hd && p.q_rows == n && p.kv_rows == n && p.causal == causal) return p.efficiency;
  return -1;
}

}  // namespace

TEST_CASE("config: resolve_attention_kernel follows TE's backend choice per GPU, backend and TE version",
          "[config][attention_backend]") {
  using K = AttentionKernel;
  using B = AttentionBackend;
  // Hopper: auto prefers cuDNN fused attention; flash is FA3 from TE 1.11 (and when no version is given).
  CHECK(kernel("H100-SXM5-80GB", std::nullopt, B::auto_select) == K::cudnn_fused_attention);
  CHECK(kernel("H100-SXM5-80GB", std::string("2.4"), B::auto_select) == K::cudnn_fused_attention);
  CHECK(kernel("H100-SXM5-80GB", std::string("2.4"), B::flash) == K::flash_attention_3);
  CHECK(kernel("H100-SXM5-80GB", std::string("1.11"), B::flash) == K::flash_attention_3);
  CHECK(kernel("H100-SXM5-80GB", std::string("1.10.0"), B::flash) == K::flash_attention_2);
  CHECK(kernel("H100-SXM5-80GB", std::nullopt, B::flash) == K::flash_attention_3);
  CHECK(kernel("H200-SXM-141GB", std::string("2.0"), B::flash) == K::flash_attention_3);
  CHECK(kernel("H100-SXM5-80GB", std::string("1.10"), B::fused) == K::cudnn_fused_attention);
  // Ampere: FlashAttention-2 for auto and flash (no FA3 below sm90), cuDNN when asked.
  CHECK(kernel("A100-SXM4-80GB", std::string("2.4"), B::auto_select) == K::flash_attention_2);
  CHECK(kernel("A100-SXM4-80GB", std::string("2.4"), B::flash) == K::flash_attention_2);
  CHECK(kernel("A100-SXM4-80GB", std::nullopt, B::fused) == K::cudnn_fused_attention);
  // Blackwell: FusedAttention preference on sm90+; FA3 is sm90 only.
  CHECK(kernel("B200-180GB", std::nullopt, B::auto_select) == K::cudnn_fused_attention);
  CHECK(kernel("B200-180GB", std::string("2.4"), B::flash) == K::flash_attention_2);
  const auto why = resolve_attention_kernel("H100-SXM5-80GB", std::string("1.10"), B::flash);
  CHECK(why.reason.find("FlashAttention-3 needs TE >= 1.11") != std::string::npos);
  CHECK(to_string(K::cudnn_fused_attention) == "cuDNN fused attention");
  CHECK(parse_attention_backend("auto") == B::auto_select);
  CHECK(parse_attention_backend(to_string(B::fused)) == B::fused);
  CHECK_FALSE(parse_attention_backend("cudnn").has_value());
}

TEST_CASE("config: the kernel tables hold the published curves divided by the peak", "[config][attention_backend]") {
  const auto cudnn = attention_kernel_tables("H100-SXM5-80GB", AttentionKernel::cudnn_fused_attention);
  const auto fa3 = attention_kernel_tables("H100-SXM5-80GB", AttentionKernel::flash_attention_3);
  const auto fa2 = attention_kernel_tables("H100-SXM5-80GB", AttentionKernel::flash_attention_2);
  // 3 head dims × 2 mask classes × 6 × 6 blocks.
  REQUIRE(cudnn.forward.size() == 216);
  REQUIRE(cudnn.backward.size() == 216);
  // Published hd128 points (TFLOP/s / 989.4): cuDNN fwd causal 4K 518, FA3 bwd no mask 16K 561, FA2 fwd 512 309.
  CHECK(at(cudnn.forward, 128, 4096, true) == 518 / 989.4);
  CHECK(at(fa3.backward, 128, 16384, false) == 561 / 989.4);
  CHECK(at(fa2.forward, 128, 512, false) == 309 / 989.4);
  // Assumption: bwd causal = bwd no mask · fwd causal / fwd no mask (FA2 at 1K: 260 · 260 / 350).
  CHECK(at(fa2.backward, 128, 1024, true) == Approx(260.0 * 260 / 350 / 989.4).epsilon(1e-12));
  // Head dim 64 endpoints as published (FA3 fwd 333 → 497, cuDNN bwd 266 → 433).
  CHECK(at(fa3.forward, 64, 512, false) == Approx(333 / 989.4).epsilon(1e-12));
  CHECK(at(fa3.forward, 64, 16384, false) == Approx(497 / 989.4).epsilon(1e-12));
  CHECK(at(cudnn.backward, 64, 16384, false) == Approx(433 / 989.4).epsilon(1e-12));
  // Head dim 256, FA3 fwd causal 286 → 642.
  CHECK(at(fa3.forward, 256, 512, true) == Approx(286 / 989.4).epsilon(1e-12));
  CHECK(at(fa3.forward, 256, 16384, true) == Approx(642 / 989.4).epsilon(1e-12));
  // A100: FA2 paper's 223.5 TFLOP/s forward and 191.5 backward (hd128, no mask, 16K) of 312.
  const auto a100 = attention_kernel_tables("A100-SXM4-80GB", AttentionKernel::flash_attention_2);
  CHECK(at(a100.forward, 128, 16384, false) == Approx(223.5 / 312).epsilon(1e-12));
  CHECK(at(a100.backward, 128, 16384, false) == Approx(191.5 / 312).epsilon(1e-12));
  // B200 has no published curves: no tables, the preset keeps its scalar efficiencies.
  CHECK(attention_kernel_tables("B200-180GB", AttentionKernel::cudnn_fused_attention).forward.empty());
  const auto b200 = cluster_preset("dgx-b200", 1);
  REQUIRE(b200.has_value());
  CHECK(b200->gpu.attn_fwd_table.empty());
  CHECK(b200->gpu.attn_fwd_efficiency == 0.6);
}

TEST_CASE("config: model.attention_backend picks the preset's tables; the scenario's own efficiencies win",
          "[config][attention_backend]") {
  const auto fa3 = attention_kernel_tables("H100-SXM5-80GB", AttentionKernel::flash_attention_3);
  const auto fa2 = attention_kernel_tables("H100-SXM5-80GB", AttentionKernel::flash_attention_2);
  const auto s = load_scenario_text(kScenario, "s.yaml", {"model.attention_backend=flash", "parallel.te_version=2.4"});
  CHECK(s.model.attention_backend == AttentionBackend::flash);
  CHECK(resolve_attention_kernel(s).kernel == AttentionKernel::flash_attention_3);
  CHECK(at(s.cluster.gpu.attn_fwd_table, 128, 4096, true) == at(fa3.forward, 128, 4096, true));
  const auto old = load_scenario_text(kScenario, "s.yaml", {"model.attention_backend=flash", "parallel.te_version=1.10"});
  CHECK(at(old.cluster.gpu.attn_bwd_table, 128, 2048, false) == at(fa2.backward, 128, 2048, false));
  // A scalar in cluster.gpu replaces that direction's table; the other keeps the kernel's.
  const auto own = load_scenario_text(std::string(kScenario) + "cluster:\n  preset: dgx-h100\n  gpu:\n"
                                                               "    attn_fwd_efficiency: 0.5\n",
                                      "s.yaml", {"model.attention_backend=flash"});
  CHECK(own.cluster.gpu.attn_fwd_table.empty());
  CHECK(own.cluster.gpu.attn_fwd_efficiency == 0.5);
  CHECK(at(own.cluster.gpu.attn_bwd_table, 128, 4096, false) == at(fa3.backward, 128, 4096, false));
  // The default is auto (cuDNN on H100), and to_yaml writes the backend so a reload is the same scenario.
  const auto def = load_scenario_text(kScenario, "s.yaml");
  CHECK(def.model.attention_backend == AttentionBackend::auto_select);
  const std::string text = to_yaml(s);
  CHECK(text.find("attention_backend: flash") != std::string::npos);
  const auto back = load_scenario_text(text, "back.yaml");
  CHECK(back.model.attention_backend == AttentionBackend::flash);
  CHECK(to_yaml(back) == text);
}

TEST_CASE("config: a bad model.attention_backend names the key and the fix", "[config][attention_backend]") {
  std::string msg;
  try {
    load_scenario_text(kScenario, "s.yaml", {"model.attention_backend=cudnn"});
  } catch (const InputError& e) {
    msg = e.what();
  }
  CHECK(msg.find("model.attention_backend: unknown value 'cudnn'") != std::string::npos);
  CHECK(msg.find("fix: use one of: auto, flash, fused") != std::string::npos);
}
