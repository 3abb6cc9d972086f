// The GPU backend's execution plan, tested without a GPU: enqueue order, communication batches, cross-stream
// waits, copy segments, the schedules it rejects (a deadlock, a buffer hazard), the memory bound, and the measured
// per-op CSV of a device run.
// The host replay of the plan is in host_replay_test.cpp, the stream and event protocol in stream_race_test.cpp.

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "catch_compat.hpp"
#include "death_test.hpp"
#include "test_util.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/gpu/execution_plan.hpp"
#include "hcpsim/gpu/host_replay.hpp"
#include "hcpsim/step/calibration.hpp"

using namespace hcpsim;
using namespace hcpsim::gpu;

namespace {

AttentionShape make_shape(int64_t b, int64_t s, int64_t h, int64_t hkv, int64_t dk, int64_t dv, bool causal) {
  return test::attention_shape(b, s, h, hkv, dk, dv, causal);
}

Schedule schedule_for(int64_t A, int64_t P, const AttentionShape& shape, CpCommType type = CpCommType::a2a_p2p) {
  return build_schedule(type, CpLayout(A, P, shape.seq_length), shape);
}

}  // namespace

TEST_CASE("gpu plan: every op is enqueued once, batches pair every send with its receive", "[gpu_plan]") {
  const AttentionShape shape = make_shape(1, 48, 4, 4, 8, 8, true);
  for (auto [A, P] : {std::pair<int64_t, int64_t>{2, 2}, {1, 4}, {2, 3}, {4, 1}}) {
    const CpCommType type = A == 1 ? CpCommType::p2p : (P == 1 ? CpCommType::a2a : CpCommType::a2a_p2p);
    const Schedule s = schedule_for(A, P, shape, type);
    const ExecutionPlan plan = build_execution_plan(s);
    INFO("A=" << A << " P=" << P);
    std::map<OpRef, size_t> position;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const PlanStep& st = plan.steps[i];
      if (st.is_batch) {
        for (const CommItem& item : st.items) REQUIRE(position.emplace(item.op, i).second);
      } else {
        REQUIRE(position.emplace(st.op, i).second);
      }
    }
    size_t ops = 0;
    for (const RankProgram& p : s.ranks) ops += p.ops.size();
    REQUIRE(position.size() == ops);
    // Program order per rank is enqueue order, and every wait points at an op enqueued before.
    for (size_t r = 0; r < s.ranks.size(); ++r) {
      for (size_t i = 1; i < s.ranks[r].ops.size(); ++i) {
        REQUIRE(position.at(OpRef{static_cast<int64_t>(r), static_cast<OpIndex>(i - 1)}) <=
                position.at(OpRef{static_cast<int64_t>(r), static_cast<OpIndex>(i)}));
      }
      for (size_t i = 0; i < s.ranks[r].ops.size(); ++i) {
        for (OpIndex w : plan.waits[r][i]) {
          REQUIRE(w < static_cast<OpIndex>(i));
          REQUIRE(s.ranks[r].ops[static_cast<size_t>(w)].stream != s.ranks[r].ops[i].stream);
        }
      }
    }
    // Each batch: a send's receiver is in the same batch; messages carry what the schedule says.
    int64_t recvs = 0, expected_recvs = 0;
    for (const RankProgram& p : s.ranks)
      for (const Op& op : p.ops)
        if (const auto* sr = std::get_if<SendRecvOp>(&op.payload); sr != nullptr && sr->recv_peer >= 0) ++expected_recvs;
    for (const PlanStep& st : plan.steps) {
      if (!st.is_batch) continue;
      std::set<int64_t> ranks;
      for (const CommItem& item : st.items) ranks.insert(item.op.rank);
      for (const CommItem& item : st.items) {
        for (int64_t src : item.sources) REQUIRE(ranks.count(src) == 1);
        const Op& op = s.ranks[static_cast<size_t>(item.op.rank)].ops[static_cast<size_t>(item.op.op)];
        if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
          if (sr->send_peer >= 0) REQUIRE(ranks.count(sr->send_peer) == 1);
          if (sr->recv_peer >= 0) {
            ++recvs;
            int64_t elements = 0;
            for (BufferId id : sr->recv) elements += s.ranks[static_cast<size_t>(item.op.rank)].buffers[static_cast<size_t>(id)].elements();
            int64_t moved = 0;
            for (const CopySegment& seg : item.incoming) moved += seg.elements();
            REQUIRE(moved == elements);
          }
        }
      }
    }
    REQUIRE(recvs == expected_recvs);
    REQUIRE(plan.batches > 0);
  }
}

