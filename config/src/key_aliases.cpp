#include "hcpsim/config/key_aliases.hpp"

namespace hcpsim {

const std::vector<KeyAlias>& bridge_key_aliases() {
  // Only Bridge paths whose value means exactly what the canonical key means (same type, same default meaning).
  static const std::vector<KeyAlias> table = {
      {"model.tensor_model_parallel_size", "parallel.tensor_model_parallel_size"},
      {"model.pipeline_model_parallel_size", "parallel.pipeline_model_parallel_size"},
      {"model.virtual_pipeline_model_parallel_size", "parallel.virtual_pipeline_model_parallel_size"},
      {"model.context_parallel_size", "parallel.context_parallel_size"},
      {"model.cp_comm_type", "parallel.cp_comm_type"},
      {"model.hierarchical_context_parallel_sizes", "parallel.hierarchical_context_parallel_sizes"},
      {"model.sequence_parallel", "parallel.sequence_parallel"},
      {"model.tp_comm_overlap", "parallel.tp_comm_overlap"},
      {"model.account_for_embedding_in_pipeline_split", "parallel.account_for_embedding_in_pipeline_split"},
      {"model.account_for_loss_in_pipeline_split", "parallel.account_for_loss_in_pipeline_split"},
      {"train.global_batch_size", "model.global_batch_size"},
      {"train.micro_batch_size", "model.micro_batch_size"},
      {"ddp.grad_reduce_in_fp32", "parallel.grad_reduce_in_fp32"},
      {"ddp.use_distributed_optimizer", "parallel.use_distributed_optimizer"},
      {"optimizer.use_distributed_optimizer", "parallel.use_distributed_optimizer"},
      {"ddp.overlap_grad_reduce", "parallel.overlap_grad_reduce"},
      {"ddp.overlap_param_gather", "parallel.overlap_param_gather"},
  };
  return table;
}

std::string canonical_key_of(const std::string& key) {
  for (const auto& a : bridge_key_aliases())
    if (a.alias == key) return a.canonical;
  return "";
}

std::string alias_display(const std::string& alias, const std::string& canonical) {
  return alias + " (Megatron-Bridge spelling of " + canonical + ")";
}

}  // namespace hcpsim
