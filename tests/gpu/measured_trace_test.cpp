#include <string>

#include "catch_compat.hpp"
#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/io/chrome_trace.hpp"
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