TEST_CASE("gpu plan: a2a scatter moves 2A half-chunks into every member", "[gpu_plan]") {
  // [A=2, P=2], S = 16, b = 1: each member's pre-a2a buffer has s = 4 rows (c = 2); the scatter output has A·s = 8
  // rows of H/A heads: 2A = 4 segments of c rows, each of hl·w contiguous floats per row.
  const AttentionShape shape = make_shape(1, 16, 4, 2, 8, 8, true);
  const Schedule s = schedule_for(2, 2, shape);
  const ExecutionPlan plan = build_execution_plan(s);
  const PlanStep* first = nullptr;
  for (const PlanStep& st : plan.steps) {
    if (st.is_batch) {
      first = &st;
      break;
    }
  }
  REQUIRE(first != nullptr);
  REQUIRE(first->items.size() == 4);  // all four ranks: two a2a groups of the first tensor
  for (const CommItem& item : first->items) {
    REQUIRE(item.incoming.size() == 4);
    for (const CopySegment& seg : item.incoming) {
      REQUIRE(seg.rows == 2);
      REQUIRE(seg.batch == 1);
    }
    REQUIRE(item.sources.size() == 1);  // the other member of its a2a group
    REQUIRE(item.readers == item.sources);
  }
}

TEST_CASE("gpu plan: layer-model ops and fp64 are rejected with a fix", "[gpu_plan]") {
  Op gemm;
  gemm.payload = GemmOp{16, 16, 16, false};
  gemm.label = "qkv";
  try {
    (void)op_buffer_uses(gemm);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "schedule");
    REQUIRE(std::string(e.what()).find("attention schedule") != std::string::npos);
  }
  // A whole layer schedule is refused at the plan's entry, naming what to do instead.
  Schedule layer_kind;
  layer_kind.kind = ScheduleKind::layer;
  try {
    (void)build_execution_plan(layer_kind);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "schedule");
    REQUIRE(std::string(e.what()).find("a layer schedule") != std::string::npos);
    REQUIRE(e.fix().find("build_schedule") != std::string::npos);
  }
  try {
    check_gpu_dtype(Dtype::fp64);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "--dtype");
    REQUIRE(e.fix().find("--backend cpu") != std::string::npos);
  }
}

TEST_CASE("gpu plan: a schedule that deadlocks under rendezvous semantics is an error naming the ranks", "[gpu_plan]") {
  // Both ranks start with a send-only op: rank 0's send needs rank 1 at a receive, and vice versa (rendezvous,
  // NCCL grouped send/recv; the walker is core's, program_walker_test.cpp checks its report in full).
  const Schedule s = hcpsim::test::exchange_deadlock_schedule();
  hcpsim::test::check_schedule(s);
  try {
    (void)build_execution_plan(s);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "schedule");
    const std::string what = e.what();
    REQUIRE(what.find("deadlock") != std::string::npos);
    REQUIRE(what.find("cp_rank 0 op #2") != std::string::npos);
    REQUIRE(what.find("cp_rank 1 op #2") != std::string::npos);
    REQUIRE(e.fix().find("a send must meet its receive") != std::string::npos);
  }
}

TEST_CASE("gpu plan: a dropped dep is a schedule hazard the plan asserts on instead of repairing", "[gpu_plan]") {
  // a2a+p2p [2, 2]: the first ring send (comm) reads kv_ring0.k, which a copy on the compute stream fills; the send
  // depends on the next copy (kv_ring0.v) on that stream. Without the dep nothing orders the copy before the send
  // (the ordering contract, schedule.hpp): the plan used to add the wait silently, now it aborts naming both ops.
  Schedule s = schedule_for(2, 2, make_shape(1, 32, 4, 2, 8, 8, true));
  RankProgram& r = s.ranks[0];
  OpIndex send = -1;
  for (size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i].label == "fwd step 0 send/recv kv") send = static_cast<OpIndex>(i);
  REQUIRE(send >= 0);
  REQUIRE(r.ops[static_cast<size_t>(send)].deps.size() == 1);
  const ExecutionPlan with_dep = build_execution_plan(s);  // the plan of the schedule as built
  REQUIRE(with_dep.waits[0][static_cast<size_t>(send)].size() == 1);
  r.ops[static_cast<size_t>(send)].deps.clear();
  const auto end = test::run_in_child([&] { (void)build_execution_plan(s); });
  INFO("stderr: " << end.stderr_text);
  REQUIRE(end.aborted);
  // Release builds: the plan's assertion; debug builds run check_hazards first, which names the same two ops.
  REQUIRE(end.stderr_text.find("copy 'fwd kv ring buffer 0 (k)'") != std::string::npos);
  REQUIRE(end.stderr_text.find("send_recv 'fwd step 0 send/recv kv'") != std::string::npos);
  REQUIRE(end.stderr_text.find("kv_ring0.k") != std::string::npos);
}

