#include "validate_json.hpp"

#include <nlohmann/json.hpp>

#include "../app_common.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/io/provenance.hpp"

namespace hcpsim::app {
namespace {

// ordered: the keys stay in the documented order (README, "validate --json").
using json = nlohmann::ordered_json;

json group_json(const RankGroup& g) {
  return json{{"global_ranks", g.global_ranks}, {"nodes", g.nodes}, {"intra_node", g.one_node}};
}

json layout_json(const Scenario& s, CpCommType t, int64_t dp) {
  const CpLayout layout = cp_layout_for(s, t);
  const CpGroups groups = cp_groups_of(s, t, dp);
  json a2a = json::array(), p2p = json::array();
  for (const auto& g : groups.a2a) a2a.push_back(group_json(g));
  for (const auto& g : groups.p2p) p2p.push_back(group_json(g));
  return json{{"cp_comm_type", to_string(t)},
              {"a2a_size", layout.a2a_size()},
              {"p2p_size", layout.p2p_size()},
              {"cp_size", layout.cp_size()},
              {"num_cp_groups", groups.num_cp_groups},
              {"context_parallel_group", group_json(groups.context_parallel)},
              {"a2a_groups", a2a},
              {"p2p_groups", p2p}};
}

}  // namespace

void write_validate_json(const std::string& path, const Scenario& s, const ValidationReport& report,
                         const std::vector<std::string>& overrides) {
  const auto& m = s.model;
  const auto& p = s.parallel;
  const int64_t dp = report.data_parallel_size;
  json j;
  j["verdict"] = "valid";
  j["scenario"] = {{"name", s.name},
                   {"path", s.source_path},
                   {"num_attention_heads", m.num_attention_heads},
                   {"num_query_groups", m.num_query_groups},
                   {"kv_channels", m.kv_channels},
                   {"kv_channels_v", m.kv_channels_v},
                   {"seq_length", m.seq_length},
                   {"micro_batch_size", m.micro_batch_size},
                   {"num_layers", m.num_layers},
                   {"attn_mask_type", to_string(m.attn_mask_type)},
                   {"qkv_format", to_string(m.qkv_format)},
                   {"params_dtype", to_string(m.params_dtype)}};
  j["parallel"] = {{"tensor_model_parallel_size", p.tensor_model_parallel_size},
                   {"context_parallel_size", p.context_parallel_size},
                   {"pipeline_model_parallel_size", p.pipeline_model_parallel_size},
                   {"data_parallel_size", dp},
                   {"order", p.order},
                   {"gpus_used", p.tensor_model_parallel_size * p.context_parallel_size *
                                     p.pipeline_model_parallel_size * dp}};
  j["cluster"] = {{"nodes", s.cluster.nodes},
                  {"gpus_per_node", s.cluster.gpus_per_node},
                  {"gpu", s.cluster.gpu.name},
                  {"preset", s.cluster.preset}};
  j["layouts"] = json::array();
  for (CpCommType t : p.distinct_cp_comm_types()) j["layouts"].push_back(layout_json(s, t, dp));
  j["attention_backends"] = json::array();
  for (const auto& [t, choice] : report.attention_backends)
    j["attention_backends"].push_back(
        {{"cp_comm_type", to_string(t)}, {"kernel", to_string(choice.kernel)}, {"reason", choice.reason}});
  j["warnings"] = report.warnings;
  write_output_file(path, with_provenance(j.dump(), scenario_provenance(s, overrides)), "validate JSON",
                    "--json");
}

void write_validate_error_json(const std::string& path, const std::string& scenario_path, const InputError& error) {
  const json j = {{"verdict", "invalid"},
                  {"scenario", {{"path", scenario_path}}},
                  {"error",
                   {{"message", error.what()}, {"key", error.key()}, {"problem", error.problem()}, {"fix", error.fix()}}}};
  write_output_file(path, j.dump(2) + "\n", "validate JSON", "--json");
}

}  // namespace hcpsim::app
