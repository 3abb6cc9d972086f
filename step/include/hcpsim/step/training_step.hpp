#pragma once
/// The whole training step: the simulated layer (core/layer_builder.hpp: GEMMs, norms, TP collectives and the CP
/// attention schedule on every GPU of one TP × CP slice, timed by simulate()), composed into an iteration with
/// documented closed forms for what one layer does not contain: the output layer and loss, pipeline
/// parallelism (1F1B bubble), the distributed optimizer's data-parallel collectives and the optimizer step.
/// Memory per GPU comes from core/training_model.hpp plus the transient buffers the simulator tracked.
///
/// Composition (all times per GPU of the slowest stage):
///   stage_microbatch = L_stage · (layer_forward + layer_backward) + output layer (fwd + bwd)
///                      + [PP > 1: 2 · activation message between stages]
///   pipeline        = (m + (PP − 1)/V) · stage_microbatch          (Narayanan et al. 2021, arXiv:2104.04473 §2.2)
///   step            = pipeline + exposed DP grad reduce-scatter + exposed DP param all-gather + optimizer step
/// with m = global_batch_size / (micro_batch_size · DP) micro-batches and V virtual stages. The DP collectives
/// run over the DP·CP ranks that hold the same weights (Megatron's data-parallel group with context parallelism)
/// (the group of TP rank 0, stage 0, by Megatron's order) as NCCL runs them: sim/collective_model.hpp
/// (reduce-scatter of the fp32 grads, all-gather of the params; ring, or NVLS / NVLS tree for an all-reduce; a
/// ring across nodes leaves each node through the NICs of its members). The stage-to-stage activation message is
/// a send/recv of the same model between the two stages' TP rank 0. With
/// parallel.overlap_grad_reduce the grad reduce-scatter overlaps the last micro-batch's backward bucket by bucket:
/// exposed = max(T/L_stage, T − (L_stage − 1) · layer_backward); with parallel.overlap_param_gather the param
/// all-gather likewise overlaps the first forward; without them (Megatron's defaults) they are fully exposed. Without the distributed optimizer the grads are all-reduced and
/// nothing is gathered. Limits: the DP traffic is not simulated on the shared links (it can contend with CP
/// traffic on the NICs in reality), pipeline stages are assumed balanced, and the output layer is timed by
/// the cost model outside the simulation.

#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/step/training_model.hpp"
#include "hcpsim/sim/simulator.hpp"

