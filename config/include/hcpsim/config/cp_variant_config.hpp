#pragma once
/// The config side of the CP variants' table (core's rows: hcpsim/core/cp_variant.hpp), under the same name: what
/// validation checks for a cp_comm_type and how a Scenario becomes the core inputs. validation.cpp and
/// scenario_adapters.cpp dispatch through these rows. docs/architecture.md "Adding a CP variant".

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/cp_variant.hpp"

namespace hcpsim {

/// The config part of one CP variant.
struct CpVariantConfig {
  /// The key, the core row's name (CpVariant::name).
  std::string name;
  /// First Transformer Engine release that has it. Source: docs/algorithm.md §8.5 version matrix.
  std::array<int, 3> min_te_version{0, 0, 0};
  /// First Transformer Engine release that runs it with qkv_format thd, and where that is from (a commit / PR,
  /// for the error message). Source: TE context_parallel.py at the release tags.
  std::array<int, 3> thd_min_te_version{0, 0, 0};
  std::string thd_te_source;
  /// TE supports sliding-window attention with it.
  bool sliding_window = false;
  /// TE supports core-attention bias with it when cp > 1.
  bool attention_bias = false;
  /// The key and wording naming its a2a size in the head-split error (Ulysses scatters heads over A); empty key:
  /// it scatters no heads, nothing to check.
  std::string a2a_size_key, a2a_size_what;
  /// The fix of the head-split error, from the heads per TP rank (num_attention_heads/TP, num_query_groups/TP).
  std::function<std::string(int64_t heads_per_tp, int64_t kv_heads_per_tp)> head_split_fix;
  /// The adapter: the CpLayout of `scenario` for the core row `variant`.
  /// @throws InputError when the scenario lacks what the row needs (e.g. hierarchical sizes).
  std::function<CpLayout(const Scenario& scenario, const CpVariant& variant)> layout;
};

/// The config row named `name`, or nullptr.
const CpVariantConfig* find_cp_variant_config(const std::string& name);
/// The config row of a built-in comm type (HCPSIM_ASSERT that it exists).
const CpVariantConfig& cp_variant_config(CpCommType type);
/// Adds a config row; its name must be a registered core row without a config row (HCPSIM_ASSERT).
void register_cp_variant_config(CpVariantConfig row);
/// The comm types a Scenario can name, in the core table's order (p2p, a2a, all_gather, a2a+p2p): every core row
/// that is a built-in CpCommType and has a config row.
std::vector<CpCommType> scenario_cp_comm_types();

/// The default adapter: CpVariant::layout over parallel.context_parallel_size, the hierarchical sizes and
/// model.seq_length. @throws InputError if the row takes hierarchical sizes and the scenario has no two of them.
CpLayout scenario_cp_layout(const Scenario& scenario, const CpVariant& variant);

}  // namespace hcpsim
