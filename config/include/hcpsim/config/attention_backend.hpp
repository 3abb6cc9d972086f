#pragma once
/// Which attention kernel runs: Megatron-Core's `--attention-backend` (model.attention_backend) resolved against the
/// GPU and the Transformer Engine version the way TE's get_attention_backend picks between FlashAttention and
/// cuDNN fused attention, and the per-kernel efficiency tables the presets use.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/types.hpp"

namespace hcpsim {

struct Scenario;

/// model.attention_backend. Source: Megatron-Core AttnBackend (--attention-backend auto|flash|fused), which sets
/// TE's NVTE_FLASH_ATTN / NVTE_FUSED_ATTN: flash = FlashAttention only, fused = cuDNN fused attention only,
/// auto = both allowed and TE chooses.
enum class AttentionBackend { auto_select, flash, fused };
/// "auto" | "flash" | "fused".
std::string to_string(AttentionBackend b);
/// Inverse of to_string; std::nullopt for anything else.
std::optional<AttentionBackend> parse_attention_backend(std::string_view s);

/// The kernel that computes one attention block.
enum class AttentionKernel { flash_attention_2, flash_attention_3, cudnn_fused_attention };
/// "FlashAttention-2" | "FlashAttention-3" | "cuDNN fused attention".
std::string to_string(AttentionKernel k);

/// A resolved kernel and why (printed by simulate).
struct AttentionKernelChoice {
  AttentionKernel kernel = AttentionKernel::cudnn_fused_attention;
  std::string reason;
  /// False when TE's filters leave no backend: TE raises "No dot product attention backend is available for the
  /// provided inputs" (or attn_forward_func_with_cp asserts); `kernel` is then meaningless.
  bool available = true;
  /// Why TE's filters disabled a backend, one entry per disabled backend ("FusedAttention: ..."), in filter order.
  std::vector<std::string> disabled;
  /// The scenario key that breaks the first rule in `disabled` (e.g. "model.num_query_groups"), "" if none.
  std::string culprit_key;
};

/// What TE's backend filters look at for one DotProductAttention call under context parallelism. Head counts are
/// per TP rank (TE sees query_layer.shape[-2]), before the a2a scatter.
struct AttentionCall {
  CpCommType cp_comm_type = CpCommType::p2p;
  int64_t cp_size = 1;                ///< context_parallel_size (context parallelism when > 1)
  QkvFormat qkv_format = QkvFormat::sbhd;
  int64_t num_heads = 1;              ///< query heads per TP rank
  int64_t num_gqa_groups = 1;         ///< KV heads per TP rank
  int64_t head_dim_qk = 64;
  int64_t head_dim_v = 64;
  AttnMaskType attn_mask_type = AttnMaskType::causal;
  Dtype qkv_dtype = Dtype::bf16;      ///< the activations' dtype (model.params_dtype)
  bool sliding_window = false;
  bool attention_bias = false;
  /// qkv_format thd with TE's pad_between_seqs resolved true (thd_packing.hpp scenario_packing).
  bool pad_between_seqs = false;
};

/// The kernel TE would run for `backend` on the GPU named `gpu_name` (a preset GpuSpec::name: "H100…", "H200…",
/// "A100…", "B200…") with TE `te_version` ("major.minor[.patch]"; absent = a recent TE, ≥ 1.11).
/// Rules (Source: TransformerEngine transformer_engine/pytorch/attention/dot_product_attention/utils.py,
/// get_attention_backend; FA3 support added in TE 1.11, PR #1019 "Add support for flash-attn 3"):
/// - auto on sm90+ (H100, H200, B200): cuDNN fused attention — TE disables FlashAttention "to give FusedAttention
///   preference on Hopper+" whenever both are available, whether FA3 is installed or not;
/// - auto on sm80 (A100): FlashAttention-2 — no such preference below sm90, and FlashAttention is chosen first;
/// - flash: FlashAttention-3 on sm90 (H100, H200) with TE ≥ 1.11 (assumption: the flash_attn_3 package is
///   installed, as TE recommends on Hopper), else FlashAttention-2 (TE disables FA3 on compute capability ≠ 9.0);
/// - fused: cuDNN fused attention.
/// A GPU hcpsim does not know resolves by the same rules as sm90 for auto; its efficiencies come from cluster.gpu.
/// @throws nothing; a malformed te_version counts as absent (validation reports it).
AttentionKernelChoice resolve_attention_kernel(const std::string& gpu_name, const std::optional<std::string>& te_version,
                                               AttentionBackend backend);
/// The same, after TE's backend-availability filters for `call` (Source: TransformerEngine
/// transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend, "Filter: Context
/// parallelism", "Filter: Head dimension", the dtype filter; context_parallel.py attn_forward_func_with_cp's
/// asserts). With context parallelism:
/// - UnfusedDotProductAttention does not support CP, so only FusedAttention or FlashAttention can run;
/// - both need fp16/bf16 activations;
/// - FusedAttention is disabled for a2a / a2a+p2p when num_heads or num_gqa_groups (per TP rank) is odd, and
///   for sliding windows with p2p / a2a+p2p; FusedAttention head dims: multiples of 8, at most 256 (cuDNN on sm90+;
///   128 on sm80);
/// - FlashAttention with CP rejects qkv_format sbhd (attn_forward_func_with_cp asserts "Context parallelism does
///   not support FlashAttention backend with qkv_format = 'sbhd'"); FlashAttention-2 head dims: padded to a
///   multiple of 8, at most 256; FlashAttention-3: head_dim_qk at most 256;
/// - qkv_format thd with pad_between_seqs disables FlashAttention-2, and FlashAttention-3 before TE v2.16 (utils.py
///   "Filter: QKV layout"; v2.16 runs FA3 with seqused_q / seqused_k);
/// - `backend` fused / flash leaves only that backend. auto picks as the overload above among those left.
/// `available` is false when none is left; `disabled` says why each was filtered, `culprit_key` names the key.
AttentionKernelChoice resolve_attention_kernel(const std::string& gpu_name, const std::optional<std::string>& te_version,
                                               AttentionBackend backend, const AttentionCall& call);
/// The same for a loaded scenario (its cluster.gpu.name, parallel.te_version and model.attention_backend), without
/// the legality filters (the kernel whose efficiency tables the simulator uses).
AttentionKernelChoice resolve_attention_kernel(const Scenario& scenario);
/// The scenario's AttentionCall for the layers with cp_comm_type `type` (heads per TP rank, params_dtype, ...).
AttentionCall attention_call(const Scenario& scenario, CpCommType type);
/// resolve_attention_kernel with the legality filters for the layers with cp_comm_type `type`.
AttentionKernelChoice resolve_attention_kernel(const Scenario& scenario, CpCommType type);

/// Forward and backward efficiency tables of `kernel` on the GPU named `gpu_name` (grids over head dim {64, 128,
/// 256} × q_rows × kv_rows {512 … 16384} × causal, in table_efficiency's form), or empty tables for a GPU without
/// published curves (B200 and unknown GPUs keep their scalar efficiencies). Sources: attention_tables.cpp.
struct AttentionTables {
  std::vector<EfficiencyPoint> forward;
  std::vector<EfficiencyPoint> backward;
};
AttentionTables attention_kernel_tables(const std::string& gpu_name, AttentionKernel kernel);

/// Sets gpu.attn_fwd_table / attn_bwd_table to `kernel`'s tables where the GPU has them (else leaves the GPU as is).
void apply_attention_kernel(GpuSpec& gpu, AttentionKernel kernel);

}  // namespace hcpsim
