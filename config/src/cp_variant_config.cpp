#include "hcpsim/config/cp_variant_config.hpp"

#include <map>
#include <utility>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// The built-in config rows. TE versions: docs/algorithm.md §8.5 (first commit of each cp_comm_type); sliding
/// windows and bias: TE attn_forward_func_with_cp's asserts.
std::vector<CpVariantConfig> builtin_config_rows() {
  CpVariantConfig p2p;
  p2p.name = "p2p";
  p2p.min_te_version = {1, 0, 0};  // 479dbb73a (#362)
  p2p.attention_bias = true;
  // Up to v1.6 attn_forward_func_with_cp took causal / no_mask only and FlashAttention asserted "thd format not
  // supported with context parallelism!"; THD + CP came with 476f659e8 (first in v1.7).
  p2p.thd_min_te_version = {1, 7, 0};
  p2p.thd_te_source = "476f659e8, PR #641";
  p2p.layout = scenario_cp_layout;

  CpVariantConfig ag = p2p;
  ag.name = "all_gather";
  ag.min_te_version = {1, 10, 0};  // 304078568 (#1060)
  ag.sliding_window = true;
  ag.attention_bias = false;
  ag.thd_min_te_version = {2, 18, 0};
  ag.thd_te_source = "PR #2829";

  CpVariantConfig a2a = ag;
  a2a.name = "a2a";
  a2a.min_te_version = {1, 11, 0};  // 40dda924a (#1160)
  a2a.a2a_size_key = "parallel.context_parallel_size";
  a2a.a2a_size_what = "context_parallel_size";
  // AttnFuncWithCPAndQKVOA2A asserted qkv_format != "thd" ("thd format is not supported!") up to v2.9.
  a2a.thd_min_te_version = {2, 10, 0};
  a2a.thd_te_source = "e52bdb414, PR #2220";
  a2a.head_split_fix = [](int64_t, int64_t hkv_tp) {
    return "use cp_comm_type a2a+p2p with an a2a size that divides " + str(hkv_tp) + ", or p2p";
  };

  CpVariantConfig hier = a2a;
  hier.name = "a2a+p2p";
  hier.min_te_version = {1, 12, 0};  // c24a4c416 (#1209); Megatron asserts >= 1.12.0
  hier.sliding_window = false;
  // attn_forward_func_with_cp asserted "thd format is not supported with hierarchical CP implementation yet!" in
  // every release up to v2.18, before its fallback of [1, P] / [A, 1] to p2p / a2a.
  hier.thd_min_te_version = {2, 19, 0};
  hier.thd_te_source = "8ff60f8de, PR #3290, after v2.18";
  hier.a2a_size_key = "parallel.hierarchical_context_parallel_sizes";
  hier.a2a_size_what = "the a2a size A";
  hier.head_split_fix = [](int64_t h_tp, int64_t hkv_tp) {
    return "choose A dividing " + str(hkv_tp) + " (and " + str(h_tp) + "), or use p2p";
  };
  return {p2p, a2a, ag, hier};
}

/// The config rows by name (std::map: deterministic, stable references).
std::map<std::string, CpVariantConfig>& config_rows() {
  static std::map<std::string, CpVariantConfig> rows = [] {
    std::map<std::string, CpVariantConfig> m;
    for (CpVariantConfig& r : builtin_config_rows()) {
      std::string name = r.name;
      m.emplace(std::move(name), std::move(r));
    }
    return m;
  }();
  return rows;
}

}  // namespace

CpLayout scenario_cp_layout(const Scenario& s, const CpVariant& v) {
  const auto& sizes = s.parallel.hierarchical_context_parallel_sizes;
  if (v.takes_hierarchical_sizes && (!sizes || sizes->size() != 2))
    throw InputError(s.loc("parallel.cp_comm_type"), "parallel.hierarchical_context_parallel_sizes",
                     "cp_comm_type " + v.name + " needs two hierarchical sizes [A, P]",
                     "set parallel.hierarchical_context_parallel_sizes: [A, P] with A*P = context_parallel_size");
  return v.layout(s.parallel.context_parallel_size, v.takes_hierarchical_sizes ? *sizes : std::vector<int64_t>{},
                  s.model.seq_length);
}

const CpVariantConfig* find_cp_variant_config(const std::string& name) {
  const auto& rows = config_rows();
  const auto it = rows.find(name);
  return it == rows.end() ? nullptr : &it->second;
}

const CpVariantConfig& cp_variant_config(CpCommType type) {
  const CpVariantConfig* row = find_cp_variant_config(to_string(type));
  HCPSIM_ASSERT(row != nullptr, "no config row for cp_comm_type " + to_string(type));
  return *row;
}

void register_cp_variant_config(CpVariantConfig row) {
  HCPSIM_ASSERT(find_cp_variant(row.name) != nullptr, "no core cp variant row '" + row.name + "'");
  HCPSIM_ASSERT(row.layout != nullptr, "config row '" + row.name + "' has no adapter");
  HCPSIM_ASSERT(row.a2a_size_key.empty() || row.head_split_fix != nullptr,
                "config row '" + row.name + "' names an a2a size but no head-split fix");
  std::string name = row.name;
  HCPSIM_ASSERT(config_rows().emplace(std::move(name), std::move(row)).second, "config row registered twice");
}

std::vector<CpCommType> scenario_cp_comm_types() {
  std::vector<CpCommType> out;
  for (const CpVariant* v : cp_variants()) {
    const auto type = parse_cp_comm_type(v->name);
    if (type && *type == v->comm_type && find_cp_variant_config(v->name) != nullptr) out.push_back(*type);
  }
  return out;
}

}  // namespace hcpsim
