#include "hcpsim/config/attention_backend.hpp"

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/config/validation.hpp"

namespace hcpsim {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

/// Source: NVIDIA datasheets: H100 and H200 are Hopper (compute capability 9.0), B200 Blackwell (10.0), A100
/// Ampere (8.0).
bool is_hopper(const std::string& gpu) { return starts_with(gpu, "H100") || starts_with(gpu, "H200"); }
bool is_ampere(const std::string& gpu) { return starts_with(gpu, "A100"); }

/// Source: TE 1.11 added FlashAttention-3 (TransformerEngine PR #1019, first in tag v1.11).
bool te_has_fa3(const std::optional<std::string>& te_version) {
  if (!te_version) return true;
  const std::vector<int> v = parse_version(*te_version);
  return v.empty() || v >= std::vector<int>{1, 11, 0};
}

}  // namespace

std::string to_string(AttentionBackend b) {
  switch (b) {
    case AttentionBackend::auto_select: return "auto";
    case AttentionBackend::flash: return "flash";
    case AttentionBackend::fused: return "fused";
  }
  return "auto";
}

std::optional<AttentionBackend> parse_attention_backend(std::string_view s) {
  if (s == "auto") return AttentionBackend::auto_select;
  if (s == "flash") return AttentionBackend::flash;
  if (s == "fused") return AttentionBackend::fused;
  return std::nullopt;
}

std::string to_string(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::flash_attention_2: return "FlashAttention-2";
    case AttentionKernel::flash_attention_3: return "FlashAttention-3";
    case AttentionKernel::cudnn_fused_attention: return "cuDNN fused attention";
  }
  return "cuDNN fused attention";
}

AttentionKernelChoice resolve_attention_kernel(const std::string& gpu_name, const std::optional<std::string>& te_version,
                                               AttentionBackend backend) {
  const std::string te = te_version ? "TE " + *te_version : "a recent TE (parallel.te_version not set)";
  switch (backend) {
    case AttentionBackend::fused:
      return {AttentionKernel::cudnn_fused_attention, "attention_backend fused: TE runs cuDNN fused attention only"};
    case AttentionBackend::flash:
      if (is_hopper(gpu_name) && te_has_fa3(te_version))
        return {AttentionKernel::flash_attention_3,
                "attention_backend flash on Hopper with " + te + ": TE >= 1.11 runs FlashAttention-3"};
      if (is_hopper(gpu_name))
        return {AttentionKernel::flash_attention_2,
                "attention_backend flash with " + te + ": FlashAttention-3 needs TE >= 1.11"};
      return {AttentionKernel::flash_attention_2,
              "attention_backend flash on " + gpu_name + ": TE runs FlashAttention-3 on sm90 only"};
    case AttentionBackend::auto_select: break;
  }
  if (is_ampere(gpu_name))
    return {AttentionKernel::flash_attention_2,
            "attention_backend auto on sm80: TE prefers FlashAttention below sm90"};
  return {AttentionKernel::cudnn_fused_attention,
          "attention_backend auto on sm90+: TE prefers FusedAttention on Hopper+"};
}

AttentionKernelChoice resolve_attention_kernel(const Scenario& scenario) {
  return resolve_attention_kernel(scenario.cluster.gpu.name, scenario.parallel.te_version,
                                  scenario.model.attention_backend);
}

void apply_attention_kernel(GpuSpec& gpu, AttentionKernel kernel) {
  AttentionTables t = attention_kernel_tables(gpu.name, kernel);
  if (t.forward.empty()) return;
  gpu.attn_fwd_table = std::move(t.forward);
  gpu.attn_bwd_table = std::move(t.backward);
}

}  // namespace hcpsim
