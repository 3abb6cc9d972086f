#pragma once
/// Megatron-Bridge spellings of scenario keys. A Bridge recipe's knob (`model.context_parallel_size=8`,
/// `train.global_batch_size=256`) names the same setting as an hcpsim scenario key under another path; one table
/// maps each Bridge path to its canonical key, and both scenario files and command-line overrides accept either.
/// Source of the Bridge paths: Megatron-Bridge `ConfigContainer` (src/megatron/bridge/training/config.py: `model`
/// is the model provider, a Megatron-Core TransformerConfig/ModelParallelConfig; `train` is TrainingConfig; `ddp` is
/// DistributedDataParallelConfig; `optimizer` is Megatron-Core OptimizerConfig).

#include <string>
#include <vector>

namespace hcpsim {

/// One Megatron-Bridge key path and the scenario key it means (both dotted, e.g. "model.context_parallel_size" →
/// "parallel.context_parallel_size"). Values are read exactly as for the canonical key (same type, same units).
struct KeyAlias {
  std::string alias;
  std::string canonical;
};

/// Every alias, in the order the README lists them. Each alias is unique and never itself a canonical key.
[[nodiscard]] const std::vector<KeyAlias>& bridge_key_aliases();

/// The canonical key that `key` (a dotted path) is the Megatron-Bridge spelling of, or "" when `key` is no alias.
[[nodiscard]] std::string canonical_key_of(const std::string& key);

/// How messages name a key the user wrote as `alias`: "model.context_parallel_size (Megatron-Bridge spelling of
/// parallel.context_parallel_size)".
[[nodiscard]] std::string alias_display(const std::string& alias, const std::string& canonical);

}  // namespace hcpsim
