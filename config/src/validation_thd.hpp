#pragma once
/// The validation rules of packed sequences (qkv_format thd), as Megatron and Transformer Engine apply them.
/// Private to config; validation.cpp calls them in its rule order. Every rule raises InputError at the key's
/// location, naming the key and the fix.

#include <vector>

#include "hcpsim/config/scenario.hpp"

namespace hcpsim {

/// The model's THD rules: the THD keys only with thd; with thd exactly one of packed_sequence_lengths and packing,
/// well-formed (thd_key_problem); micro_batch_size 1; seq_length equal to the padded total; pad_between_seqs not
/// false when some sequence is padded; no attention bias with CP and no sliding window. Runs before the other
/// model rules (with thd, seq_length follows from these keys). @throws InputError
void check_thd_model(const Scenario& scenario);

/// THD with cp_comm_type `type`: hcpsim builds it (the core row's takes_thd), and TE version `te` ({} when not
/// given) runs it (the config row's thd_min_te_version) when context_parallel_size > 1. No-op without thd.
/// @throws InputError
void check_thd_cp_comm_type(const Scenario& scenario, CpCommType type, const std::vector<int>& te);

}  // namespace hcpsim
