#pragma once
// The small Llama-like model of the step tests and its helpers (training_step_test.cpp, partial_recompute_test.cpp).
#include <string>
#include <vector>

#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/step/training_step.hpp"

namespace hcpsim::test {

// A small Llama-like model whose numbers are easy to derive by hand:
// h = 64, ffn = 256 (gated), H = 4, Hkv = 2, dk = dv = 16, L = 2, V = 1000 (padded to 1024), S = 256.
inline const char* kSmall = R"(schema_version: 1
name: small
model:
  num_attention_heads: 4
  num_query_groups: 2
  kv_channels: 16
  hidden_size: 64
  ffn_hidden_size: 256
  seq_length: 256
  micro_batch_size: 1
  num_layers: 2
  vocab_size: 1000
  gated_linear_unit: true
  global_batch_size: 4
parallel:
  context_parallel_size: 2
  cp_comm_type: p2p
  use_distributed_optimizer: true
cluster: {preset: dgx-h100, nodes: 1}
)";

inline Scenario small(const std::vector<std::string>& overrides = {}) {
  Scenario s = load_scenario_text(kSmall, "small.yaml", overrides);
  validate_scenario(s, ValidationScope::placement);
  return s;
}

inline sim::StepResult step_of(const Scenario& s) {
  const auto report = validate_scenario(s, ValidationScope::placement);
  return sim::simulate_step(s, s.parallel.cp_comm_type.front(), report.data_parallel_size, Topology::from_cluster(s.cluster));
}

}  // namespace hcpsim::test
