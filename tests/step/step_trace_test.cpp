// The whole-step Chrome trace (step/step_trace.hpp): the simulated layer in the viewer form and the step's phases.
#include <algorithm>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "catch_compat.hpp"
#include "../sim/trace_checks.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/sim/simulation_cost.hpp"
#include "hcpsim/step/layer_builder.hpp"
#include "hcpsim/step/step_trace.hpp"
#include "small_step_scenario.hpp"

using namespace hcpsim;

TEST_CASE("step: the step trace holds the whole layer and the step's phases with StepResult's durations", "[step]") {
  const Scenario s = test::small({"parallel.tensor_model_parallel_size=2", "parallel.sequence_parallel=true",
                                  "parallel.pipeline_model_parallel_size=2", "model.global_batch_size=8"});
  const sim::StepResult st = test::step_of(s);
  REQUIRE(st.layer.ranks.size() == 4);  // TP 2 x CP 2
  REQUIRE(st.num_microbatches == 8);
  const auto trace = nlohmann::json::parse(chrome_trace_json(sim::step_trace_timeline(st)));
  const test::TraceFormCounts n = test::check_trace_viewer_form(trace, st.layer);
  REQUIRE(n.arrows > 0);
  REQUIRE(n.counters > 0);
  const int64_t pid = st.layer.node_count + 1;
  std::map<std::string, double> phase_dur;
  std::map<std::string, double> phase_ts;
  std::map<std::string, int64_t> phase_ps;
  int64_t microbatches = 0;
  double bubble = -1;
  bool layer_gemm = false;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name" && e.at("pid") == pid)
      REQUIRE(e.at("args").at("name") == "step");
    if (e.at("ph") != "X") continue;
    if (e.at("cat") == "gemm") layer_gemm = true;
    if (e.at("pid") != pid) continue;
    const std::string name = e.at("name");
    if (e.at("tid") == sim::kStepPhasesTid) {
      phase_dur[name] = e.at("dur");
      phase_ts[name] = e.at("ts");
      phase_ps[name] = e.at("args").at("duration_ps");
    } else if (name == "pipeline bubble") {
      bubble = e.at("dur");
    } else {
      REQUIRE(e.at("dur").get<double>() == ps_to_us(st.stage_microbatch_ps));
      ++microbatches;
    }
  }
  REQUIRE(layer_gemm);  // the whole layer, not only the attention
  // Ranks are named by TP and CP rank (layer rank r = cp·TP + tp), messages by GPUs: gpu 1 is tp rank 1 of cp rank 0.
  size_t named = 0, gpu_flows = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      const std::string thread = e.at("args").at("name");
      named += thread == "gpu 1 tp rank 1 cp rank 0 compute" || thread == "gpu 2 tp rank 0 cp rank 1 compute" ? 1 : 0;
      REQUIRE(thread.find("cp rank 2") == std::string::npos);
      REQUIRE(thread.find("cp rank 3") == std::string::npos);
    }
    if (e.at("ph") == "X" && e.at("args").contains("tp_rank")) {
      REQUIRE(e.at("args").at("cp_rank").get<int64_t>() < 2);
      REQUIRE(e.at("args").at("tp_rank").get<int64_t>() < 2);
    }
    if (e.at("ph") == "s") {
      REQUIRE(e.at("name").get<std::string>().rfind("gpu ", 0) == 0);
      ++gpu_flows;
    }
  }
  REQUIRE(named == 2);
  REQUIRE(gpu_flows == n.arrows);
  REQUIRE(phase_dur.at("pipeline") == ps_to_us(st.pipeline_ps));
  REQUIRE(phase_ts.at("pipeline") == 0);
  REQUIRE(phase_dur.at("optimizer") == ps_to_us(st.optimizer_ps));
  REQUIRE(st.dp_grad_reduce_exposed_ps > 0);
  REQUIRE(phase_dur.at("DP grad reduce (exposed)") == ps_to_us(st.dp_grad_reduce_exposed_ps));
  REQUIRE(phase_ts.at("DP grad reduce (exposed)") == ps_to_us(st.pipeline_ps));
  // The phases add up to the iteration, exactly.
  REQUIRE(phase_ps.at("pipeline") + phase_ps.at("DP grad reduce (exposed)") +
              (phase_ps.count("DP param gather (exposed)") ? phase_ps.at("DP param gather (exposed)") : 0) +
              phase_ps.at("optimizer") ==
          st.step_ps);
  REQUIRE(phase_ps.at("optimizer") == st.optimizer_ps);
  REQUIRE(microbatches == st.num_microbatches);
  // PP 2, V 1: the bubble is one stage time (the closed form's (PP - 1)/V).
  REQUIRE(bubble == ps_to_us(st.pipeline_ps - st.num_microbatches * st.stage_microbatch_ps));
  REQUIRE(bubble > 0);
}

TEST_CASE("step: kLayerOpsPerRank bounds the layer ops a rank adds to its attention schedule", "[step]") {
  // No, selective and full recompute, TP 1 and 2 with sequence parallelism, GQA, every comm type: the estimate of the
  // step trace's timeline (sim::estimate_layer_timeline_cost) must not undercount.
  for (const std::string recompute : {"none", "selective", "full"}) {
    for (const std::string tp : {"1", "2"}) {
      for (const std::string type : {"p2p", "a2a", "all_gather"}) {
        if (tp == "2" && type == "a2a") continue;  // one KV head per TP rank: no a2a over CP 2
        INFO(recompute << " TP " << tp << " " << type);
        const Scenario s = test::small({"parallel.tensor_model_parallel_size=" + tp, "parallel.sequence_parallel=true",
                                        "parallel.cp_comm_type=" + type,
                                        "training.recompute_granularity=" + recompute});
        const CpCommType t = s.parallel.cp_comm_type.front();
        const Schedule layer = build_layer_schedule(s, t);
        const CpLayout layout = cp_layout_for(s, t);
        size_t most = 0;
        for (const RankProgram& p : layer.ranks) most = std::max(most, p.ops.size());
        const double attention = sim::schedule_ops_per_rank(t, layout.a2a_size(), layout.p2p_size());
        const double f = recompute == "full" ? 2 : 1;  // the attention's forward runs again
        REQUIRE(static_cast<double>(most) <= f * attention + sim::kLayerOpsPerRank);
        // ... and not far above the busiest rank's ops (within 2x + 60).
        REQUIRE(f * attention + sim::kLayerOpsPerRank <= 2 * static_cast<double>(most) + 60);
        const sim::SimulationCost c = sim::estimate_layer_timeline_cost(s);
        REQUIRE(c.ops == (f * attention + sim::kLayerOpsPerRank) * static_cast<double>(layer.ranks.size()));
        REQUIRE(c.bytes > 0);
      }
    }
  }
}