TEST_CASE("gpu plan: the memory bound walks inputs, allocs and frees in program order", "[gpu_plan]") {
  // Inputs q (2·4·1·8 = 64 floats); alloc x (64), alloc y (32), free x, alloc z (16): live 64 → 128 → 160 → 96 →
  // 112; peak 160 floats = 640 bytes (float storage whatever BufferDecl::dtype says).
  RankProgram p;
  p.buffers = {BufferDecl{"q", 2, 4, 1, 8, Dtype::bf16}, BufferDecl{"x", 2, 4, 1, 8, Dtype::bf16},
               BufferDecl{"y", 1, 4, 1, 8, Dtype::bf16}, BufferDecl{"z", 1, 2, 1, 8, Dtype::fp32}};
  p.inputs = {IoBinding{"q", 0, {0, 1, 2, 3}, 0}};
  for (OpPayload payload : {OpPayload{AllocOp{1}}, OpPayload{AllocOp{2}}, OpPayload{FreeOp{1}}, OpPayload{AllocOp{3}}}) {
    Op op;
    op.payload = payload;
    p.ops.push_back(op);
  }
  REQUIRE(planned_peak_bytes(p) == 640);
  // A real schedule: the bound is at least the inputs and at most every buffer at once.
  const Schedule s = schedule_for(2, 2, make_shape(1, 64, 4, 2, 16, 16, true));
  for (const RankProgram& rp : s.ranks) {
    int64_t all = 0, inputs = 0;
    for (const BufferDecl& d : rp.buffers) all += d.elements() * 4;
    for (const IoBinding& b : rp.inputs) inputs += rp.buffers[static_cast<size_t>(b.buffer)].elements() * 4;
    REQUIRE(planned_peak_bytes(rp) > inputs);
    REQUIRE(planned_peak_bytes(rp) <= all);
  }
}

TEST_CASE("gpu plan: the measured per-op CSV is what hcpsim calibrate reads", "[gpu_plan]") {
  // A device run's timeline, synthesised: an attention forward block, an lse merge and a message. The CSV must
  // parse with the calibration reader, keep the attention row's shape and time, and skip the message.
  gpu::DeviceRunResult run;
  gpu::MeasuredOp fwd;
  fwd.kind = OpKind::attn_fwd_block;
  fwd.label = "fwd step 0 \"diagonal\"";  // quotes survive RFC 4180 quoting
  fwd.start_s = 1e-3;
  fwd.end_s = 1.25e-3;
  fwd.flops = 1.0e11;  // 40% of an H100 SXM5 in 0.25 ms
  fwd.bytes = 1 << 20;
  fwd.kernel = "tensor_core";
  fwd.head_dim = 128;
  fwd.q_rows = 4096;
  fwd.kv_rows = 4096;
  fwd.causal = true;
  gpu::MeasuredOp merge;
  merge.kind = OpKind::lse_merge;
  merge.start_s = 2e-3;
  merge.end_s = 2.01e-3;
  merge.bytes = 65536;
  gpu::MeasuredOp msg;
  msg.kind = OpKind::send_recv;
  msg.stream = Stream::comm;
  msg.start_s = 0;
  msg.end_s = 1e-4;
  msg.bytes = 1 << 22;
  gpu::MeasuredOp alloc;
  alloc.kind = OpKind::alloc;  // bookkeeping: not written
  run.timeline = {fwd, merge, msg, alloc};
  const std::string csv = gpu::measured_ops_csv(run, Dtype::bf16);
  const auto dir = test::scratch_dir("measured_csv");
  {
    std::ofstream f(dir / "measured.csv");
    f << csv;
  }
  const auto rows = read_measured_ops_csv((dir / "measured.csv").string());
  REQUIRE(rows.size() == 3);  // alloc left out; send_recv is in the file, the fit skips it
  REQUIRE(rows[0].op_kind == "attn_fwd_block");
  REQUIRE(rows[0].dtype == "bf16");
  REQUIRE(rows[0].head_dim == 128);
  REQUIRE(rows[0].q_rows == 4096);
  REQUIRE(rows[0].causal);
  REQUIRE(rows[0].flops == 1.0e11);
  REQUIRE(rows[0].measured_s == Approx(2.5e-4).epsilon(1e-12));
  REQUIRE(rows[1].op_kind == "lse_merge");
  REQUIRE(rows[1].bytes == 65536);
  REQUIRE(csv.find("\"fwd step 0 \"\"diagonal\"\"\"") != std::string::npos);
  // calibrate's fit takes it: one attention point, the message skipped, the GEMM efficiency kept (no GEMM rows).
  const GpuSpec base = cluster_preset("dgx-h100", 1)->gpu;
  const sim::CalibrationFit fit = sim::fit_calibration(rows, base, (dir / "measured.csv").string());
  REQUIRE(fit.attention_points == 1);
  REQUIRE(fit.rows_skipped == 1);
  REQUIRE_FALSE(fit.fitted_gemm_bf16);
  REQUIRE_FALSE(fit.fitted_gemm_fp8);
  REQUIRE(fit.gpu.gemm_efficiency_bf16 == base.gemm_efficiency_bf16);
  std::filesystem::remove_all(dir);
}
