#include "hcpsim/step/training_step.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hcpsim/config/pipeline_split.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/config/thd_packing.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/step/layer_builder.hpp"
#include "hcpsim/sim/collective_model.hpp"
#include "hcpsim/sim/cost_model.hpp"

namespace hcpsim::sim {
namespace {

// Bytes per parameter the optimizer moves. Sources: Megatron-LM docs (distributed optimizer): gradients are
// reduced in main_grad_bytes_per_param() (fp32 with grad_reduce_in_fp32), updated parameters gathered in the
// params dtype; Adam reads the fp32 gradient, master weight and two moments (16 B), writes master and moments
// (12 B) and the params-dtype copy.
constexpr double kOptimizerFp32BytesPerParam = 16 + 12;

TimePs times(TimePs ps, double factor) { return static_cast<TimePs>(static_cast<double>(ps) * factor + 0.5); }

// The step's shape: world size, batch, microbatches and the layers of one pipeline stage.
void set_step_shape(const Scenario& s, int64_t data_parallel_size, StepResult& r) {
  const ModelConfig& m = s.model;
  const ParallelConfig& p = s.parallel;
  const int64_t tp = p.tensor_model_parallel_size, cp = p.context_parallel_size, pp = p.pipeline_model_parallel_size;
  r.world_size = tp * cp * data_parallel_size * pp;
  r.global_batch_size = m.global_batch_size.value_or(m.micro_batch_size * data_parallel_size);
  r.num_microbatches = std::max<int64_t>(1, r.global_batch_size / (m.micro_batch_size * data_parallel_size));
  r.stage_layers = pipeline_split(s).stage_layers;
  r.layers_per_stage = *std::max_element(r.stage_layers.begin(), r.stage_layers.end());
  r.virtual_stages = p.virtual_pipeline_model_parallel_size.value_or(1);
}

ParallelSizes parallel_sizes(const ParallelConfig& p, int64_t data_parallel_size) {
  ParallelSizes sizes;
  sizes.tp = p.tensor_model_parallel_size;
  sizes.cp = p.context_parallel_size;
  sizes.dp = data_parallel_size;
  sizes.pp = p.pipeline_model_parallel_size;
  return sizes;
}

// Why the layer of `s` cannot be symmetry-reduced, or "" when it can (docs/simulator.md "Symmetry reduction",
// "Whole training step"). With TP = 1 the layer's ranks are the CP ranks and every layer op (GEMMs, norms; no TP
// collective) is the same on every rank, so the attention's classes are the layer's. With TP > 1 an a2a group of
// A = gpus_per_node / TP GPUs is not a whole node, and the TP collectives and ring exchanges would couple the
// classes of one node on NVLink, which the reduced run only executes for the representatives.
std::string layer_symmetry_blocker(const Scenario& s, CpCommType cp_comm_type, const std::vector<int64_t>& gpus,
                                   const std::string& full_run_reason) {
  if (!full_run_reason.empty()) return full_run_reason;
  const int64_t tp = s.parallel.tensor_model_parallel_size;
  if (tp > 1)
    return fmt::format("TP = {}: the TP collectives couple the a2a groups of a node, which the reduction does "
                       "not execute as images",
                       tp);
  const CpLayout layout = cp_layout_for(s, cp_comm_type);
  return symmetry_reduction_blocker(cp_comm_type, layout.a2a_size(), layout.p2p_size(), s.cluster, gpus);
}

// Takes `attention` (simulate_attention's schedule, or empty) when it has a program for each of `cp_ranks` (all
// CP ranks when empty), leaving it empty; else returns an empty schedule and leaves it alone.
Schedule take_attention(Schedule* attention, const std::vector<int64_t>& cp_ranks) {
  if (attention == nullptr || attention->ranks.empty()) return {};
  bool complete = true;
  if (cp_ranks.empty())
    for (const RankProgram& r : attention->ranks) complete = complete && !r.ops.empty();
  for (int64_t c : cp_ranks) complete = complete && !attention->ranks[static_cast<size_t>(c)].ops.empty();
  if (!complete) return {};
  Schedule taken = std::move(*attention);
  *attention = Schedule{};
  return taken;
}

// One layer of `s` (with its recompute settings), symmetry-reduced when `blocker` is "" and the reduced run is
// exact, in full otherwise (the fallback). `note` says which. `attention` (may be null): the attention schedule
// simulate_attention built, wrapped instead of built again when it has the programs the run needs (then taken).
SimResult simulate_layer_run(const Scenario& s, CpCommType cp_comm_type, const Topology& topology,
                             const std::vector<int64_t>& gpus, SimOptions options, const std::string& blocker,
                             std::string& note, Schedule* attention = nullptr) {
  if (blocker.empty()) {
    const CpLayout layout = cp_layout_for(s, cp_comm_type);
    const int64_t a = layout.a2a_size(), p = layout.p2p_size();
    options.symmetry_reduction = true;
    const std::vector<int64_t> reps = symmetry_representatives(a, p);  // TP = 1: layer ranks are CP ranks
    Schedule given = take_attention(attention, reps);
    SimResult reduced = simulate(given.ranks.empty()
                                     ? build_layer_schedule_ranks(s, cp_comm_type, reps, options.threads)
                                     : build_layer_schedule_ranks(s, cp_comm_type, reps, std::move(given),
                                                                  options.threads),
                                 s.cluster, topology, gpus, options);
    if (reduced.symmetry_exact) {
      note = fmt::format("symmetry reduction: simulated {} representative GPU{} (a2a_rank 0), each standing for "
                         "its {} a2a peers; exact",
                         reduced.simulated_ranks, reduced.simulated_ranks == 1 ? "" : "s", a);
      return reduced;
    }
    note = "symmetry reduction not exact here (" + reduced.symmetry_note + "); full simulation";
  } else {
    note = "full simulation (symmetry reduction does not apply: " + blocker + ")";
  }
  options.symmetry_reduction = false;
  Schedule given = take_attention(attention, {});
  return simulate(given.ranks.empty() ? build_layer_schedule(s, cp_comm_type, options.threads)
                                      : build_layer_schedule(s, cp_comm_type, std::move(given), options.threads),
                  s.cluster, topology, gpus, options);
}

// One transformer layer, simulated (symmetry-reduced where that is exact). Returns the largest transient memory
// of a rank (peak − inputs), which the memory breakdown adds.
int64_t simulate_layer(const Scenario& s, CpCommType cp_comm_type, int64_t data_parallel_size,
                       const Topology& topology, SimOptions options, const std::string& full_run_reason,
                       Schedule* attention, StepResult& r) {
  const std::vector<int64_t> gpus = layer_rank_gpus(s, data_parallel_size);
  const std::string blocker = layer_symmetry_blocker(s, cp_comm_type, gpus, full_run_reason);
  r.layer = simulate_layer_run(s, cp_comm_type, topology, gpus, options, blocker, r.layer_simulation_note, attention);
  r.a2a_size = r.layer.a2a_size;
  r.p2p_size = r.layer.p2p_size;
  r.layer_forward_ps = r.layer.forward_ps;
  r.layer_backward_ps = r.layer.total_ps - r.layer.forward_ps;
  r.layer_backward_no_recompute_ps = r.layer_backward_ps;
  r.layer_no_recompute_flops = r.layer.phase_flops(Phase::forward) + r.layer.phase_flops(Phase::backward);
  for (int64_t k : r.stage_layers) r.stage_recomputed_layers.push_back(recompute_plan(s, k).recomputed_layers);
  // Full granularity with layers left whole on some stage (block recompute of N < a chunk's layers, N = 0
  // included): those layers run the backward of a layer without recompute, simulated below.
  bool partial = false;
  for (size_t k = 0; k < r.stage_layers.size(); ++k)
    partial = partial || (s.training.recompute_granularity == RecomputeGranularity::full &&
                          r.stage_recomputed_layers[k] < r.stage_layers[k]);
  if (partial) {
    // Block recompute: the layers not recomputed run the backward of a layer without recompute.
    Scenario none = s;
    none.training.recompute_granularity = RecomputeGranularity::none;
    none.training.recompute_num_layers.reset();
    none.training.recompute_method = RecomputeMethod::uniform;
    std::string plain_note;
    const SimResult plain = simulate_layer_run(none, cp_comm_type, topology, gpus, options, blocker, plain_note);
    if (plain_note != r.layer_simulation_note) r.layer_simulation_note += "; the layer without recompute: " + plain_note;
    r.layer_backward_no_recompute_ps = plain.total_ps - plain.forward_ps;
    r.layer_no_recompute_flops = plain.phase_flops(Phase::forward) + plain.phase_flops(Phase::backward);
  }
  int64_t transient = 0;
  for (const RankStats& rs : r.layer.ranks) transient = std::max(transient, rs.peak_memory_bytes - rs.input_bytes);
  r.layer_critical_exposed_comm_ps = r.layer.critical_exposed_comm_ps();
  r.layer_load_imbalance_ps = r.layer.load_imbalance_ps();
  // The least busy GPU's idle time (max over ranks of exposed_comm_ps) is the sum of the two.
  r.layer_exposed_comm_ps = r.layer_critical_exposed_comm_ps + r.layer_load_imbalance_ps;
  r.layer_transient_bytes = transient;
  return transient;
}

// Output layer and loss on the last stage, embedding lookup on the first: cost model. Returns the FLOPs of
// one logits GEMM (forward), which the executed FLOPs count three times (forward + two backward GEMMs).
double set_output_layer_times(const Scenario& s, const ParameterCounts& params, StepResult& r) {
  const ModelConfig& m = s.model;
  const GpuSpec& gpu = s.cluster.gpu;
  const int64_t tokens = m.micro_batch_size * m.seq_length / s.parallel.context_parallel_size;
  const int64_t vocab_tp = params.padded_vocab / s.parallel.tensor_model_parallel_size;
  const int64_t h = m.hidden();
  const int e = dtype_size_bytes(m.params_dtype);
  const double logits_flops = 2.0 * static_cast<double>(tokens) * static_cast<double>(vocab_tp) * static_cast<double>(h);
  const int64_t logits_bytes = (tokens * h + h * vocab_tp + tokens * vocab_tp) * e;
  // Loss: read the logits, write their fp32 copy and the softmax (fwd); read both, write the grad (bwd).
  const int64_t loss_bytes = tokens * vocab_tp * (e + 4 + 4);
  const int64_t embedding_bytes = 2 * tokens * h * e;
  // The output layer is Megatron's ColumnParallelLinear, not a TE FP8 layer: BF16 GEMMs. Backward: dgrad
  // (tokens × h × vocab) and wgrad (vocab × h × tokens).
  const GemmOp logits{tokens, vocab_tp, h, false};
  const GemmOp dgrad{tokens, h, vocab_tp, false};
  const GemmOp wgrad{vocab_tp, h, tokens, false};
  r.output_layer_forward_ps = gemm_ps(logits, logits_bytes, m.params_dtype, gpu) + elementwise_ps(loss_bytes, gpu) +
                              elementwise_ps(embedding_bytes, gpu);
  r.output_layer_backward_ps = gemm_ps(dgrad, logits_bytes, m.params_dtype, gpu) +
                               gemm_ps(wgrad, logits_bytes, m.params_dtype, gpu) +
                               elementwise_ps(loss_bytes, gpu) + elementwise_ps(embedding_bytes, gpu);
  return logits_flops;
}

// The pipeline: one activation message between stages, a stage's time per microbatch and the bubble.
void set_pipeline_time(const Scenario& s, const ParallelSizes& sizes, StepResult& r) {
  const ModelConfig& m = s.model;
  const ParallelConfig& p = s.parallel;
  const ClusterSpec& cl = s.cluster;
  const int64_t tp = sizes.tp, pp = sizes.pp;
  if (pp > 1) {
    const int64_t tokens = m.micro_batch_size * m.seq_length / sizes.cp;
    const bool sp = p.sequence_parallel && tp > 1;
    const int64_t bytes = (sp ? tokens / tp : tokens) * m.hidden() * dtype_size_bytes(m.params_dtype);
    // Each TP rank sends its part to the same TP rank of the next stage; TP ranks do so at once, each over
    // its own NVLink port or NIC rail, so one pair stands for them.
    const std::vector<int64_t> pair = {global_rank(p.order, sizes, 0, 0, 0, 0), global_rank(p.order, sizes, 0, 0, 0, 1)};
    r.pp_message_ps = collective_estimate(CollectiveOp::sendrecv, static_cast<double>(bytes), pair, cl).ps();
  }
  // The slowest stage bounds the pipeline: its layers, plus the output layer and loss on the last stage (with
  // account_for_loss or a short last stage, the last stage carries fewer layers for exactly this reason).
  TimePs slowest = 0;
  const auto stages = static_cast<int64_t>(r.stage_layers.size());
  const bool given = !r.stage_layers_ps.empty();  // a per-layer comm-type mix (compose_mixed_step) sets them
  for (int64_t i = 0; i < stages; ++i) {
    const auto k = static_cast<size_t>(i);
    const int64_t rec = r.stage_recomputed_layers[k], plain = r.stage_layers[k] - rec;
    // Recomputed layers pay the backward with the forward rerun; the others (block recompute) the plain one.
    // (Without full granularity no layer counts as recomputed and layer_backward_no_recompute_ps is the simulated
    // layer's backward, selective recompute included.)
    if (!given)
      r.stage_layers_ps.push_back(rec * (r.layer_forward_ps + r.layer_backward_ps) +
                                  plain * (r.layer_forward_ps + r.layer_backward_no_recompute_ps));
    const TimePs output = i == stages - 1 ? r.output_layer_forward_ps + r.output_layer_backward_ps : 0;
    slowest = std::max(slowest, r.stage_layers_ps[k] + output);
  }
  r.stage_microbatch_ps = slowest + 2 * r.pp_message_ps;
  const double m_micro = static_cast<double>(r.num_microbatches);
  const double bubble = static_cast<double>(pp - 1) / static_cast<double>(r.virtual_stages);
  r.pipeline_bubble_fraction = bubble / m_micro;
  r.pipeline_ps = times(r.stage_microbatch_ps, m_micro + bubble);
}

// Memory first (the DP collectives move this GPU's parameters), then the DP gradient reduce and parameter
// gather with the part that overlap leaves exposed, the optimizer update and the step time.
void set_data_parallel_and_step_time(const Scenario& s, const ParallelSizes& sizes, int64_t transient, StepResult& r) {
  const ParallelConfig& p = s.parallel;
  const ClusterSpec& cl = s.cluster;
  const int e = dtype_size_bytes(s.model.params_dtype);
  r.memory = memory_per_gpu(s, sizes.dp, r.num_microbatches, static_cast<double>(transient));
  const double params_gpu = r.memory.parameters_per_gpu;
  // The gradient/parameter group of TP rank 0, stage 0: its DP × CP ranks by Megatron's order. The other TP
  // ranks' groups run at the same time on their own GPUs (and NICs), so this one stands for them.
  std::vector<int64_t> group;
  for (int64_t c = 0; c < sizes.cp; ++c)
    for (int64_t d = 0; d < sizes.dp; ++d) group.push_back(global_rank(p.order, sizes, 0, c, d, 0));
  const CollectiveGroupShape shape = group_shape(group, cl);
  const double dp_cp = static_cast<double>(group.size());
  const double grad_bytes = params_gpu * main_grad_bytes_per_param(s);
  const double L = static_cast<double>(r.layers_per_stage);
  auto exposed = [L](TimePs total, TimePs window_per_layer, bool overlap) {
    if (!overlap) return total;
    const double t = static_cast<double>(total);
    return static_cast<TimePs>(std::max(t / L, t - (L - 1) * static_cast<double>(window_per_layer)) + 0.5);
  };
  double optimizer_params = params_gpu;
  if (p.use_distributed_optimizer) {
    r.dp_grad_reduce_ps = collective_estimate(CollectiveOp::reduce_scatter, grad_bytes, shape, cl).ps();
    // With fp8_param_gather the linear weights are gathered in FP8 (Megatron's distributed optimizer all-gathers
    // the FP8 parameter shards it casts after the update).
    const double fp8_params = r.memory.fp8_parameters_per_gpu;
    const double gathered_bytes = (params_gpu - fp8_params) * e + fp8_params * kFp8Bytes;
    r.dp_param_gather_ps = collective_estimate(CollectiveOp::all_gather, gathered_bytes, shape, cl).ps();
    r.dp_param_gather_exposed_ps = exposed(r.dp_param_gather_ps, r.layer_forward_ps, p.overlap_param_gather);
    optimizer_params = params_gpu / dp_cp;
  } else {
    r.dp_grad_reduce_ps = collective_estimate(CollectiveOp::all_reduce, grad_bytes, shape, cl).ps();
  }
  r.dp_grad_reduce_exposed_ps = exposed(r.dp_grad_reduce_ps, r.layer_backward_ps, p.overlap_grad_reduce);
  r.optimizer_ps = elementwise_ps(static_cast<int64_t>(optimizer_params * (kOptimizerFp32BytesPerParam + e)), cl.gpu);
  r.step_ps = r.pipeline_ps + r.dp_grad_reduce_exposed_ps + r.dp_param_gather_exposed_ps + r.optimizer_ps;
}

// Throughput, model FLOPs (both conventions), MFU and the FLOPs one GPU executes per iteration.
void set_throughput(const Scenario& s, double logits_flops, StepResult& r) {
  const double step_s = static_cast<double>(r.step_ps) * 1e-12;
  // Packed sequences (thd): the real tokens Σ L_s of a micro-batch, not its padded length (as the model FLOPs).
  double tokens = static_cast<double>(s.model.seq_length);
  if (s.model.qkv_format == QkvFormat::thd) {
    tokens = 0;
    for (int64_t len : packed_actual_lengths(s.model)) tokens += static_cast<double>(len);
  }
  r.tokens_per_s = static_cast<double>(r.global_batch_size) * tokens / step_s;
  r.model_flops = megatron_model_flops(s, r.global_batch_size, FlopsConvention::megatron_causal);
  r.model_flops_full_attention = megatron_model_flops(s, r.global_batch_size, FlopsConvention::megatron_full_attention);
  const double world = static_cast<double>(r.world_size);
  r.model_tflops_per_gpu = r.model_flops / (step_s * world) / 1e12;
  r.model_tflops_per_gpu_full_attention = r.model_flops_full_attention / (step_s * world) / 1e12;
  r.mfu = r.model_flops / (step_s * world * s.cluster.gpu.peak_bf16_flops_per_s);
  const double layer_flops = (r.layer.phase_flops(Phase::forward) + r.layer.phase_flops(Phase::backward)) /
                             static_cast<double>(s.parallel.tensor_model_parallel_size * s.parallel.context_parallel_size);
  const double L = static_cast<double>(r.layers_per_stage);
  // The fullest stage; with block recompute its layers not recomputed execute the plain layer's FLOPs.
  const auto worst = static_cast<size_t>(
      std::max_element(r.stage_layers.begin(), r.stage_layers.end()) - r.stage_layers.begin());
  const int64_t rec = r.stage_recomputed_layers.empty() ? 0 : r.stage_recomputed_layers[worst];
  double layers_flops = L * layer_flops;
  if (r.worst_stage_layers_flops >= 0)
    layers_flops = r.worst_stage_layers_flops;
  else if (rec < r.layers_per_stage)
    layers_flops = static_cast<double>(rec) * layer_flops +
                   static_cast<double>(r.layers_per_stage - rec) * r.layer_no_recompute_flops /
                       static_cast<double>(s.parallel.tensor_model_parallel_size * s.parallel.context_parallel_size);
  r.executed_flops_per_gpu = static_cast<double>(r.num_microbatches) * (layers_flops + 3 * logits_flops);
}

}  // namespace

StepResult simulate_step(const Scenario& s, CpCommType cp_comm_type, int64_t data_parallel_size,
                         const Topology& topology, SimOptions options, const std::string& full_run_reason,
                         Schedule attention) {
  StepResult r;
  r.cp_comm_type = cp_comm_type;
  r.data_parallel_size = data_parallel_size;
  options.schedule_checked = true;  // the layers simulated here come from build_layer_schedule, which checks them
  set_step_shape(s, data_parallel_size, r);
  const ParameterCounts params = parameter_counts(s);  // throws without vocab_size, before any work
  const ParallelSizes sizes = parallel_sizes(s.parallel, data_parallel_size);
  const int64_t transient =
      simulate_layer(s, cp_comm_type, data_parallel_size, topology, options, full_run_reason, &attention, r);
  const double logits_flops = set_output_layer_times(s, params, r);
  set_pipeline_time(s, sizes, r);
  set_data_parallel_and_step_time(s, sizes, transient, r);
  set_throughput(s, logits_flops, r);
  return r;
}

std::vector<std::vector<std::pair<int64_t, int64_t>>> pipeline_layer_chunks(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  const int64_t pp = p.pipeline_model_parallel_size, v = p.virtual_pipeline_model_parallel_size.value_or(1);
  const std::vector<int64_t> stage_layers = pipeline_split(s).stage_layers;
  const int64_t e = p.account_for_embedding_in_pipeline_split ? 1 : 0, l = p.account_for_loss_in_pipeline_split ? 1 : 0;
  const int64_t per_chunk = (s.model.num_layers + e + l) / (pp * v);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> out(static_cast<size_t>(pp));
  int64_t next = 0;
  for (int64_t c = 0; c < v; ++c)
    for (int64_t k = 0; k < pp; ++k) {
      const int64_t n = e + l > 0 ? per_chunk - (k == 0 && c == 0 ? e : 0) - (k == pp - 1 && c == v - 1 ? l : 0)
                                  : stage_layers[static_cast<size_t>(k)] / v;
      out[static_cast<size_t>(k)].emplace_back(next, next + n);
      next += n;
    }
  HCPSIM_ASSERT(next == s.model.num_layers, "pipeline chunks cover " + std::to_string(next) + " of " +
                                                std::to_string(s.model.num_layers) + " layers");
  return out;
}

StepResult compose_mixed_step(const Scenario& s, const std::vector<StepResult>& per_type) {
  const std::vector<CpCommType> types = s.parallel.distinct_cp_comm_types();
  const std::vector<CpCommType>& of_layer = s.parallel.cp_comm_type;
  HCPSIM_ASSERT(!per_type.empty() && per_type.size() == types.size() &&
                    static_cast<int64_t>(of_layer.size()) == s.model.num_layers,
                "compose_mixed_step needs one step per distinct comm type and one type per layer");
  StepResult r = per_type.front();
  const double ranks = static_cast<double>(s.parallel.tensor_model_parallel_size * s.parallel.context_parallel_size);
  auto step_of = [&](int64_t layer) -> const StepResult& {
    const auto it = std::find(types.begin(), types.end(), of_layer[static_cast<size_t>(layer)]);
    return per_type[static_cast<size_t>(it - types.begin())];
  };
  const TrainingConfig& t = s.training;
  const bool block = t.recompute_granularity == RecomputeGranularity::full && t.recompute_method == RecomputeMethod::block;
  const auto chunks = pipeline_layer_chunks(s);
  r.stage_layers_ps.clear();
  const auto worst = static_cast<size_t>(
      std::max_element(r.stage_layers.begin(), r.stage_layers.end()) - r.stage_layers.begin());
  double forward_sum = 0, backward_sum = 0;
  for (size_t k = 0; k < chunks.size(); ++k) {
    TimePs sum = 0;
    double flops = 0;
    for (const auto& [first, end] : chunks[k])
      for (int64_t i = first; i < end; ++i) {
        const StepResult& x = step_of(i);
        // Block recompute reruns the first recompute_num_layers layers of each chunk (recompute_plan).
        const bool plain = block && i - first >= t.recompute_num_layers.value_or(end - first);
        const TimePs backward = plain ? x.layer_backward_no_recompute_ps : x.layer_backward_ps;
        sum += x.layer_forward_ps + backward;
        flops += (plain ? x.layer_no_recompute_flops
                        : x.layer.phase_flops(Phase::forward) + x.layer.phase_flops(Phase::backward)) / ranks;
        forward_sum += static_cast<double>(x.layer_forward_ps);
        backward_sum += static_cast<double>(backward);
      }
    r.stage_layers_ps.push_back(sum);
    if (k == worst) r.worst_stage_layers_flops = flops;
  }
  int64_t transient = 0;
  std::string mix;
  // The idle-time figures come from one comm type's layer, the one whose least busy GPU idles longest, so that
  // exposed = critical exposed + imbalance holds and "busiest GPU" names a GPU of one layer.
  size_t idlest = 0;
  for (size_t i = 0; i < types.size(); ++i)
    if (per_type[i].layer_exposed_comm_ps > per_type[idlest].layer_exposed_comm_ps) idlest = i;
  r.layer_exposed_comm_ps = per_type[idlest].layer_exposed_comm_ps;
  r.layer_critical_exposed_comm_ps = per_type[idlest].layer_critical_exposed_comm_ps;
  r.layer_load_imbalance_ps = per_type[idlest].layer_load_imbalance_ps;
  for (size_t i = 0; i < types.size(); ++i) {
    transient = std::max(transient, per_type[i].layer_transient_bytes);
    mix += fmt::format("{}{} {}", mix.empty() ? "" : " + ", std::count(of_layer.begin(), of_layer.end(), types[i]),
                       to_string(types[i]));
  }
  r.layer_mix = mix;
  r.layer_simulation_note = "each comm type's layer as simulated above; every stage sums its layers by their types";
  r.layer_transient_bytes = transient;
  const double L = static_cast<double>(s.model.num_layers);
  r.layer_forward_ps = static_cast<TimePs>(forward_sum / L + 0.5);
  r.layer_backward_ps = static_cast<TimePs>(backward_sum / L + 0.5);
  const ParallelSizes sizes = parallel_sizes(s.parallel, r.data_parallel_size);
  const double logits_flops = set_output_layer_times(s, parameter_counts(s), r);
  set_pipeline_time(s, sizes, r);
  set_data_parallel_and_step_time(s, sizes, transient, r);
  set_throughput(s, logits_flops, r);
  return r;
}

}  // namespace hcpsim::sim

namespace hcpsim {

std::vector<int64_t> layer_rank_gpus(const Scenario& scenario, int64_t data_parallel_size) {
  const ParallelSizes sizes = sim::parallel_sizes(scenario.parallel, data_parallel_size);
  std::vector<int64_t> gpus;
  for (int64_t c = 0; c < sizes.cp; ++c)
    for (int64_t t = 0; t < sizes.tp; ++t) gpus.push_back(global_rank(scenario.parallel.order, sizes, t, c, 0, 0));
  return gpus;
}

}  // namespace hcpsim
