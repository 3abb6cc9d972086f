#include "hcpsim/config/attention_backend.hpp"

#include <algorithm>
#include <sstream>
#include <utility>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/config/validation.hpp"

namespace hcpsim {

std::vector<int> parse_version(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (part.empty() || part.size() > 6) return {};
    for (char ch : part)
      if (ch < '0' || ch > '9') return {};
    out.push_back(std::stoi(part));
  }
  if (out.size() < 2 || out.size() > 3) return {};
  while (out.size() < 3) out.push_back(0);
  return out;
}

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

/// Source: NVIDIA datasheets: H100 and H200 are Hopper (compute capability 9.0), B200 Blackwell (10.0), A100
/// Ampere (8.0).
bool is_hopper(const std::string& gpu) { return starts_with(gpu, "H100") || starts_with(gpu, "H200"); }
bool is_ampere(const std::string& gpu) { return starts_with(gpu, "A100"); }

/// TE `te_version` is `need` or newer; absent or malformed counts as a recent TE (validation reports malformed).
bool te_at_least(const std::optional<std::string>& te_version, const std::vector<int>& need) {
  if (!te_version) return true;
  const std::vector<int> v = parse_version(*te_version);
  return v.empty() || v >= need;
}

/// Source: TE 1.11 added FlashAttention-3 (TransformerEngine PR #1019, first in tag v1.11).
bool te_has_fa3(const std::optional<std::string>& te_version) { return te_at_least(te_version, {1, 11, 0}); }

std::string str(int64_t v) { return std::to_string(v); }

AttentionKernelChoice choice(AttentionKernel k, std::string reason) {
  AttentionKernelChoice c;
  c.kernel = k;
  c.reason = std::move(reason);
  return c;
}

bool is_blackwell(const std::string& gpu) { return starts_with(gpu, "B200"); }

/// One backend's verdict: usable, or why TE disables it and the key that breaks the rule.
struct Verdict {
  bool ok = true;
  std::string why, key;
  void disable(std::string reason, std::string culprit) {
    if (!ok) return;  // the first filter that fires is the one TE logs
    ok = false;
    why = std::move(reason);
    key = std::move(culprit);
  }
};

std::string heads_text(const AttentionCall& c) {
  return "num_heads " + str(c.num_heads) + ", num_gqa_groups " + str(c.num_gqa_groups) + " per TP rank";
}

/// The key to blame for an odd per-TP-rank head count: the head count itself when the global count is odd,
/// else TP (it made the per-rank count odd).
std::string odd_heads_key(const AttentionCall& c) {
  if (c.num_gqa_groups % 2 != 0) return "model.num_query_groups";
  return "model.num_attention_heads";
}

/// FusedAttention (cuDNN F16_arbitrary_seqlen, training). Source: TE utils.py get_attention_backend "Filter:
/// Context parallelism"; transformer_engine/common/fused_attn/fused_attn.cpp nvte_get_fused_attn_backend (head
/// dims: multiples of 8, ≤ 128; ≤ 256 on sm90 with cuDNN ≥ 9.5; (192, 128) and (256, 256) on sm100).
Verdict fused_verdict(const std::string& gpu, const AttentionCall& c) {
  Verdict v;
  const int64_t dk = c.head_dim_qk, dv = c.head_dim_v;
  const bool dims8 = dk % 8 == 0 && dv % 8 == 0;
  const bool dims_ok = dims8 && ((dk <= 128 && dv <= 128) || (is_hopper(gpu) && dk <= 256 && dv <= 256) ||
                                 (is_blackwell(gpu) && ((dk == 192 && dv == 128) || (dk == 256 && dv == 256))));
  if (!dims_ok)
    v.disable("head dims (kv_channels " + str(dk) + ", kv_channels_v " + str(dv) + ") unsupported by cuDNN on " +
                  gpu + " (multiples of 8, at most 128; 256 on sm90)",
              dk % 8 != 0 || dk > 128 ? "model.kv_channels" : "model.kv_channels_v");
  const bool a2a = c.cp_comm_type == CpCommType::a2a || c.cp_comm_type == CpCommType::a2a_p2p;
  if (c.sliding_window && (c.cp_comm_type == CpCommType::p2p || c.cp_comm_type == CpCommType::a2a_p2p))
    v.disable("no sliding window attention with cp_comm_type " + to_string(c.cp_comm_type), "model.window_size");
  if (a2a && (c.num_heads % 2 != 0 || c.num_gqa_groups % 2 != 0))
    v.disable("cp_comm_type " + to_string(c.cp_comm_type) + " requires num_heads and num_gqa_groups divisible by 2 (" +
                  heads_text(c) + ")",
              odd_heads_key(c));
  return v;
}

