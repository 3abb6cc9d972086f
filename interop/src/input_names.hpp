#pragma once
// Names derived from an input's path, shared by the importers and the scenario writer.

#include <algorithm>
#include <cctype>
#include <string>

#include "hcpsim/config/scenario_loader.hpp"

namespace hcpsim::interop {

/// Digits a launcher's or a batch script's count may have: beyond 10^7 nodes, tasks or GPUs it is a typo (and 20
/// digits overflow int64).
constexpr size_t kMaxCountDigits = 7;

/// True when `s` is a non-empty run of decimal digits (a count as written, "8"; not "$N", "2-4" or "-1").
inline bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

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

/// The name among `known` that `name` (an input's flag or key hcpsim does not read) misspells, or "" when none: one
/// or two edits apart (edit_distance), both at least 8 characters (below that real names sit two edits apart:
/// fp16 / bf16), and the known name not set by the input (`is_set`; with it set, `name` is another setting).
/// The first match in `known`'s order. Megatron's argparse and Bridge's dataclasses refuse unknown names, so the
/// importers refuse a misspelling rather than list it as ignored.
template <typename Names, typename IsSet>
std::string misspelled_name(const std::string& name, const Names& known, IsSet is_set) {
  constexpr size_t kMinLength = 8;
  if (name.size() < kMinLength) return "";
  for (const auto& k : known)
    if (k.size() >= kMinLength && !is_set(k) && edit_distance(name, k) <= 2) return k;
  return "";
}

}  // namespace hcpsim::interop
