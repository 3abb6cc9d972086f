#include "hcpsim/core/types.hpp"

#include <cctype>
#include <string>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

std::string to_string(CpCommType v) {
  switch (v) {
    case CpCommType::p2p: return "p2p";
    case CpCommType::a2a: return "a2a";
    case CpCommType::a2a_p2p: return "a2a+p2p";
    case CpCommType::all_gather: return "all_gather";
  }
  return "?";
}
std::string to_string(AttnMaskType v) { return v == AttnMaskType::causal ? "causal" : "no_mask"; }
std::string to_string(QkvFormat v) {
  switch (v) {
    case QkvFormat::bshd: return "bshd";
    case QkvFormat::sbhd: return "sbhd";
    case QkvFormat::thd: return "thd";
  }
  return "?";
}
std::string to_string(Dtype v) {
  switch (v) {
    case Dtype::fp64: return "fp64";
    case Dtype::fp32: return "fp32";
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
  }
  return "?";
}

std::optional<CpCommType> parse_cp_comm_type(std::string_view s) {
  if (s == "p2p") return CpCommType::p2p;
  if (s == "a2a") return CpCommType::a2a;
  if (s == "a2a+p2p") return CpCommType::a2a_p2p;
  if (s == "all_gather") return CpCommType::all_gather;
  return std::nullopt;
}
std::optional<AttnMaskType> parse_attn_mask_type(std::string_view s) {
  if (s == "causal") return AttnMaskType::causal;
  if (s == "no_mask") return AttnMaskType::no_mask;
  return std::nullopt;
}
std::optional<QkvFormat> parse_qkv_format(std::string_view s) {
  if (s == "bshd") return QkvFormat::bshd;
  if (s == "sbhd") return QkvFormat::sbhd;
  if (s == "thd") return QkvFormat::thd;
  return std::nullopt;
}
std::optional<Dtype> parse_dtype(std::string_view s) {
  std::string lower(s);  // "FP16" as well: a command line's case is the user's
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "fp64") return Dtype::fp64;
  if (lower == "fp32") return Dtype::fp32;
  if (lower == "bf16") return Dtype::bf16;
  if (lower == "fp16") return Dtype::fp16;
  return std::nullopt;
}

int dtype_size_bytes(Dtype d) {
  switch (d) {
    case Dtype::fp64: return 8;
    case Dtype::fp32: return 4;
    case Dtype::bf16:
    case Dtype::fp16: return 2;
  }
  HCPSIM_ASSERT(false, "unknown dtype");
}

}  // namespace hcpsim
