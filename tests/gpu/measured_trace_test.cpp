#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../sim/sim_test_util.hpp"
#include "../sim/trace_checks.hpp"
#include "catch_compat.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/io/chrome_trace.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "hcpsim/sim/trace_writer.hpp"

using namespace hcpsim;

namespace {

gpu::MeasuredOp measured(int64_t cp_rank, OpIndex op, OpKind kind, Stream stream, double start_s, double end_s,
                         const std::string& kernel) {
  gpu::MeasuredOp m;
  m.cp_rank = cp_rank;
  m.op_index = op;
  m.kind = kind;
  m.stream = stream;
  m.phase = kind == OpKind::attn_bwd_block ? Phase::backward : Phase::forward;
  m.ring_step = 1;
  m.label = "op " + std::to_string(op);
  m.start_s = start_s;
  m.end_s = end_s;
  m.flops = 2.5e9;
  m.bytes = 4096;
  m.kernel = kernel;
  return m;
}

}  // namespace

TEST_CASE("gpu: the measured trace is laid out exactly like the simulator's trace of the same ops", "[gpu_plan]") {
  gpu::DeviceRunResult run;
  run.timeline = {measured(0, 0, OpKind::attn_fwd_block, Stream::compute, 1e-6, 3.5e-6, "tensor_core"),
                  measured(0, 1, OpKind::send_recv, Stream::comm, 1e-6, 2e-6, ""),
                  measured(1, 0, OpKind::attn_bwd_block, Stream::cp, 0.0, 8.25e-6, "clear")};
  // The same ops as a SimResult of one node with CP rank r on GPU r: what the simulator's writer prints for it.
  sim::SimResult sim;
  sim.node_count = 1;
  sim.ranks.resize(2);
  for (int64_t r = 0; r < 2; ++r) {
    sim.ranks[static_cast<size_t>(r)].cp_rank = r;
    sim.ranks[static_cast<size_t>(r)].gpu = r;
  }
  for (const gpu::MeasuredOp& m : run.timeline) {
    sim::TimelineEntry e;
    e.cp_rank = m.cp_rank;
    e.stream = m.stream;
    e.op_index = m.op_index;
    e.kind = m.kind;
    e.phase = m.phase;
    e.ring_step = m.ring_step;
    e.start_ps = static_cast<int64_t>(m.start_s * 1e12);
    e.end_ps = static_cast<int64_t>(m.end_s * 1e12);
    e.flops = m.flops;
    e.bytes = m.bytes;
    e.label = m.kernel.empty() ? m.label : m.label + " [" + m.kernel + "]";
    sim.timeline.push_back(e);
  }
  const std::string measured_text = chrome_trace_json(gpu::measured_timeline(run));
  REQUIRE(measured_text == sim::chrome_trace_json(sim));
  REQUIRE(measured_text.find("\"op 0 [tensor_core]\"") != std::string::npos);
  REQUIRE(measured_text.find("\"gpu 1 cp rank 1 cp_stream\"") != std::string::npos);
  // 8.25 µs = 8 250 000 ps exactly.
  REQUIRE(measured_text.find("\"end_ps\": 8250000") != std::string::npos);
}

TEST_CASE("gpu: the measured trace has the simulator's arrows and memory counters for the schedule it ran",
          "[gpu_plan]") {
  // A p2p ring of 2 "measured" at the simulator's times: the measured trace must draw every message and peak at the
  // simulator's memory peak.
  const Schedule schedule =
      build_schedule(CpCommType::p2p, CpLayout(1, 2, 64), sim::test::small_attention_shape(64));
  const ClusterSpec cluster = *cluster_preset("dgx-h100", 1);
  const sim::SimResult sim = sim::simulate(schedule, cluster, std::vector<int64_t>{0, 0});
  gpu::DeviceRunResult run;
  for (const sim::TimelineEntry& e : sim.timeline) {
    gpu::MeasuredOp m;
    m.cp_rank = e.cp_rank;
    m.op_index = e.op_index;
    m.kind = e.kind;
    m.phase = e.phase;
    m.stream = e.stream;
    m.label = e.label;
    m.start_s = static_cast<double>(e.start_ps) * 1e-12;
    m.end_s = static_cast<double>(e.end_ps) * 1e-12;
    run.timeline.push_back(m);
  }
  const auto trace = nlohmann::json::parse(chrome_trace_json(gpu::measured_timeline(run, schedule)));
  const test::TraceFormCounts n = test::check_trace_viewer_form(trace, sim);
  REQUIRE(n.arrows == sim.flows.size());
  REQUIRE(n.arrows > 0);
  REQUIRE(n.counters > 0);
  // Without the schedule: slices only, as before.
  const std::string plain = chrome_trace_json(gpu::measured_timeline(run));
  REQUIRE(plain.find("\"ph\": \"s\"") == std::string::npos);
  REQUIRE(plain.find("\"ph\": \"C\"") == std::string::npos);
}
