// The `parallel:` section: parallel sizes, the CP communication type(s) and the Megatron options around them.
#include "scenario_sections.hpp"

namespace hcpsim {

void read_parallel(YamlReader& r, const YAML::Node& m, ParallelConfig& pc) {
  const std::string P = "parallel";
  r.check_map(m, P, kParallelKeys);
  if (m["tensor_model_parallel_size"])
    pc.tensor_model_parallel_size = r.get_int(m["tensor_model_parallel_size"], P + ".tensor_model_parallel_size");
  if (m["pipeline_model_parallel_size"])
    pc.pipeline_model_parallel_size = r.get_int(m["pipeline_model_parallel_size"], P + ".pipeline_model_parallel_size");
  if (m["context_parallel_size"])
    pc.context_parallel_size = r.get_int(m["context_parallel_size"], P + ".context_parallel_size");
  if (m["data_parallel_size"] && !m["data_parallel_size"].IsNull())
    pc.data_parallel_size = r.get_int(m["data_parallel_size"], P + ".data_parallel_size");
  if (m["cp_comm_type"]) {
    const YAML::Node& t = m["cp_comm_type"];
    const std::string key = P + ".cp_comm_type";
    const std::string choices = "p2p, a2a, a2a+p2p, all_gather (one value, or a list with one per layer)";
    pc.cp_comm_type.clear();
    if (t.IsSequence()) {
      if (t.size() == 0) r.fail(t, key, "empty list", "give one value, or one per layer");
      for (size_t i = 0; i < t.size(); ++i)
        pc.cp_comm_type.push_back(r.get_enum<CpCommType>(t[i], key, parse_cp_comm_type, choices));
    } else {
      pc.cp_comm_type.push_back(r.get_enum<CpCommType>(t, key, parse_cp_comm_type, choices));
    }
  }
  if (m["hierarchical_context_parallel_sizes"] && !m["hierarchical_context_parallel_sizes"].IsNull())
    pc.hierarchical_context_parallel_sizes =
        r.get_int_list(m["hierarchical_context_parallel_sizes"], P + ".hierarchical_context_parallel_sizes");
  if (m["order"]) pc.order = r.get_string(m["order"], P + ".order");
  if (m["use_decentralized_pg"]) pc.use_decentralized_pg = r.get_bool(m["use_decentralized_pg"], P + ".use_decentralized_pg");
  if (m["te_version"]) pc.te_version = r.get_string(m["te_version"], P + ".te_version");
  if (m["sequence_parallel"]) pc.sequence_parallel = r.get_bool(m["sequence_parallel"], P + ".sequence_parallel");
  if (m["virtual_pipeline_model_parallel_size"] && !m["virtual_pipeline_model_parallel_size"].IsNull())
    pc.virtual_pipeline_model_parallel_size =
        r.get_int(m["virtual_pipeline_model_parallel_size"], P + ".virtual_pipeline_model_parallel_size");
  if (m["use_distributed_optimizer"])
    pc.use_distributed_optimizer = r.get_bool(m["use_distributed_optimizer"], P + ".use_distributed_optimizer");
  if (m["overlap_grad_reduce"]) pc.overlap_grad_reduce = r.get_bool(m["overlap_grad_reduce"], P + ".overlap_grad_reduce");
  if (m["overlap_param_gather"])
    pc.overlap_param_gather = r.get_bool(m["overlap_param_gather"], P + ".overlap_param_gather");
  if (m["grad_reduce_in_fp32"])
    pc.grad_reduce_in_fp32 = r.get_bool(m["grad_reduce_in_fp32"], P + ".grad_reduce_in_fp32");
  if (m["tp_comm_overlap"]) pc.tp_comm_overlap = r.get_bool(m["tp_comm_overlap"], P + ".tp_comm_overlap");
  for (const char* key : {"account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"})
    if (m[key])
      (std::string(key) == "account_for_embedding_in_pipeline_split" ? pc.account_for_embedding_in_pipeline_split
                                                                     : pc.account_for_loss_in_pipeline_split) =
          r.get_bool(m[key], P + "." + key);
  for (const char* key : {"decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"})
    if (m[key] && !m[key].IsNull())
      (std::string(key) == "decoder_first_pipeline_num_layers" ? pc.decoder_first_pipeline_num_layers
                                                               : pc.decoder_last_pipeline_num_layers) =
          r.get_int(m[key], P + "." + key);
}

}  // namespace hcpsim
