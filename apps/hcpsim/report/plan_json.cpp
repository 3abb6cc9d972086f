#include "plan_json.hpp"

#include <nlohmann/json.hpp>

#include "../app_common.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/io/provenance.hpp"

namespace hcpsim::app {
namespace {

// ordered: the keys stay in the documented order (README, "plan --json").
using json = nlohmann::ordered_json;

double seconds(sim::TimePs ps) { return static_cast<double>(ps) * 1e-12; }

// The configuration of an option (every option, simulated or not).
json configuration_json(const sim::PlanOption& o) {
  return json{{"label", o.label},
              {"cp_comm_type", to_string(o.cp_comm_type)},
              {"a2a_size", o.a2a_size},
              {"p2p_size", o.p2p_size},
              {"tp", o.tp},
              {"cp", o.cp},
              {"pp", o.pp},
              {"vp", o.vp},
              {"dp", o.data_parallel_size},
              {"recompute", to_string(o.recompute)},
              {"recompute_num_layers", o.recompute_num_layers},
              {"micro_batch_size", o.micro_batch_size}};
}

json option_json(const sim::PlanOption& o) {
  json j = {{"rank", o.rank > 0 ? json(o.rank) : json(nullptr)}};
  j.update(configuration_json(o));
  const sim::StepResult& s = o.step;
  const MemoryBreakdown& m = s.memory;
  j.update(json{{"fits", m.fits},
                {"num_microbatches", s.num_microbatches},
                {"step_time_s", seconds(s.step_ps)},
                {"pipeline_s", seconds(s.pipeline_ps)},
                {"pipeline_bubble_fraction", s.pipeline_bubble_fraction},
                {"layer_forward_s", seconds(s.layer_forward_ps)},
                {"layer_backward_s", seconds(s.layer_backward_ps)},
                {"layer_exposed_comm_s", seconds(s.layer_exposed_comm_ps)},
                {"layer_critical_exposed_comm_s", seconds(s.layer_critical_exposed_comm_ps)},
                {"layer_load_imbalance_s", seconds(s.layer_load_imbalance_ps)},
                {"attention_forward_s", seconds(o.attention_forward_ps)},
                {"attention_backward_s", seconds(o.attention_backward_ps)},
                {"dp_exposed_s", seconds(s.dp_grad_reduce_exposed_ps + s.dp_param_gather_exposed_ps)},
                {"optimizer_s", seconds(s.optimizer_ps)},
                {"model_tflops_per_gpu", s.model_tflops_per_gpu},
                {"tokens_per_s", s.tokens_per_s},
                {"memory_per_gpu_bytes", m.total_bytes},
                {"memory_capacity_bytes", m.capacity_bytes},
                {"memory_headroom_bytes", m.headroom_bytes},
                {"memory_weights_bytes", m.weights_bytes},
                {"memory_gradients_bytes", m.gradients_bytes},
                {"memory_optimizer_bytes", m.optimizer_bytes},
                {"memory_activations_bytes", m.activations_bytes},
                {"inter_node_bytes_per_layer", o.inter_node_bytes_per_layer},
                {"intra_node_bytes_per_layer", o.intra_node_bytes_per_layer},
                {"a2a_intra_node", o.has_a2a ? json(o.a2a_intra_node) : json(nullptr)}});
  return j;
}

}  // namespace

void write_plan_json(const std::string& path, const Scenario& s, const sim::PlanResult& r, size_t max_configurations,
                     const std::vector<std::string>& overrides) {
  json j;
  j["scenario"] = {{"name", s.name}, {"path", s.source_path}};
  j["objective"] = r.objective == sim::PlanRequest::Objective::time ? "time" : "memory";
  json dims = json::array();
  for (const auto& d : r.dimensions)
    dims.push_back({{"name", to_string(d.dimension)}, {"values", d.values}, {"fixed", d.fixed}});
  j["request"] = {{"dimensions", dims},
                  {"model_gpus", r.model_gpus > 0 ? json(r.model_gpus) : json(nullptr)},
                  {"max_configurations", max_configurations}};
  j["global_batch_size"] = r.global_batch_size;
  const sim::PlanEstimate& e = r.estimate;
  j["estimate"] = {{"configurations", e.configurations},     {"legal", e.legal},
                   {"fit_in_memory", e.fit_in_memory},       {"simulated", e.simulated},
                   {"simulations", e.simulations},           {"estimated_one_core_s", e.seconds}};
  j["nothing_fits"] = r.nothing_fits;
  j["winner"] = !r.nothing_fits && !r.ranked.empty() && r.ranked[0].rank == 1 ? json(r.ranked[0].label) : json(nullptr);
  j["explanation"] = r.explanation;
  j["options"] = json::array();
  for (const auto& o : r.ranked) j["options"].push_back(option_json(o));
  json over = json::array();
  for (const auto& o : r.over_memory) {
    json x = configuration_json(o);
    x["memory_per_gpu_bytes"] = o.step.memory.total_bytes;
    x["memory_capacity_bytes"] = o.step.memory.capacity_bytes;
    over.push_back(x);
  }
  j["over_memory"] = {{"count", r.over_memory.size()}, {"options", over}};
  json groups = json::array();
  for (const auto& g : r.dropped_summary) groups.push_back({{"key", g.key}, {"count", g.count}, {"example", g.example}});
  j["dropped"] = {{"count", r.dropped.size()}, {"by_reason", groups}};
  write_output_file(path, with_provenance(j.dump(), scenario_provenance(s, overrides)), "plan JSON", "--json");
}

}  // namespace hcpsim::app
