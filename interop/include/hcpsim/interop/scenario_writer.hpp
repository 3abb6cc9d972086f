#pragma once
/// Writing an imported MegatronConfig as scenario YAML text (schema_version 1).

#include <cstdint>
#include <string>

#include "hcpsim/interop/megatron_config.hpp"

namespace hcpsim {

/// Options of the scenario written by scenario_yaml_of.
struct ScenarioWriteOptions {
  std::string cluster_preset = "dgx-h100";  ///< a cluster_preset() name
  int64_t gpus_per_node = 8;                ///< the preset's GPUs per node
  int64_t nics_per_node = 0;                ///< the preset's compute NICs per node (0: unknown, never written)
  std::string generator;                    ///< first comment line, e.g. "hcpsim import megatron-args"
  int64_t nodes_option = 0;                 ///< > 0: the node count came from `hcpsim import --nodes` (so commented)
};

/// Writes the scenario as YAML (schema_version 1), keys in the README's order, one `# from file:line` comment per
/// imported value. cluster.nodes = torchrun --nnodes, else ceil(world / gpus_per_node), else the nodes that
/// TP·CP·PP needs (DP 1, noted); gpus_per_node is written only when --nproc_per_node differs from the preset, and
/// with fewer GPUs than the preset's node, nics_per_node in the preset's NICs-per-GPU ratio (the GPUs a job uses
/// keep their own NICs: 4 of a DGX's 8 GPUs use 4 of its 8 NICs).
/// Deterministic: the same config gives byte-identical text.
/// @throws InputError naming the file and the missing flag when num_attention_heads, seq_length or kv_channels
/// (or hidden_size) is unknown, or the world size is not divisible by TP·CP·PP.
std::string scenario_yaml_of(const MegatronConfig& config, const ScenarioWriteOptions& options);

}  // namespace hcpsim
