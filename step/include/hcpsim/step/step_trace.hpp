#pragma once
/// The Chrome trace of a whole training step (simulate --step-trace): the simulated transformer layer's timeline
/// (one micro-batch on every TP × CP GPU, sim/trace_writer.hpp: GEMMs, norms, TP collectives, CP attention, flow
/// arrows, memory counters) and a "step" process with the iteration's phases as StepResult composes them
/// (step/training_step.hpp). Both start at t = 0: the layer is one layer of one micro-batch, the step is the whole
/// iteration at the same time scale.

#include "hcpsim/io/chrome_trace.hpp"
#include "hcpsim/step/training_step.hpp"

namespace hcpsim::sim {

/// Thread ids of the "step" process (its pid is step.layer.node_count + 1, after the nodes and the fabric).
constexpr int64_t kStepPhasesTid = 0;     ///< thread "iteration phases"
constexpr int64_t kStepPipelineTid = 1;   ///< thread "pipeline, slowest stage"

/// trace_timeline(step.layer, TP) (which needs the layer simulated with SimOptions::record_timeline; TP = the layer's
/// ranks / CP, so GPU threads are named by tp rank and cp rank) plus the process
/// "step" (pid step.layer.node_count + 1) with two threads:
///   "iteration phases" (tid kStepPhasesTid), cat "step", back to back from 0: "pipeline" (pipeline_ps), then
///     those with a non-zero duration of "DP grad reduce (exposed)" (dp_grad_reduce_exposed_ps), "DP param gather
///     (exposed)" (dp_param_gather_exposed_ps) and "optimizer" (optimizer_ps); the last ends at step_ps;
///   "pipeline, slowest stage" (tid kStepPipelineTid), cat "pipeline": num_microbatches slices "micro-batch <i>
///     fwd+bwd" of stage_microbatch_ps each, back to back, then "pipeline bubble" for the rest of pipeline_ps
///     ((PP − 1)/V stage times; the closed form adds it, 1F1B spreads it over warm-up and cool-down).
/// Every slice's args hold its duration_ps; the DP slices also the whole collective's time (whole_ps).
TraceTimeline step_trace_timeline(const StepResult& step);

}  // namespace hcpsim::sim
