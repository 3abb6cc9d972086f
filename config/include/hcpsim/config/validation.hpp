#pragma once
/// Configuration rules of Megatron-Core, Megatron-Bridge and Transformer Engine, checked in hcpsim's words.
/// Source: docs/algorithm.md §8 (TE attn_forward_func_with_cp, Megatron arguments.py, Bridge config.py).

#include <string>
#include <utility>
#include <vector>

#include "hcpsim/config/scenario.hpp"

namespace hcpsim {

/// What a command needs from the scenario.
enum class ValidationScope {
  attention,  ///< shapes and CP rules only (the CPU oracle ignores the cluster)
  placement,  ///< also: the cluster holds TP·CP·DP·PP GPUs (validate, simulate, multi-GPU runs)
};

/// Legal-but-poor choices (exit 0), in a stable order.
struct ValidationReport {
  std::vector<std::string> warnings;
  int64_t data_parallel_size = 1;  ///< resolved DP (given, or filling the cluster; 1 for attention scope)
  /// The TE attention backend that would run for each distinct cp_comm_type (resolve_attention_kernel with TE's
  /// legality filters), in distinct_cp_comm_types() order.
  std::vector<std::pair<CpCommType, AttentionKernelChoice>> attention_backends;
};

/// Checks every rule; raises on the first violation in a fixed order (model, parallel, cluster).
/// @throws InputError naming the file:line:col of the key (or the override), the key and the fix.
ValidationReport validate_scenario(const Scenario& scenario, ValidationScope scope);

/// Parses "major.minor[.patch]" into a comparable triple {major, minor, patch}; empty if malformed (a part not
/// 1-6 digits, fewer than two or more than three parts). Defined with the attention-backend rules that use it.
std::vector<int> parse_version(const std::string& text);

}  // namespace hcpsim
