#include "hcpsim/step/step_trace.hpp"

#include <algorithm>
#include <string>

#include "hcpsim/sim/trace_writer.hpp"

namespace hcpsim::sim {

TraceTimeline step_trace_timeline(const StepResult& step) {
  // The layer's ranks are TP x CP (layer_builder.hpp layer_rank): name them by both.
  const int64_t cp = std::max<int64_t>(1, step.a2a_size * step.p2p_size);
  TraceTimeline t = trace_timeline(step.layer, std::max<int64_t>(1, static_cast<int64_t>(step.layer.ranks.size()) / cp));
  const int64_t pid = step.layer.node_count + 1;  // after the nodes and the fabric
  t.processes.push_back(TraceProcess{pid, "step", pid});
  t.threads.push_back(TraceThread{pid, kStepPhasesTid, "iteration phases"});
  t.threads.push_back(TraceThread{pid, kStepPipelineTid, "pipeline, slowest stage"});
  int64_t at = 0;
  const auto phase = [&](const std::string& name, TimePs duration, TimePs whole, bool always) {
    if (duration <= 0 && !always) return;
    std::vector<TraceArg> args{{"duration_ps", duration}};
    if (whole >= 0) args.push_back({"whole_ps", whole});
    t.slices.push_back(TraceSlice{name, "step", pid, kStepPhasesTid, at, at + duration, std::move(args)});
    at += duration;
  };
  phase("pipeline", step.pipeline_ps, -1, true);
  phase("DP grad reduce (exposed)", step.dp_grad_reduce_exposed_ps, step.dp_grad_reduce_ps, false);
  phase("DP param gather (exposed)", step.dp_param_gather_exposed_ps, step.dp_param_gather_ps, false);
  phase("optimizer", step.optimizer_ps, -1, false);
  int64_t mb_at = 0;
  for (int64_t i = 0; i < step.num_microbatches && mb_at + step.stage_microbatch_ps <= step.pipeline_ps; ++i) {
    t.slices.push_back(TraceSlice{"micro-batch " + std::to_string(i) + " fwd+bwd", "pipeline", pid, kStepPipelineTid,
                                  mb_at, mb_at + step.stage_microbatch_ps,
                                  {{"duration_ps", step.stage_microbatch_ps}, {"layers", step.layers_per_stage}}});
    mb_at += step.stage_microbatch_ps;
  }
  if (step.pipeline_ps > mb_at)
    t.slices.push_back(TraceSlice{"pipeline bubble", "pipeline", pid, kStepPipelineTid, mb_at, step.pipeline_ps,
                                  {{"duration_ps", step.pipeline_ps - mb_at}}});
  return t;
}

}  // namespace hcpsim::sim
