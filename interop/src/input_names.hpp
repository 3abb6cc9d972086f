#pragma once
// Names derived from an input's path, shared by the importers and the scenario writer.

#include <string>

namespace hcpsim::interop {

/// The input's name in messages: "-" (stdin) → "<stdin>", anything else unchanged.
inline std::string display(const std::string& name) { return name == "-" ? "<stdin>" : name; }

/// The scenario name of an input: the file's stem with characters other than [A-Za-z0-9_.-] replaced by '_';
/// `fallback` for stdin ("-") or an empty stem.
std::string scenario_name_of(const std::string& path, const std::string& fallback);

/// True when setting `name` (a Megatron argument name with underscores, or a Bridge model key) to `value` (the
/// words after the flag, "" for a switch) changes the model in a way hcpsim does not simulate: MoE
/// (num_experts / num_moe_experts, expert_model_parallel_size > 1, moe_layer_freq; on a command line also
/// expert_tensor_parallel_size and any moe_* flag), multi-latent attention (multi_latent_attention, q_lora_rank,
/// kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim, v_head_dim), multi-token prediction (mtp_num_layers) and
/// hybrid Mamba models (hybrid_override_pattern, hybrid_attention_ratio, hybrid_mlp_ratio). A value that means
/// "not set" (None, null, False, 0, 1 for a parallel size) is not. `printed_defaults`: the input lists every
/// argument with its default (a log's arguments block, a Bridge dump), so only the switches that turn a feature on
/// count (moe_* tunables and the MLA head dims have defaults there).
/// Source: Megatron-LM megatron/training/arguments.py (_add_moe_args, _add_mla_args, _add_mtp_args,
/// --hybrid-* options).
bool unmodelled_setting(const std::string& name, const std::string& value, bool printed_defaults);

}  // namespace hcpsim::interop