namespace hcpsim::sim {

/// Everything the whole-step model reports for one cp_comm_type.
struct StepResult {
  CpCommType cp_comm_type = CpCommType::p2p;
  int64_t a2a_size = 1, p2p_size = 1;
  int64_t data_parallel_size = 1;
  int64_t world_size = 1;              ///< TP·CP·DP·PP GPUs used
  int64_t global_batch_size = 1;       ///< samples per iteration
  int64_t num_microbatches = 1;        ///< m
  int64_t layers_per_stage = 1;        ///< the most transformer layers on one stage (num_layers / PP when even)
  std::vector<int64_t> stage_layers;   ///< transformer layers of each pipeline stage (config/pipeline_split.hpp)
  int64_t virtual_stages = 1;          ///< V
  SimResult layer;                     ///< the simulated layer (one micro-batch, all TP·CP ranks)
  /// How the layer was simulated: "symmetry reduction: simulated P representative GPUs …; exact", or "full
  /// simulation (symmetry reduction does not apply: …)", or "symmetry reduction not exact here (…); full
  /// simulation" (the fallback). Every other field is the same either way.
  std::string layer_simulation_note;
  TimePs layer_forward_ps = 0;         ///< layer.forward_ps
  TimePs layer_backward_ps = 0;        ///< layer.total_ps − layer.forward_ps (recompute included)
  /// Max over the layer's GPUs of RankStats::exposed_comm_ps: the least busy GPU's idle time, so it holds load
  /// imbalance as well as communication; = layer_critical_exposed_comm_ps + layer_load_imbalance_ps.
  TimePs layer_exposed_comm_ps = 0;
  TimePs layer_critical_exposed_comm_ps = 0;  ///< layer.critical_exposed_comm_ps(): the busiest GPU's idle time
  TimePs layer_load_imbalance_ps = 0;         ///< layer.load_imbalance_ps(): busiest − least busy GPU's kernel time
  // (A per-layer comm-type mix, compose_mixed_step, takes all three from the type whose layer_exposed_comm_ps is
  // the largest.)
  /// Backward of a layer that is not recomputed (recompute_method block leaves some): the layer simulated without
  /// recompute; equals layer_backward_ps when every layer (or none) is recomputed.
  TimePs layer_backward_no_recompute_ps = 0;
  std::vector<int64_t> stage_recomputed_layers;  ///< per stage: layers whose forward reruns (recompute_plan)
  double layer_no_recompute_flops = 0;  ///< FLOPs of the layer without recompute, all TP·CP ranks (block recompute)
  int64_t layer_transient_bytes = 0;    ///< largest transient memory of a layer rank (peak − inputs), bytes
  /// Per pipeline stage: its transformer layers' forward + backward for one micro-batch (recomputed layers with
  /// their rerun), ps; the pipeline's pace is the largest plus the last stage's output layer.
  std::vector<TimePs> stage_layers_ps;
  /// FLOPs one GPU executes in the fullest stage's layers for one micro-batch; < 0: derived from `layer`.
  double worst_stage_layers_flops = -1;
  /// A per-layer cp_comm_type mix (compose_mixed_step): how many layers use each type, e.g. "16 p2p + 16 a2a";
  /// empty for a single type.
  std::string layer_mix;
  TimePs output_layer_forward_ps = 0;  ///< logits GEMM + loss + embedding lookup, cost model
  TimePs output_layer_backward_ps = 0;
  TimePs pp_message_ps = 0;            ///< one activation message between stages (0 when PP = 1)
  TimePs stage_microbatch_ps = 0;
  double pipeline_bubble_fraction = 0; ///< (PP − 1) / (V · m)
  TimePs pipeline_ps = 0;
  TimePs dp_grad_reduce_ps = 0;        ///< whole reduce-scatter (or all-reduce) of this GPU's gradients
  TimePs dp_grad_reduce_exposed_ps = 0;
  TimePs dp_param_gather_ps = 0;       ///< whole all-gather of updated parameters (distributed optimizer)
  TimePs dp_param_gather_exposed_ps = 0;
  TimePs optimizer_ps = 0;             ///< Adam update of this GPU's shard (memory-bound)
  TimePs step_ps = 0;                  ///< time per iteration
  double tokens_per_s = 0;             ///< global_batch_size · seq_length / step
  double model_flops = 0;              ///< megatron_model_flops, FlopsConvention::megatron_causal
  double model_flops_full_attention = 0;  ///< FlopsConvention::megatron_full_attention
  double model_tflops_per_gpu = 0;     ///< model_flops / (step_s · world_size) / 1e12 (megatron_causal)
  double model_tflops_per_gpu_full_attention = 0;
  double mfu = 0;                      ///< model_flops / (step_s · world_size · peak_bf16)
  double executed_flops_per_gpu = 0;   ///< FLOPs one GPU executes per iteration (recompute and masks included)
  MemoryBreakdown memory;
};

/// Simulates the whole training step of `scenario` with `cp_comm_type`.
/// @param scenario validated with ValidationScope::placement; model.vocab_size must be set.
/// @param data_parallel_size the resolved DP (ValidationReport::data_parallel_size).
/// @param topology Topology::from_cluster(scenario.cluster), with every GPU of layer_rank_gpus().
/// @param options modelling choices of the layer simulation; its symmetry_reduction is not read: the layer is
///   symmetry-reduced wherever that applies (TP = 1 and symmetry_reduction_blocker() of the layer's CP placement
///   says ""; docs/simulator.md "Symmetry reduction") and the reduced run is exact, and simulated in full
///   otherwise, with the same results (StepResult::layer_simulation_note says which).
/// @param full_run_reason  non-empty: simulate the layer in full, for this reason (e.g. a trace of every
///   GPU's ops and flows in run order).
/// @param attention  optional: simulate_attention's schedule for this scenario and comm type
///   (AttentionSimulation::schedule, moved in); the layer wraps its programs instead of building them again when
///   it has the ones the layer run needs (the representatives' or every CP rank's), and builds them otherwise.
///   The results are the same either way.
/// @throws InputError when model.vocab_size is missing (training_model.hpp).
StepResult simulate_step(const Scenario& scenario, CpCommType cp_comm_type, int64_t data_parallel_size,
                         const Topology& topology, SimOptions options = {}, const std::string& full_run_reason = "",
                         Schedule attention = {});

/// Global transformer layers of each pipeline stage's model chunks: [stage][chunk] = {first, end}. Megatron-Core's
/// interleaved order (transformer_layer.py get_transformer_layer_offset): chunk v of stage k follows chunk v of
/// stage k − 1 and chunk v − 1 of the last stage; a chunk holds stage_layers[k] / V layers, or with the
/// account_for_* options (L + e + l) / (PP·V) "layers" less the embedding (stage 0, chunk 0) and the loss (last
/// stage, last chunk). The ranges cover 0 .. num_layers − 1 once.
std::vector<std::vector<std::pair<int64_t, int64_t>>> pipeline_layer_chunks(const Scenario& scenario);

/// The whole step of a per-layer cp_comm_type list naming several types, as Megatron runs it: each layer with its
/// own type. `per_type[i]` is simulate_step()'s result for the i-th of parallel.distinct_cp_comm_types(); each
/// stage's time is the sum over its layers (pipeline_layer_chunks) of their type's layer forward + backward (with
/// block recompute, the first recompute_num_layers layers of each chunk with the rerun, the others without);
/// memory holds the largest transient of the types; pipeline, DP collectives, optimizer and throughput follow as
/// in simulate_step(), with the DP overlap window per layer the mean of the model's layers. layer_forward_ps /
/// layer_backward_ps are those means; `layer` is per_type[0]'s.
/// @throws InputError without model.vocab_size; HCPSIM_ASSERT when `per_type` does not match the types.
StepResult compose_mixed_step(const Scenario& scenario, const std::vector<StepResult>& per_type);


}  // namespace hcpsim::sim
