#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "admission.hpp"
#include "app_common.hpp"
#include "progress.hpp"
#include "report/kernel_table.hpp"
#include "report/timeline_chart.hpp"
#include "hcpsim/config/attention_backend.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/io/chrome_trace.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/sim/attention_simulation.hpp"
#include "hcpsim/sim/simulation_cost.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "hcpsim/step/training_step.hpp"
#include "hcpsim/sim/trace_writer.hpp"
#include "hcpsim/step/step_summary.hpp"
#include "hcpsim/step/step_trace.hpp"

namespace hcpsim::app {
namespace {

// The per-rank table lists at most this many ranks (the rest are in --summary), so CP = 4096 stays readable.
// Source: readability choice (one screen).
constexpr size_t kMaxRankRows = 32;

struct SimulateOutputs {
  std::string trace;
  std::string step_trace;  ///< --step-trace: the whole layer's timeline and the step's phases (step/step_trace.hpp)
  std::string summary;
  std::string links;
  std::string timeline_svg;  ///< --timeline-svg: the per-GPU timeline chart (report/timeline_chart.hpp)
  bool kernels = false;  ///< --kernels: the busiest CP rank's attention kernels with their shapes and times
  std::string max_memory;  ///< --max-memory text; empty: the machine's default (admission.hpp)
  int threads = 1;  ///< --threads: schedule building and indexing (SimOptions::threads); default_threads() by default
};

int64_t times_layers(int64_t ps, int64_t layers) { return ps * layers; }

/// Whether an output needs every op's timeline entry of the attention run (--trace, --timeline-svg).
bool wants_timeline(const SimulateOutputs& out) { return !out.trace.empty() || !out.timeline_svg.empty(); }

std::string gb(double bytes) { return fmt::format("{:.2f} GB", bytes / 1e9); }

/// "where time goes": the per-phase TimeBreakdown of cp_rank 0 and of the busiest GPU (sim/simulator.hpp).
void print_time_breakdown(const sim::SimResult& r) {
  if (r.ranks.empty()) return;
  const auto& first = r.ranks.front();
  const auto& busiest = r.ranks[static_cast<size_t>(r.busiest_cp_rank)];
  fmt::print("  where time goes (cp_rank 0 / the busiest GPU, cp_rank {}), summed op time per layer (kernels on the two\n"
             "  compute streams can overlap, each slowed by sharing the GPU, so a phase's sums can exceed its span; \"lost\n"
             "  to comm\": part of the kernels' time, the GPU time they lost while communication ran beside them;\n"
             "  \"exposed comm\": the rank's own span in the phase, first op to last, with no kernel running: waiting for\n"
             "  messages and for the peers whose data it needs; a wait after the rank's last op is not in it, the rank\n"
             "  table below counts the whole layer):\n",
             r.busiest_cp_rank);
  fmt::print("    {:<10} {:>23} {:>23} {:>23} {:>23} {:>23} {:>23}\n", "phase", "attention kernels",
             "merges+corrections", "copies", "other compute", "lost to comm", "exposed comm");
  for (Phase ph : {Phase::forward, Phase::backward}) {
    const auto& a = first.time_breakdown[static_cast<size_t>(ph)];
    const auto& b = busiest.time_breakdown[static_cast<size_t>(ph)];
    const auto pair = [](sim::TimePs x, sim::TimePs y) { return human_time_ps(x) + " / " + human_time_ps(y); };
    fmt::print("    {:<10} {:>23} {:>23} {:>23} {:>23} {:>23} {:>23}\n", to_string(ph),
               pair(a.attention_kernel_ps, b.attention_kernel_ps), pair(a.merge_correction_ps, b.merge_correction_ps),
               pair(a.copy_ps, b.copy_ps), pair(a.other_compute_ps, b.other_compute_ps),
               pair(a.comm_slowdown_ps, b.comm_slowdown_ps), pair(a.exposed_comm_ps, b.exposed_comm_ps));
  }
}

/// Per link class: links, bytes, mean and max utilisation over the layer; says when the means include the idle
/// links of GPUs outside the simulated CP group (docs/simulator.md "simulate output").
void print_link_utilisation(const sim::SimResult& r, const ClusterSpec& cl) {
  for (LinkClass lc : {LinkClass::nvlink, LinkClass::network}) {
    const auto u = r.link_class_utilisation(lc);
    fmt::print("  link utilisation {:<8} links {:>6}  bytes {:>14}  mean {:5.1f}%  max {:5.1f}%\n", to_string(lc),
               u.links, u.bytes, 100 * u.mean_utilisation, 100 * u.max_utilisation);
  }
  const int64_t gpus = cl.nodes * cl.gpus_per_node, simulated = static_cast<int64_t>(r.ranks.size());
  if (simulated < gpus)
    fmt::print("  (the means count every link of the {} GPUs; the {} outside this CP group, other TP ranks and DP "
               "replicas, carry nothing in this simulation)\n",
               gpus, gpus - simulated);
}

/// ", block, 4 layers per model chunk" for partial recompute (recompute_method block or recompute_num_layers set),
/// "" otherwise (full recompute of every layer, one input saved per layer, as before those keys).
std::string partial_recompute_text(const Scenario& s) {
  const TrainingConfig& t = s.training;
  if (t.recompute_granularity != RecomputeGranularity::full) return "";
  if (t.recompute_method == RecomputeMethod::block)
    return t.recompute_num_layers ? fmt::format(" (block, first {} layers of each model chunk)", *t.recompute_num_layers)
                                  : std::string(" (block, every layer)");
  return t.recompute_num_layers ? fmt::format(" (uniform, groups of {} layer{})", *t.recompute_num_layers,
                                              *t.recompute_num_layers == 1 ? "" : "s")
                                : "";
}

/// ", FP8 GEMMs" with the recipe and FP8 parameters when set ("" without FP8), for the step's header line.
std::string fp8_text(const TrainingConfig& t) {
  if (!t.fp8) return "";
  std::string how = t.fp8_recipe == Fp8Recipe::tensorwise ? "current scaling" : "";
  if (t.fp8_param_gather) how += std::string(how.empty() ? "" : ", ") + "FP8 parameters";
  return ", FP8 GEMMs" + (how.empty() ? std::string() : " (" + how + ")");
}

/// The attention layer's idle time split in two: the busiest GPU's exposed communication and the load imbalance
/// (SimResult::critical_exposed_comm_ps, load_imbalance_ps), per layer and for `layers` layers.
void print_exposed_split(const sim::SimResult& r, int64_t layers) {
  const sim::TimePs exposed = r.critical_exposed_comm_ps(), imbalance = r.load_imbalance_ps();
  fmt::print("  {:<26} {:>12} {:>16}   (total - the busiest GPU's compute)\n", "exposed comm (busiest GPU)",
             human_time_ps(exposed), human_time_ps(times_layers(exposed, layers)));
  fmt::print("  {:<26} {:>12} {:>16}   (busiest - least busy GPU's compute)\n", "load imbalance",
             human_time_ps(imbalance), human_time_ps(times_layers(imbalance, layers)));
}

/// The header line of the whole-step section: what runs on how many GPUs, with which batch, recompute and FP8.
void print_step_header(const Scenario& s, const sim::StepResult& st) {
  const auto& p = s.parallel;
  const std::string what = st.layer_mix.empty()
                               ? fmt::format("{} [A={}, P={}]", to_string(st.cp_comm_type), st.a2a_size, st.p2p_size)
                               : "per-layer mix " + st.layer_mix;
  fmt::print("\nwhole training step: {}, TP {} x CP {} x DP {} x PP {} = {} GPUs, global batch {} "
             "({} micro-batches of {}), recompute {}{}{}{}\n",
             what, p.tensor_model_parallel_size,
             p.context_parallel_size, st.data_parallel_size, p.pipeline_model_parallel_size, st.world_size,
             st.global_batch_size, st.num_microbatches, s.model.micro_batch_size,
             to_string(s.training.recompute_granularity), partial_recompute_text(s),
             p.sequence_parallel && p.tensor_model_parallel_size > 1 ? ", sequence parallel" : "",  // off at TP 1
             fp8_text(s.training));
}

/// The whole-step section of `simulate` (sim/step.hpp).
void print_step(const Scenario& s, const sim::StepResult& st) {
  const auto& p = s.parallel;
  const auto& mb = st.memory;
  print_step_header(s, st);
  fmt::print("  calibration: {}\n", s.cluster.gpu.calibration);
  if (st.layer_mix.empty())
    fmt::print("  {:<34} {:>12}   (one micro-batch, simulated on all {} TP x CP GPUs: GEMMs, norms, TP collectives, "
               "CP attention)\n", "layer forward", human_time_ps(st.layer_forward_ps), st.layer.ranks.size());
  else
    fmt::print("  {:<34} {:>12}   (one micro-batch, mean over the layers of their comm types' layers above)\n",
               "layer forward", human_time_ps(st.layer_forward_ps));
  fmt::print("  {:<34} {:>12}\n", "layer backward", human_time_ps(st.layer_backward_ps));
  if (st.layer_backward_no_recompute_ps != st.layer_backward_ps)  // block recompute leaves layers whole
    fmt::print("  {:<34} {:>12}   (the layers block recompute leaves whole; the line above reruns the forward)\n",
               "layer backward, not recomputed", human_time_ps(st.layer_backward_no_recompute_ps));
  fmt::print("  {:<34} {:>12}   (the busiest GPU's time with no kernel running)\n", "layer exposed comm (busiest GPU)",
             human_time_ps(st.layer_critical_exposed_comm_ps));
  fmt::print("  {:<34} {:>12}   (busiest - least busy GPU's kernel time; what the least busy GPU waits on top)\n",
             "layer load imbalance", human_time_ps(st.layer_load_imbalance_ps));
  fmt::print("  layer simulation: {}\n", st.layer_simulation_note);
  fmt::print("  {:<34} {:>12}   (logits GEMM + loss + embedding, cost model)\n", "output layer fwd + bwd",
             human_time_ps(st.output_layer_forward_ps + st.output_layer_backward_ps));
  if (p.pipeline_model_parallel_size > 1)
    fmt::print("  {:<34} {:>12}   (each direction, per micro-batch)\n", "pipeline activation message",
               human_time_ps(st.pp_message_ps));
  fmt::print("  {:<34} {:>12}   ({} layers per stage)\n", "stage time per micro-batch",
             human_time_ps(st.stage_microbatch_ps), st.layers_per_stage);
  fmt::print("  {:<34} {:>12}   (1F1B bubble {:.1f}% = (PP-1)/(V*m))\n", "pipeline", human_time_ps(st.pipeline_ps),
             100 * st.pipeline_bubble_fraction);
  fmt::print("  {:<34} {:>12}   (exposed {}; over DP x CP = {} GPUs)\n",
             p.use_distributed_optimizer ? "DP grad reduce-scatter" : "DP grad all-reduce",
             human_time_ps(st.dp_grad_reduce_ps), human_time_ps(st.dp_grad_reduce_exposed_ps),
             st.data_parallel_size * p.context_parallel_size);
  if (p.use_distributed_optimizer)
    fmt::print("  {:<34} {:>12}   (exposed {})\n", "DP param all-gather", human_time_ps(st.dp_param_gather_ps),
               human_time_ps(st.dp_param_gather_exposed_ps));
  fmt::print("  {:<34} {:>12}\n", "optimizer step", human_time_ps(st.optimizer_ps));
  fmt::print("  {:<34} {:>12}\n", "time per iteration", human_time_ps(st.step_ps));
  fmt::print("  {:<34} {:>12.0f}\n", "tokens per second", st.tokens_per_s);
  fmt::print("  {:<34} {:>12.1f}   (convention megatron_causal, Megatron since 2025-03-06: causal attention counts "
             "half of s^2)\n", "model TFLOP/s per GPU", st.model_tflops_per_gpu);
  fmt::print("  {:<34} {:>12.1f}   (convention megatron_full_attention, Megatron before 2025-03-06)\n",
             "model TFLOP/s per GPU", st.model_tflops_per_gpu_full_attention);
  fmt::print("  {:<34} {:>11.1f}%   (megatron_causal model FLOPs / {:.1f} TFLOP/s dense BF16 peak{})\n", "MFU",
             100 * st.mfu, s.cluster.gpu.peak_bf16_flops_per_s / 1e12,
             s.training.fp8 && s.cluster.gpu.peak_fp8_flops_per_s > 0
                 ? fmt::format("; {:.1f}% of the {:.1f} TFLOP/s dense FP8 peak the GEMMs run at", 100 * st.mfu *
                                   s.cluster.gpu.peak_bf16_flops_per_s / s.cluster.gpu.peak_fp8_flops_per_s,
                               s.cluster.gpu.peak_fp8_flops_per_s / 1e12)
                 : std::string());
  if (s.model.qkv_format == QkvFormat::thd)
    fmt::print("  {:<34} tokens per second and model FLOPs count the real tokens (sum of L_s, no padding) and each "
               "packed sequence's own attention (sum of L_s^2); Megatron's formula counts the padded packed length\n",
               "packed sequences (thd)");
  fmt::print("  accuracy: optimistic against every published run it is validated on (docs/validation.md); read the "
             "throughput as an upper bound\n");
  fmt::print("  memory per GPU: {} of {} -> {} (headroom {})\n", gb(mb.total_bytes), gb(mb.capacity_bytes),
             mb.fits ? "fits" : "DOES NOT FIT", gb(mb.headroom_bytes));
  if (p.pipeline_model_parallel_size > 1)
    fmt::print("    pipeline stage {} (stages 0-{}, Megatron's pipeline rank) with {} transformer layers, the one that "
               "needs the most\n",
               mb.pipeline_stage, p.pipeline_model_parallel_size - 1, mb.stage_layers);
  const std::string fp8_weights =
      mb.fp8_parameters_per_gpu > 0
          ? fmt::format(" (linear weights in FP8) + FP8 transposes {}", gb(mb.fp8_weight_copies_bytes))
          : (mb.fp8_weight_copies_bytes > 0 ? fmt::format(" + FP8 weight copies {}", gb(mb.fp8_weight_copies_bytes))
                                            : std::string());
  fmt::print("    weights {}{}  gradients {}  optimizer {}{}  ({:.4g} parameters per GPU)\n", gb(mb.weights_bytes),
             fp8_weights,
             gb(mb.gradients_bytes), gb(mb.optimizer_bytes),
             p.use_distributed_optimizer ? " (sharded over DP x CP)" : " (not sharded)", mb.parameters_per_gpu);
  const char* in_flight = mb.in_flight_microbatches == 1 ? "micro-batch" : "micro-batches";
  // Every layer recomputed with its own input saved (uniform over groups of one layer): per-layer figures.
  const TrainingConfig& tc = s.training;
  const bool per_layer = tc.recompute_granularity != RecomputeGranularity::full ||
                         (tc.recompute_method == RecomputeMethod::uniform && tc.recompute_num_layers.value_or(1) == 1);
  if (per_layer) {
    fmt::print("    activations {} ({} per layer x {} layers x {:.3g} {} in flight{})  logits + loss {}\n",
               gb(mb.activations_bytes), gb(mb.activations_per_layer_bytes), mb.stage_layers,
               mb.in_flight_microbatches, in_flight,
               mb.recompute_working_bytes > 0
                   ? fmt::format(" + {} for the layer being recomputed", gb(mb.recompute_working_bytes))
                   : std::string(),
               gb(mb.output_layer_activations_bytes));
  } else {
    const RecomputePlan plan = recompute_plan(s, mb.stage_layers);
    fmt::print("    activations {} ({} saved layer inputs + {} whole layers, x {:.3g} {} in flight, + {} "
               "for the {} layer{} being recomputed)  logits + loss {}\n",
               gb(mb.activations_bytes), plan.saved_inputs, plan.full_layers, mb.in_flight_microbatches,
               in_flight, gb(mb.recompute_working_bytes), plan.working_layers, plan.working_layers == 1 ? "" : "s",
               gb(mb.output_layer_activations_bytes));
  }
  fmt::print("    transient CP attention + TP buffers {}  framework overhead {}\n",
             gb(mb.cp_attention_buffers_bytes), gb(mb.framework_overhead_bytes));
}

/// Writes the --trace, --summary, --links and --timeline-svg files of one comm type (`suffix` tells comm types
/// apart), the trace and the summary with the run's provenance; `chart_title` titles the timeline chart.
void write_outputs(const SimulateOutputs& out, const std::string& suffix, const sim::SimResult& r,
                   const sim::StepResult* step, const std::string& calibration, const Provenance& provenance,
                   const std::string& chart_title) {
  if (!out.trace.empty()) {
    TraceTimeline timeline = sim::trace_timeline(r);
    timeline.provenance = provenance;
    write_chrome_trace(out.trace + suffix, timeline);
    fmt::print("  wrote Chrome trace {}\n", out.trace + suffix);
  }
  if (!out.step_trace.empty() && step != nullptr) {
    TraceTimeline timeline = sim::step_trace_timeline(*step);
    timeline.provenance = provenance;
    write_chrome_trace(out.step_trace + suffix, timeline);
    fmt::print("  wrote step trace {}\n", out.step_trace + suffix);
  }
  if (!out.summary.empty()) {
    write_output_file(out.summary + suffix, with_provenance(sim::summary_json(r, step, calibration), provenance),
                      "summary");
    fmt::print("  wrote summary {}\n", out.summary + suffix);
  }
  if (!out.links.empty()) {
    sim::write_links_csv(out.links + suffix, r);
    fmt::print("  wrote link usage {}\n", out.links + suffix);
  }
  if (!out.timeline_svg.empty()) {
    write_output_file(out.timeline_svg + suffix, timeline_svg(r, chart_title), "timeline chart", "--timeline-svg");
    fmt::print("  wrote timeline chart {}\n", out.timeline_svg + suffix);
  }
}

/// --step-trace needs the step, and the step needs model.vocab_size: refuse before any work.
/// @throws InputError naming model.vocab_size when it is not set.
void check_step_trace(const Scenario& s, const SimulateOutputs& out) {
  if (!out.step_trace.empty() && !s.model.vocab_size)
    throw InputError(s.loc("model"), "model.vocab_size",
                     "--step-trace needs the whole training step, which needs model.vocab_size, and it is not set",
                     "add 'model.vocab_size: <tokens>' (or the override model.vocab_size=128256 for Llama 3)");
}

/// A per-layer cp_comm_type list with more than one type: what each report below stands for. Each type is simulated
/// and composed into a whole step as if every layer used it; the last report is the mix's step
/// (sim::compose_mixed_step: Megatron runs each layer with its own type).
void print_mixed_comm_types_note(const Scenario& s) {
  const auto distinct = s.parallel.distinct_cp_comm_types();
  if (s.parallel.cp_comm_type.size() <= 1 || distinct.size() <= 1) return;
  std::string counts;
  for (CpCommType t : distinct) {
    const auto n = std::count(s.parallel.cp_comm_type.begin(), s.parallel.cp_comm_type.end(), t);
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, to_string(t));
  }
  fmt::print("  note: parallel.cp_comm_type gives the {} layers their own comm types ({}); each comm type below is "
             "simulated and composed into a whole step as if every layer used it, and the last step is the mix's, "
             "each layer with its own type, as Megatron runs it\n",
             s.parallel.cp_comm_type.size(), counts);
}

/// What simulate prints before the comm types: the scenario header, the attention kernel, the validation warnings
/// and the note on a per-layer comm-type mix.
void print_preamble(const Scenario& s, const ValidationReport& report) {
  print_header(s);
  const AttentionKernelChoice kernel = resolve_attention_kernel(s);
  fmt::print("  attention kernel: {} ({}){}\n", to_string(kernel.kernel), kernel.reason,
             s.cluster.gpu.attn_fwd_table.empty() ? "; no efficiency table: the scalar attn_fwd_efficiency is used"
                                                  : "");
  print_warnings(report);
  print_mixed_comm_types_note(s);
}

/// The estimate line of a long simulate (admission's estimate: the largest comm type, times the comm types).
void announce_simulation(ProgressReporter& progress, const Scenario& s, int64_t data_parallel_size,
                         const SimulateOutputs& out, size_t types) {
  const sim::SimulationCost cost =
      simulation_cost(s, data_parallel_size, wants_timeline(out), !out.step_trace.empty());
  // The time is one thread's work: --threads shares the building of the rank programs, not the event loop.
  progress.announce(fmt::format("~{:.3g} schedule ops, ~{:.3g} GB peak, ~{} per comm type ({} comm type{}) on 1 "
                                "thread; rank programs built on {} thread{}, the event loop on 1; progress counts "
                                "each comm type's attention{}",
                                cost.ops, cost.bytes / 1e9, display_duration(cost.seconds), types,
                                types == 1 ? "" : "s", out.threads, out.threads == 1 ? "" : "s",
                                s.model.vocab_size ? " and whole step" : ""),
                    cost.seconds * static_cast<double>(types));
}

/// The whole training step of comm type `t`, printed; nothing (and a line saying why) without model.vocab_size.
/// `attention`: simulate_attention's schedule, wrapped into the layer instead of built again where it fits.
std::optional<sim::StepResult> simulate_and_print_step(const Scenario& s, CpCommType t, int64_t data_parallel_size,
                                                       const Topology& topology, const SimulateOutputs& out,
                                                       Schedule attention) {
  if (!s.model.vocab_size) {
    fmt::print("\nwhole training step: not computed (model.vocab_size is not set; add it, e.g. "
               "model.vocab_size=128256 for Llama 3, to get time per iteration, TFLOP/s per GPU and memory)\n");
    return std::nullopt;
  }
  // Only the step trace reads the layer's timeline; it draws every GPU's ops and the flows in run order, so it
  // needs the layer's full run.
  sim::SimOptions options;
  options.threads = out.threads;
  options.record_timeline = !out.step_trace.empty();
  options.record_flows = options.record_timeline;  // the step trace's message arrows
  sim::StepResult step = sim::simulate_step(s, t, data_parallel_size, topology, options,
                                            out.step_trace.empty() ? "" : "--step-trace needs the full run",
                                            std::move(attention));
  print_step(s, step);
  return step;
}

/// --threads, the output paths before any work (io/output_file.hpp check_requested_outputs), and that
/// --step-trace can be written for this scenario.
void check_outputs(const Scenario& s, const SimulateOutputs& out) {
  check_thread_count(out.threads, "--threads");
  check_step_trace(s, out);
  check_requested_outputs({{out.trace, "--trace", "trace"},
                           {out.step_trace, "--step-trace", "step trace"},
                           {out.summary, "--summary", "summary"},
                           {out.links, "--links", "links CSV"},
                           {out.timeline_svg, "--timeline-svg", "timeline chart"}});
}

/// The options of the attention simulation of every comm type, and in `full_run` why it must run in full ("" when
/// it may be symmetry-reduced).
sim::SimOptions attention_options(const SimulateOutputs& out, std::string& full_run) {
  const bool timeline = wants_timeline(out);
  sim::SimOptions options;
  options.threads = out.threads;
  options.record_timeline = timeline;
  options.record_flows = timeline;  // the trace's messages and the chart's flow lanes
  // The trace lists flows in run order, which the symmetry reduction changes, and both it and the timeline chart
  // show every GPU's ops, which a reduced run executes for the representatives only: they need the full run.
  full_run = !out.trace.empty()          ? "--trace needs the full run"
             : !out.timeline_svg.empty() ? "--timeline-svg needs the full run"
                                         : "";
  return options;
}

int cmd_simulate(const Common& c, const SimulateOutputs& out) {
  use_one_malloc_arena();  // before the first parallel build
  const uint64_t max_memory = max_memory_limit(out.max_memory);
  Scenario s = load_scenario(c.scenario_path, c.overrides);
  check_outputs(s, out);
  const auto report = validate_scenario(s, ValidationScope::placement);
  const bool timeline = wants_timeline(out);
  admit_simulation(s, report.data_parallel_size, max_memory, "simulate", timeline, !out.step_trace.empty());
  const auto types = buildable_types(s);
  const auto& cl = s.cluster;
  const Topology topology = Topology::from_cluster(cl);  // all validation before any output file is opened
  (void)sim::scenario_cp_gpus(s, report.data_parallel_size, topology);
  print_preamble(s, report);
  const int64_t layers = s.model.num_layers;
  const Provenance provenance = scenario_provenance(s, c.overrides);
  // Units: per comm type its attention simulation, then its whole step (when the model has a vocabulary), so a
  // single long comm type shows progress halfway.
  const size_t units_per_type = s.model.vocab_size ? 2 : 1;
  ProgressReporter progress("simulate", types.size() * units_per_type, progress_settings());
  announce_simulation(progress, s, report.data_parallel_size, out, types.size());
  size_t units_done = 0;
  std::vector<sim::StepResult> steps;
  for (CpCommType t : types) {
    const auto layout = cp_layout_for(s, t);
    std::string full_run;
    const sim::SimOptions options = attention_options(out, full_run);
    auto attention = sim::simulate_attention(s, t, report.data_parallel_size, topology, options, full_run);
    const sim::SimResult& r = attention.result;
    const std::string& reduction_note = attention.note;
    fmt::print("\nsimulate {} [A={}, P={}] on {} x {} ({}), one attention layer per TP rank, flow-level network ({})\n",
               to_string(t), layout.a2a_size(), layout.p2p_size(), cl.nodes, cl.gpus_per_node, cl.gpu.name,
               cl.topology.vertices.empty() ? to_string(cl.fabric.kind) + " fabric" : std::string("explicit topology"));
    fmt::print("  {:<26} {:>12} {:>16}\n", "", "per layer", fmt::format("x {} layers", layers));
    fmt::print("  {:<26} {:>12} {:>16}\n", "forward", human_time_ps(r.forward_ps),
               human_time_ps(times_layers(r.forward_ps, layers)));
    fmt::print("  {:<26} {:>12} {:>16}\n", "backward", human_time_ps(r.backward_ps),
               human_time_ps(times_layers(r.backward_ps, layers)));
    fmt::print("  {:<26} {:>12} {:>16}   ({} ps per layer)\n", "total", human_time_ps(r.total_ps),
               human_time_ps(times_layers(r.total_ps, layers)), r.total_ps);
    sim::TimePs max_compute = 0;
    int64_t peak = 0;
    for (const auto& rs : r.ranks) {
      max_compute = std::max(max_compute, rs.compute_busy_ps);
      peak = std::max(peak, rs.peak_memory_bytes);
    }
    fmt::print("  {:<26} {:>12} {:>16}\n", "compute (busiest GPU)", human_time_ps(max_compute),
               human_time_ps(times_layers(max_compute, layers)));
    print_exposed_split(r, layers);
    print_time_breakdown(r);
    if (out.kernels)
      print_kernel_table(build_schedule(t, layout, attention_shape(s), out.threads), r.busiest_cp_rank, cl.gpu);
    fmt::print("  peak attention memory per GPU: {} (max over CP ranks; one layer's attention buffers)\n",
               human_bytes(static_cast<double>(peak)));
    print_link_utilisation(r, cl);
    const double fwd_f = r.phase_flops(Phase::forward), bwd_f = r.phase_flops(Phase::backward);
    fmt::print("  attention FLOPs: forward {:.6g}, backward {:.6g} (all CP ranks of one TP rank)\n", fwd_f, bwd_f);
    for (Phase ph : {Phase::forward, Phase::backward}) {
      for (sim::LinkLevel lv : {sim::LinkLevel::intra_node, sim::LinkLevel::inter_node}) {
        const auto& m = r.message_totals(ph, lv);
        fmt::print("  {:<8} {:<10} messages {:>5}  bytes {:>14} ({})\n", to_string(ph), sim::to_string(lv), m.count,
                   m.bytes, human_bytes(static_cast<double>(m.bytes)));
      }
    }
    fmt::print("  {:>7} {:>5} {:>5} {:>12} {:>12} {:>12} {:>14} {:>14}\n", "cp_rank", "node", "gpu", "compute", "comm",
               "exposed", "peak fwd mem", "peak bwd mem");
    for (size_t i = 0; i < r.ranks.size() && i < kMaxRankRows; ++i) {
      const auto& rs = r.ranks[i];
      fmt::print("  {:>7} {:>5} {:>5} {:>12} {:>12} {:>12} {:>14} {:>14}\n", rs.cp_rank, rs.node, rs.gpu,
                 human_time_ps(rs.compute_busy_ps), human_time_ps(rs.comm_busy_ps), human_time_ps(rs.exposed_comm_ps),
                 human_bytes(static_cast<double>(rs.phase_peak_memory_bytes[0])),
                 human_bytes(static_cast<double>(rs.phase_peak_memory_bytes[1])));
    }
    if (r.ranks.size() > kMaxRankRows) fmt::print("  ... {} more CP ranks (see --summary)\n", r.ranks.size() - kMaxRankRows);
    fmt::print("  (compute: time a kernel runs on the GPU; comm: time its comm stream is in an op, waiting for a peer\n"
               "  included; exposed: the layer's time with no kernel running, so a rank that finishes early counts its\n"
               "  wait for the last one)\n");
    fmt::print("  simulated {} events, {} flows, {} max-min recomputations\n", r.event_count, r.flow_count,
               r.network_recomputes);
    fmt::print("  {}\n", reduction_note);
    if (units_per_type == 2) progress.update(++units_done);
    const std::optional<sim::StepResult> step =
        simulate_and_print_step(s, t, report.data_parallel_size, topology, out, std::move(attention.schedule));
    if (step) steps.push_back(*step);
    write_outputs(out, type_suffix(types, t), r, step ? &*step : nullptr, cl.gpu.calibration,
                  provenance, "hcpsim simulate: " + s.name + " (" + to_string(t) + ")");
    progress.update(++units_done);
  }
  if (steps.size() > 1 && s.parallel.cp_comm_type.size() > 1) {
    const sim::StepResult mixed = sim::compose_mixed_step(s, steps);
    print_step(s, mixed);
    if (!out.summary.empty()) {  // next to the per-type summaries (SUMMARY.<type>)
      write_output_file(out.summary + ".mix",
                        with_provenance(sim::mixed_step_summary_json(mixed, cl.gpu.calibration), provenance), "summary");
      fmt::print("  wrote summary {}\n", out.summary + ".mix");
    }
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_simulate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("simulate", "time one attention layer of the schedule on the cluster, then the whole training step");
  auto common = std::make_shared<Common>();
  auto out = std::make_shared<SimulateOutputs>();
  add_scenario_args(cmd, *common);
  cmd->add_option("--trace", out->trace, "write a Chrome trace (chrome://tracing, Perfetto)");
  cmd->add_option("--step-trace", out->step_trace,
                  "write a Chrome trace of the whole transformer layer (all TP x CP GPUs) and the step's phases "
                  "(needs model.vocab_size)");
  cmd->add_option("--summary,--json", out->summary, "write a JSON summary (--json is an alias)");
  cmd->add_option("--links", out->links, "write per-link bytes and busy time as CSV");
  cmd->add_option("--timeline-svg", out->timeline_svg,
                  "write an SVG chart of the layer per GPU over time: each stream's ops and each link's messages");
  cmd->add_flag("--kernels", out->kernels,
                "list the busiest CP rank's attention kernels, merges and copies with their block shapes and times");
  add_max_memory_option(cmd, out->max_memory);
  out->threads = default_threads();
  cmd->add_option("--threads", out->threads,
                  "CPU threads that build the rank programs (default: every hardware thread, at most that many; "
                  "the event loop runs on one; results are identical for any count)")
      ->capture_default_str();
  add_quiet_flag(cmd);
  cmd->callback([&exit_code, common, out] { exit_code = cmd_simulate(*common, *out); });
  return cmd;
}

}  // namespace hcpsim::app