/// FlashAttention with CP. Source: TE context_parallel.py attn_forward_func_with_cp ("Context parallelism does
/// not support FlashAttention backend with qkv_format = 'sbhd'!"); utils.py head-dim filters (FA2: max(dk, dv)
/// padded to a multiple of 8, at most 256; FA3: head_dim_qk at most 256).
Verdict flash_verdict(const AttentionCall& c) {
  Verdict v;
  if (c.qkv_format == QkvFormat::sbhd)
    v.disable("context parallelism does not support FlashAttention with qkv_format sbhd", "model.qkv_format");
  if (std::max(c.head_dim_qk, c.head_dim_v) > 256)
    v.disable("head dims above 256 (kv_channels " + str(c.head_dim_qk) + ", kv_channels_v " + str(c.head_dim_v) + ")",
              c.head_dim_qk > 256 ? "model.kv_channels" : "model.kv_channels_v");
  if (c.attention_bias) v.disable("no attention bias with context parallelism", "model.attention_bias");
  return v;
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
      return choice(AttentionKernel::cudnn_fused_attention,
                    "attention_backend fused: TE runs cuDNN fused attention only");
    case AttentionBackend::flash:
      if (is_hopper(gpu_name) && te_has_fa3(te_version))
        return choice(AttentionKernel::flash_attention_3,
                "attention_backend flash on Hopper with " + te + ": TE >= 1.11 runs FlashAttention-3");
      if (is_hopper(gpu_name))
        return choice(AttentionKernel::flash_attention_2,
                "attention_backend flash with " + te + ": FlashAttention-3 needs TE >= 1.11");
      return choice(AttentionKernel::flash_attention_2,
              "attention_backend flash on " + gpu_name + ": TE runs FlashAttention-3 on sm90 only");
    case AttentionBackend::auto_select: break;
  }
  if (is_ampere(gpu_name))
    return choice(AttentionKernel::flash_attention_2,
            "attention_backend auto on sm80: TE prefers FlashAttention below sm90");
  return choice(AttentionKernel::cudnn_fused_attention,
          "attention_backend auto on sm90+: TE prefers FusedAttention on Hopper+");
}

AttentionKernelChoice resolve_attention_kernel(const Scenario& scenario) {
  return resolve_attention_kernel(scenario.cluster.gpu.name, scenario.parallel.te_version,
                                  scenario.model.attention_backend);
}

