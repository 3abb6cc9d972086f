#include "hcpsim/config/scenario.hpp"

#include <algorithm>

#include "hcpsim/config/megatron_defaults.hpp"

namespace hcpsim {

bool ModelConfig::has_sliding_window() const {
  // TE's check_set_window_size: (-1, 0) (causal) and (-1, -1) (no mask) are no window; every window has left >= 0.
  return window_size && window_size->size() == 2 && (*window_size)[0] >= 0;
}

int64_t ModelConfig::hidden() const { return hidden_size ? *hidden_size : num_attention_heads * kv_channels; }

int64_t ModelConfig::ffn_hidden() const {
  return ffn_hidden_size ? *ffn_hidden_size
                         : default_ffn_hidden_size(hidden(), gated_linear_unit, MegatronConfigSource::megatron_lm_arguments);
}

std::string to_string(RecomputeGranularity g) {
  switch (g) {
    case RecomputeGranularity::none: return "none";
    case RecomputeGranularity::selective: return "selective";
    case RecomputeGranularity::full: return "full";
  }
  return "none";
}

std::string to_string(RecomputeMethod m) { return m == RecomputeMethod::block ? "block" : "uniform"; }
std::string to_string(Fp8Recipe r) { return r == Fp8Recipe::tensorwise ? "tensorwise" : "delayed"; }

std::vector<CpCommType> ParallelConfig::distinct_cp_comm_types() const {
  std::vector<CpCommType> out;
  for (CpCommType t : cp_comm_type)
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  return out;
}

SourceLoc Scenario::loc(const std::string& key) const {
  std::string k = key;
  while (!k.empty()) {
    auto it = locations.find(k);
    if (it != locations.end()) return it->second;
    auto dot = k.rfind('.');
    if (dot == std::string::npos) break;
    k.resize(dot);
  }
  SourceLoc file_only;
  file_only.file = source_path;
  return file_only;
}

}  // namespace hcpsim
