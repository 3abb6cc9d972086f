#include "hcpsim/step/step_summary.hpp"

#include <nlohmann/json.hpp>

#include "hcpsim/io/output_file.hpp"
#include "hcpsim/sim/trace_writer.hpp"

namespace hcpsim::sim {

using Json = nlohmann::ordered_json;  // keys in insertion order: stable, readable output

namespace {

Json step_json(const StepResult& st) {
  const MemoryBreakdown& mb = st.memory;
  return Json{{"cp_comm_type", to_string(st.cp_comm_type)},
              {"a2a_size", st.a2a_size},
              {"p2p_size", st.p2p_size},
              {"world_size", st.world_size},
              {"data_parallel_size", st.data_parallel_size},
              {"global_batch_size", st.global_batch_size},
              {"num_microbatches", st.num_microbatches},
              {"layers_per_stage", st.layers_per_stage},
              {"virtual_stages", st.virtual_stages},
              {"layer_forward_ps", st.layer_forward_ps},
              {"layer_backward_ps", st.layer_backward_ps},
              {"layer_exposed_comm_ps", st.layer_exposed_comm_ps},
              {"layer_critical_exposed_comm_ps", st.layer_critical_exposed_comm_ps},
              {"layer_load_imbalance_ps", st.layer_load_imbalance_ps},
              {"output_layer_forward_ps", st.output_layer_forward_ps},
              {"output_layer_backward_ps", st.output_layer_backward_ps},
              {"pp_message_ps", st.pp_message_ps},
              {"stage_microbatch_ps", st.stage_microbatch_ps},
              {"pipeline_bubble_fraction", st.pipeline_bubble_fraction},
              {"pipeline_ps", st.pipeline_ps},
              {"dp_grad_reduce_ps", st.dp_grad_reduce_ps},
              {"dp_grad_reduce_exposed_ps", st.dp_grad_reduce_exposed_ps},
              {"dp_param_gather_ps", st.dp_param_gather_ps},
              {"dp_param_gather_exposed_ps", st.dp_param_gather_exposed_ps},
              {"optimizer_ps", st.optimizer_ps},
              {"step_time_ps", st.step_ps},
              {"tokens_per_s", st.tokens_per_s},
              {"model_flops_convention", "megatron_causal"},
              {"model_flops", st.model_flops},
              {"model_tflops_per_gpu", st.model_tflops_per_gpu},
              {"model_flops_full_attention", st.model_flops_full_attention},
              {"model_tflops_per_gpu_full_attention", st.model_tflops_per_gpu_full_attention},
              {"mfu", st.mfu},
              {"executed_flops_per_gpu", st.executed_flops_per_gpu},
              {"parameters_per_gpu", mb.parameters_per_gpu},
              {"memory_per_gpu_weights_bytes", mb.weights_bytes},
              {"memory_per_gpu_fp8_weight_copies_bytes", mb.fp8_weight_copies_bytes},
              {"memory_per_gpu_pipeline_stage", mb.pipeline_stage},
              {"stage_layers", st.stage_layers},
              {"memory_per_gpu_gradients_bytes", mb.gradients_bytes},
              {"memory_per_gpu_optimizer_bytes", mb.optimizer_bytes},
              {"memory_per_gpu_activations_bytes", mb.activations_bytes},
              {"memory_per_gpu_output_layer_activations_bytes", mb.output_layer_activations_bytes},
              {"memory_per_gpu_cp_attention_buffers_bytes", mb.cp_attention_buffers_bytes},
              {"memory_per_gpu_framework_overhead_bytes", mb.framework_overhead_bytes},
              {"memory_per_gpu_total_bytes", mb.total_bytes},
              {"memory_per_gpu_capacity_bytes", mb.capacity_bytes},
              {"memory_per_gpu_headroom_bytes", mb.headroom_bytes},
              {"fits", mb.fits}};
}

}  // namespace

std::string summary_json(const SimResult& result, const StepResult* step, const std::string& calibration) {
  Json j = Json::parse(summary_json(result));
  if (!calibration.empty()) j["calibration"] = calibration;
  if (step) j["step"] = step_json(*step);
  return j.dump(2) + "\n";
}

std::string mixed_step_summary_json(const StepResult& step, const std::string& calibration) {
  Json j;
  j["layer_mix"] = step.layer_mix;
  if (!calibration.empty()) j["calibration"] = calibration;
  Json st = step_json(step);
  st.erase("cp_comm_type");  // the mix's types are in layer_mix
  st.erase("a2a_size");
  st.erase("p2p_size");
  j["step"] = st;
  return j.dump(2) + "\n";
}

void write_summary_json(const std::string& path, const SimResult& result, const StepResult* step,
                        const std::string& calibration) {
  write_output_file(path, summary_json(result, step, calibration), "summary");
}

}  // namespace hcpsim::sim