AttentionKernelChoice resolve_attention_kernel(const std::string& gpu_name, const std::optional<std::string>& te_version,
                                               AttentionBackend backend, const AttentionCall& call) {
  AttentionKernelChoice base = resolve_attention_kernel(gpu_name, te_version, backend);
  if (call.cp_size <= 1) return base;  // without CP UnfusedDotProductAttention can always run
  // Masks: TE's CP filter rejects causal_bottom_right and causal cross-attention (max_seqlen_q != max_seqlen_kv)
  // for both backends; hcpsim's masks (causal, no_mask) are self-attention with top-left causality and pass it.
  // Source: utils.py: UnfusedDotProductAttention "does not support context parallelism"; FlashAttention and
  // FusedAttention run fp16/bf16 only.
  Verdict fused = fused_verdict(gpu_name, call), flash = flash_verdict(call);
  // Source: TE utils.py get_attention_backend "Filter: QKV layout": thd with pad_between_seqs disables
  // FlashAttention-2 (and FlashAttention-3 up to v2.15; from v2.16 FA3 runs it through seqused_q / seqused_k).
  if (call.qkv_format == QkvFormat::thd && call.pad_between_seqs) {
    const bool fa3 = is_hopper(gpu_name) && te_has_fa3(te_version);
    if (!fa3 || !te_at_least(te_version, {2, 16, 0}))
      flash.disable(std::string("qkv_format thd with padding between sequences (pad_between_seqs): TE runs no ") +
                        (fa3 ? "FlashAttention before v2.16" : "FlashAttention-2"),
                    "model.pad_between_seqs");
  }
  if (call.qkv_dtype != Dtype::bf16 && call.qkv_dtype != Dtype::fp16) {
    const std::string why = "qkv_dtype " + to_string(call.qkv_dtype) + " (fp16 or bf16 only)";
    fused.disable(why, "model.params_dtype");
    flash.disable(why, "model.params_dtype");
  }
  if (backend == AttentionBackend::flash) fused.disable("attention_backend flash", "model.attention_backend");
  if (backend == AttentionBackend::fused) flash.disable("attention_backend fused", "model.attention_backend");
  AttentionKernelChoice out = base;
  if (!fused.ok) out.disabled.push_back("FusedAttention: " + fused.why);
  if (!flash.ok) out.disabled.push_back("FlashAttention: " + flash.why);
  const bool base_fused = base.kernel == AttentionKernel::cudnn_fused_attention;
  if ((base_fused && fused.ok) || (!base_fused && flash.ok)) return out;
  if (fused.ok) {
    out.kernel = AttentionKernel::cudnn_fused_attention;
    out.reason = "FlashAttention disabled by TE's filters, so cuDNN fused attention runs";
    return out;
  }
  if (flash.ok) {
    out.kernel = is_hopper(gpu_name) && te_has_fa3(te_version) ? AttentionKernel::flash_attention_3
                                                               : AttentionKernel::flash_attention_2;
    out.reason = "FusedAttention disabled by TE's filters, so FlashAttention runs";
    return out;
  }
  out.available = false;
  out.reason = "TE raises \"No dot product attention backend is available for the provided inputs\"";
  // Blame the rule that removed the backend TE would have picked; a user-forced backend blames the other.
  const bool blame_fused = base_fused ? fused.key != "model.attention_backend" : flash.key == "model.attention_backend";
  out.culprit_key = blame_fused ? fused.key : flash.key;
  return out;
}

AttentionCall attention_call(const Scenario& s, CpCommType type) {
  AttentionCall c;
  const AttentionShape shape = attention_shape(s);  // heads per TP rank, as TE sees them
  c.cp_comm_type = type;
  c.cp_size = s.parallel.context_parallel_size;
  c.qkv_format = s.model.qkv_format;
  c.num_heads = shape.heads_q;
  c.num_gqa_groups = shape.heads_kv;
  c.head_dim_qk = shape.head_dim_qk;
  c.head_dim_v = shape.head_dim_v;
  c.attn_mask_type = s.model.attn_mask_type;
  c.qkv_dtype = s.model.params_dtype;
  c.sliding_window = s.model.has_sliding_window();
  c.attention_bias = s.model.attention_bias;
  c.pad_between_seqs = shape.packing.thd() && shape.packing.pad_between_seqs;
  return c;
}

AttentionKernelChoice resolve_attention_kernel(const Scenario& s, CpCommType type) {
  return resolve_attention_kernel(s.cluster.gpu.name, s.parallel.te_version, s.model.attention_backend,
                                  attention_call(s, type));
}

void apply_attention_kernel(GpuSpec& gpu, AttentionKernel kernel) {
  AttentionTables t = attention_kernel_tables(gpu.name, kernel);
  if (t.forward.empty()) return;
  gpu.attn_fwd_table = std::move(t.forward);
  gpu.attn_bwd_table = std::move(t.backward);
}

}  // namespace hcpsim
