#pragma once
/// Adapters from a Scenario to the inputs of core's schedule builders (an AttentionShape and a CpLayout), so
/// that core never sees a Scenario.

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule.hpp"

namespace hcpsim {

/// The attention problem of one TP rank of `scenario` (heads divided by tensor_model_parallel_size). With
/// qkv_format thd: packing = scenario_packing(scenario) (thd_packing.hpp) and batch 1; seq_length stays
/// model.seq_length, which validation requires to be the packed length.
AttentionShape attention_shape(const Scenario& scenario);

/// The CP layout a comm type uses, by its config row's adapter (cp_variant_config.hpp): p2p and all_gather →
/// [1, cp], a2a → [cp, 1], a2a+p2p → hierarchical sizes.
/// @throws InputError if a2a+p2p has no hierarchical sizes (validation normally catches this first).
CpLayout cp_layout_for(const Scenario& scenario, CpCommType cp_comm_type);

/// Megatron parallel sizes of `scenario` (tp, cp, pp from `parallel`; ep 1) with the resolved data-parallel size
/// (ValidationReport::data_parallel_size), as place_cp_group() takes them.
ParallelSizes parallel_sizes(const Scenario& scenario, int64_t data_parallel_size);

}  // namespace hcpsim
