#pragma once
/// Scoped enums with the field's spellings, and their to_string/parse pairs.

#include <optional>
#include <string>
#include <string_view>

namespace hcpsim {

/// Transformer Engine `cp_comm_type`. Source: TE context_parallel.py attn_forward_func_with_cp.
enum class CpCommType { p2p, a2a, a2a_p2p, all_gather };
/// Megatron `attn_mask_type` values that hcpsim models.
enum class AttnMaskType { causal, no_mask };
/// TE `qkv_format`; thd is recognised but not modelled yet.
enum class QkvFormat { bshd, sbhd, thd };
/// Element types. fp64 exists only inside the oracle.
enum class Dtype { fp64, fp32, bf16, fp16 };

std::string to_string(CpCommType v);
std::string to_string(AttnMaskType v);
std::string to_string(QkvFormat v);
std::string to_string(Dtype v);

/// Parse the field spelling ("a2a+p2p", "causal", "bshd", "bf16"); std::nullopt if unknown.
std::optional<CpCommType> parse_cp_comm_type(std::string_view s);
std::optional<AttnMaskType> parse_attn_mask_type(std::string_view s);
std::optional<QkvFormat> parse_qkv_format(std::string_view s);
/// "fp64", "fp32", "bf16", "fp16" in any case ("FP16" too); std::nullopt if unknown.
std::optional<Dtype> parse_dtype(std::string_view s);

/// Size of one element in bytes (bf16/fp16 2, fp32 4, fp64 8).
int dtype_size_bytes(Dtype d);

}  // namespace hcpsim
