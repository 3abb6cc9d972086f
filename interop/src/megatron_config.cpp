// MegatronConfig's own derivations: the data-parallel size and the scenario key → Megatron argument map behind
// every `file:line` in messages and written comments.
#include "hcpsim/interop/megatron_config.hpp"

#include <cctype>
#include <filesystem>
#include <set>

#include "input_names.hpp"

namespace hcpsim {

std::optional<int64_t> MegatronConfig::data_parallel_size() const {
  if (!world_size) return std::nullopt;
  const int64_t model = tensor_model_parallel_size * context_parallel_size * pipeline_model_parallel_size;
  if (model <= 0 || *world_size % model != 0) {
    SourceLoc l = loc_of_scenario_key("parallel.data_parallel_size");
    throw InputError(l, "parallel.data_parallel_size",
                     "world size " + std::to_string(*world_size) + " is not divisible by TP*CP*PP = " +
                         std::to_string(tensor_model_parallel_size) + "*" + std::to_string(context_parallel_size) +
                         "*" + std::to_string(pipeline_model_parallel_size) + " = " + std::to_string(model),
                     "make nnodes*nproc_per_node a multiple of " + std::to_string(model) +
                         ", or change the parallel sizes");
  }
  // Source: arguments.py validate_args: data_parallel_size = world_size // (TP·PP·CP).
  return *world_size / model;
}

std::vector<std::string> MegatronConfig::megatron_names_of(const std::string& key) {
  static const std::map<std::string, std::vector<std::string>> kNames{
      {"model.num_query_groups", {"num_query_groups", "group_query_attention", "num_attention_heads"}},
      {"model.kv_channels", {"kv_channels", "hidden_size", "num_attention_heads"}},
      {"model.kv_channels_v", {"kv_channels", "hidden_size"}},
      {"model.gated_linear_unit", {"swiglu"}},
      {"model.params_dtype", {"bf16", "fp16"}},
      {"model.ffn_hidden_size", {"ffn_hidden_size", "hidden_size"}},
      {"model.seq_length", {"seq_length", "encoder_seq_length"}},
      {"parallel.data_parallel_size", {"world_size", "nnodes", "nproc_per_node"}},
      {"parallel.virtual_pipeline_model_parallel_size",
       {"virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage"}},
      {"parallel.hierarchical_context_parallel_sizes",
       {"hierarchical_context_parallel_sizes", "cp_comm_type", "context_parallel_size"}},
      {"parallel.cp_comm_type", {"cp_comm_type", "context_parallel_size"}},
      {"training.recompute_granularity", {"recompute_granularity", "recompute_activations"}},
      {"training.fp8", {"fp8_format"}},
      {"training.fp8_recipe", {"fp8_recipe", "fp8_format"}},
      {"training.fp8_param_gather", {"fp8_param_gather", "fp8_format"}},
      {"cluster", {"nnodes", "nproc_per_node", "world_size"}},
      {"cluster.nodes", {"nnodes", "world_size", "nproc_per_node"}},
      {"cluster.gpus_per_node", {"nproc_per_node"}},
      {"cluster.nics_per_node", {"nproc_per_node"}},
      {"parallel.grad_reduce_in_fp32",
       {"grad_reduce_in_fp32", "grad_reduce_in_bf16", "accumulate_allreduce_grads_in_fp32", "fp16"}},
  };
  auto it = kNames.find(key);
  if (it != kNames.end()) return it->second;
  const auto dot = key.find('.');
  if (dot == std::string::npos) return {};
  std::string leaf = key.substr(dot + 1);
  const auto dot2 = leaf.find('.');
  if (dot2 != std::string::npos) leaf.resize(dot2);
  return {leaf};
}

SourceLoc MegatronConfig::loc_of_scenario_key(const std::string& key) const {
  SourceLoc l;
  l.file = interop::display(source_path);
  for (const auto& n : megatron_names_of(key)) {
    auto it = lines.find(n);
    if (it != lines.end() && it->second > 0) {
      l.line = it->second;
      auto col = columns.find(n);
      l.column = col != columns.end() && col->second > 0 ? col->second : 1;
      return l;
    }
  }
  return l;
}

namespace interop {

std::string scenario_name_of(const std::string& path, const std::string& fallback) {
  std::string stem = path == "-" ? fallback : std::filesystem::path(path).stem().string();
  for (char& c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return stem.empty() ? fallback : stem;
}

bool unmodelled_setting(const std::string& name, const std::string& value, bool printed_defaults) {
  static const std::set<std::string> turns_on = {"num_experts", "num_moe_experts", "multi_latent_attention",
                                                 "q_lora_rank", "mtp_num_layers", "hybrid_override_pattern",
                                                 "hybrid_attention_ratio", "hybrid_mlp_ratio", "moe_layer_freq",
                                                 "expert_model_parallel_size"};
  // Only meaningful with the feature on, and printed with defaults by logs and Bridge dumps.
  static const std::set<std::string> tunables = {"kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
                                                 "v_head_dim", "expert_tensor_parallel_size"};
  const bool named = turns_on.count(name) > 0 ||
                     (!printed_defaults && (tunables.count(name) > 0 || name.rfind("moe_", 0) == 0));
  if (!named) return false;
  static const std::set<std::string> unset = {"None", "none", "null", "~", "False", "false", "0", "0.0", "[]"};
  if (unset.count(value) > 0) return false;
  // A parallel size of 1 is no expert parallelism; in a printed block moe_layer_freq 1 is the default.
  if ((name == "expert_model_parallel_size" || name == "expert_tensor_parallel_size" || name == "moe_layer_freq") &&
      (value == "1" || (printed_defaults && name == "moe_layer_freq")))
    return false;
  return true;
}

}  // namespace interop
}  // namespace hcpsim
