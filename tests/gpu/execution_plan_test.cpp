// Host-side logic of the GPU backend, tested without a GPU: the kernels' arithmetic (block_math.hpp) against the
// CPU oracle, the execution plan (enqueue order, batches, cross-stream waits, copy segments), and the host replay
// of the plan against the float64 reference through the same verification as the CPU backend.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/step/layer_builder.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/gpu/block_math.hpp"
#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/gpu/execution_plan.hpp"
#include "hcpsim/gpu/host_replay.hpp"
#include "hcpsim/oracles/block_attention.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/precision.hpp"
#include "hcpsim/oracles/verify.hpp"
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

/// The host replay of the plan as a verify runner.
ScheduleRunner replay_runner(Dtype dtype) {
  return [dtype](const Schedule& s, const AttentionInputs& in) {
    ExecutionResult r;
    r.outputs = execute_plan_on_host(s, build_execution_plan(s), in, dtype);
    return r;
  };
}

std::vector<float> to_floats(const HostTensor& t) {
  std::vector<float> f(static_cast<size_t>(t.elements()));
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(t.data()[i]);
  return f;
}

double rel_l2(const std::vector<float>& got, const HostTensor& ref, int64_t count) {
  double d2 = 0, r2 = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double a = got[static_cast<size_t>(i)];
    const double b = ref.data()[i];
    d2 += (a - b) * (a - b);
    r2 += b * b;
  }
  return std::sqrt(d2 / r2);
}

}  // namespace

TEST_CASE("gpu plan: round_float equals the oracle's round_to_dtype on float inputs", "[gpu_plan]") {
  // Values from hash bits over the whole float range (normals, subnormals, huge), plus ties and fp16 edges.
  std::vector<float> values = {0.0f,      -0.0f,         1.0f,          65504.0f, 65519.996f, 65520.0f, -65520.0f,
                               70000.0f,  5.9604645e-8f, 2.9802322e-8f, 1e-8f,    6.1035156e-5f, 1.00390625f,
                               1.01171875f, 3.0e38f,     -3.4028235e38f};
  for (uint64_t i = 0; i < 20000; ++i) {
    const uint64_t w = splitmix64(i);
    float f;
    const auto bits = static_cast<uint32_t>(w);
    std::memcpy(&f, &bits, sizeof f);
    if (std::isfinite(f)) values.push_back(f);
  }
  int64_t checked = 0;
  for (float x : values) {
    for (Dtype d : {Dtype::bf16, Dtype::fp16, Dtype::fp32}) {
      const double want = round_to_dtype(static_cast<double>(x), d);
      const double got = static_cast<double>(round_float(x, static_cast<RoundFormat>(d)));
      INFO("x = " << x << " dtype " << to_string(d));
      REQUIRE((got == want || (std::isnan(got) && std::isnan(want))));
      ++checked;
    }
  }
  REQUIRE(checked > 50000);
}

TEST_CASE("gpu plan: the row kernels' arithmetic matches the oracle's blocks (all masks, GQA, offsets)", "[gpu_plan]") {
  // A 40-row Q block at row 8 of a 64-row buffer against a 48-row KV block at row 4: masks cut at a
  // non-square diagonal. Both sides compute in fp32 with a different summation order (online softmax per key here,
  // tiled in the oracle): the difference is a few fp32 roundings per term, rel L2 ≲ 1e-6; a wrong mask, row
  // offset or GQA head mapping changes the result by O(1e-2) or more. Bound: 1e-5.
  const int64_t b = 2, hq = 4, hkv = 2, dk = 16, dv = 8;
  const HostTensor q = make_input(7, "q", b, 64, hq, dk, "clamped_normal");
  const HostTensor k = make_input(7, "k", b, 64, hkv, dk, "clamped_normal");
  const HostTensor v = make_input(7, "v", b, 64, hkv, dv, "clamped_normal");
  const HostTensor dout = make_input(7, "dout", b, 64, hq, dv, "clamped_normal");
  const RowRange qr{8, 40}, kr{4, 48};
  const double scale = 0.25;
  for (BlockMask mask : {BlockMask::none, BlockMask::causal, BlockMask::causal_bottom_right}) {
    INFO("mask " << static_cast<int>(mask));
    HostTensor out(b, 40, hq, dv), lse(b, 40, hq, 1);
    attention_block_forward(q, qr, k, v, kr, mask, scale, out, lse, 1, Dtype::fp32);
    // The backward's global out/lse: this block's own (any consistent pair exercises the same arithmetic).
    HostTensor gout(b, 64, hq, dv, 0.0), glse(b, 64, hq, 1, 0.0);
    for (int64_t bb = 0; bb < b; ++bb)
      for (int64_t r = 0; r < 40; ++r)
        for (int64_t h = 0; h < hq; ++h) {
          glse(bb, 8 + r, h, 0) = lse(bb, r, h, 0);
          for (int64_t w = 0; w < dv; ++w) gout(bb, 8 + r, h, w) = out(bb, r, h, w);
        }
    HostTensor dq(b, 40, hq, dk), dkk(b, 48, hkv, dk), dvv(b, 48, hkv, dv);
    attention_block_backward(q, k, v, gout, dout, glse, qr, kr, mask, scale, dq, dkk, dvv, 1, Dtype::fp32);

    auto fq = to_floats(q), fk = to_floats(k), fv = to_floats(v), fd = to_floats(dout), fgo = to_floats(gout),
         fgl = to_floats(glse);
    std::vector<float> o(static_cast<size_t>(out.elements())), l(static_cast<size_t>(lse.elements()));
    AttnFwdArgs fa;
    fa.q = {fq.data(), 64, hq, dk};
    fa.k = {fk.data(), 64, hkv, dk};
    fa.v = {fv.data(), 64, hkv, dv};
    fa.out = {o.data(), 40, hq, dv};
    fa.lse = {l.data(), 40, hq, 1};
    fa.batch = b;
    fa.q_row0 = 8;
    fa.nq = 40;
    fa.kv_row0 = 4;
    fa.nk = 48;
    fa.mask = static_cast<MaskCode>(mask);
    fa.scale = static_cast<float>(scale);
    for (int64_t bb = 0; bb < b; ++bb)
      for (int64_t r = 0; r < 40; ++r)
        for (int64_t h = 0; h < hq; ++h) attn_fwd_row(fa, bb, r, h);
    REQUIRE(rel_l2(o, out, out.elements()) < 1e-5);
    // lse: finite rows compared; rows without a visible key (bottom-right mask) are −inf on both sides.
    for (int64_t i = 0; i < lse.elements(); ++i) {
      if (std::isinf(lse.data()[i])) {
        REQUIRE(std::isinf(l[static_cast<size_t>(i)]));
      } else {
        REQUIRE(std::fabs(l[static_cast<size_t>(i)] - lse.data()[i]) < 1e-5 * (1 + std::fabs(lse.data()[i])));
      }
    }
    std::vector<float> gq(static_cast<size_t>(dq.elements())), gk(static_cast<size_t>(dkk.elements())),
        gv(static_cast<size_t>(dvv.elements())), delta(static_cast<size_t>(b * 40 * hq));
    AttnBwdArgs ba;
    ba.q = fa.q;
    ba.k = fa.k;
    ba.v = fa.v;
    ba.out = {fgo.data(), 64, hq, dv};
    ba.dout = {fd.data(), 64, hq, dv};
    ba.lse = {fgl.data(), 64, hq, 1};
    ba.dq = {gq.data(), 40, hq, dk};
    ba.dk = {gk.data(), 48, hkv, dk};
    ba.dv = {gv.data(), 48, hkv, dv};
    ba.delta = delta.data();
    ba.batch = b;
    ba.q_row0 = 8;
    ba.nq = 40;
    ba.kv_row0 = 4;
    ba.nk = 48;
    ba.mask = fa.mask;
    ba.scale = fa.scale;
    for (int64_t bb = 0; bb < b; ++bb)
      for (int64_t r = 0; r < 40; ++r)
        for (int64_t h = 0; h < hq; ++h) attn_bwd_delta_row(ba, bb, r, h);
    for (int64_t bb = 0; bb < b; ++bb)
      for (int64_t r = 0; r < 40; ++r)
        for (int64_t h = 0; h < hq; ++h) attn_bwd_dq_row(ba, bb, r, h);
    for (int64_t bb = 0; bb < b; ++bb)
      for (int64_t c = 0; c < 48; ++c)
        for (int64_t g = 0; g < hkv; ++g) attn_bwd_dkdv_row(ba, bb, c, g);
    REQUIRE(rel_l2(gq, dq, dq.elements()) < 1e-5);
    REQUIRE(rel_l2(gk, dkk, dkk.elements()) < 1e-5);
    REQUIRE(rel_l2(gv, dvv, dvv.elements()) < 1e-5);
  }
}

TEST_CASE("gpu plan: LSE merge and output correction follow the oracle's conventions", "[gpu_plan]") {
  const float inf = std::numeric_limits<float>::infinity();
  REQUIRE(lse_merge_float(-inf, -inf) == -inf);  // two empty rows stay empty, not NaN
  REQUIRE(lse_merge_float(3.0f, -inf) == 3.0f);
  REQUIRE(lse_merge_float(100.0f, 110.0f) == lse_merge_fp32(100.0f, 110.0f));
  REQUIRE(std::isnan(lse_merge_float(std::numeric_limits<float>::quiet_NaN(), 1.0f)));
  REQUIRE(std::isinf(lse_merge_naive_float(100.0f, 110.0f)));  // exp(110) overflows fp32: the fault's signature
  // A step that saw no key contributes 0: init writes 0, accumulate leaves dst.
  REQUIRE(out_correction_element(5.0f, 7.0f, -inf, 1.0f, false, RoundFormat::bf16) == 0.0f);
  REQUIRE(out_correction_element(5.0f, 7.0f, -inf, 1.0f, true, RoundFormat::bf16) == 5.0f);
  // exp(0) = 1: 1.5 + 2.25 = 3.75 exactly (dyadic).
  REQUIRE(out_correction_element(1.5f, 2.25f, 0.5f, 0.5f, true, RoundFormat::bf16) == 3.75f);
}

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

TEST_CASE("gpu plan: host replay of the plan equals full attention for every builder (fp32, bf16)", "[gpu_plan]") {
  struct Case {
    CpCommType type;
    int64_t A, P, b, S, H, Hkv, dk, dv;
    bool causal;
  };
  const Case cases[] = {
      {CpCommType::a2a_p2p, 2, 2, 1, 32, 4, 2, 16, 16, true},  {CpCommType::a2a_p2p, 2, 3, 2, 48, 4, 4, 8, 8, true},
      {CpCommType::a2a_p2p, 2, 2, 1, 32, 4, 2, 16, 8, false},  {CpCommType::p2p, 1, 4, 1, 32, 2, 1, 16, 16, true},
      {CpCommType::a2a, 4, 1, 1, 32, 4, 4, 8, 8, true},        {CpCommType::all_gather, 1, 4, 1, 32, 2, 2, 8, 8, true},
  };
  for (const Case& c : cases) {
    AttentionShape shape = make_shape(c.b, c.S, c.H, c.Hkv, c.dk, c.dv, c.causal);
    const Schedule s = build_schedule(c.type, CpLayout(c.A, c.P, c.S), shape);
    for (Dtype d : {Dtype::fp32, Dtype::bf16}) {
      VerifyOptions opt;
      opt.seed = 99;
      opt.dtype = d;
      const VerifyRun run = verify_schedule_run(s, opt, replay_runner(d));
      INFO(to_string(c.type) << " A=" << c.A << " P=" << c.P << " " << to_string(d) << "\n" << to_string(run.report));
      REQUIRE(run.report.pass);
      for (const TensorError& e : run.report.tensors) REQUIRE(e.ref_l2_norm > 0);
    }
  }
}

TEST_CASE("gpu plan: host replay catches every fault the oracle must catch", "[gpu_plan]") {
  const AttentionShape shape = make_shape(1, 32, 4, 2, 16, 16, true);
  const Schedule good = schedule_for(2, 2, shape);
  for (FaultKind f : all_fault_kinds()) {
    if (!fault_must_fail(f)) continue;
    VerifyOptions opt;
    opt.seed = 5;
    opt.dtype = Dtype::fp32;
    // naive_lse_merge only fails when logits overflow exp in fp32 (inputs "adversarial").
    if (f == FaultKind::naive_lse_merge) opt.input_distribution = "adversarial";
    const Schedule bad = inject_fault(good, f);
    const VerifyRun run = verify_schedule_run(bad, opt, replay_runner(Dtype::fp32));
    INFO("fault " << to_string(f));
    REQUIRE_FALSE(run.report.pass);
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
  try {
    check_gpu_dtype(Dtype::fp64);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "--dtype");
    REQUIRE(e.fix().find("--backend cpu") != std::string::npos);
  }
}

TEST_CASE("gpu plan: a schedule that deadlocks under rendezvous semantics is an error naming the ranks", "[gpu_plan]") {
  // Two ranks: rank 0 sends to 1 then receives from 1; rank 1 sends to 0 then receives from 0, each as separate
  // send-only and recv-only ops. The CPU mailbox delivers this; rendezvous (NCCL grouped) cannot match the first
  // ops of both ranks (each send waits for a receive the peer has not reached).
  Schedule s;
  s.cp_comm_type = CpCommType::p2p;
  s.p2p_size = 2;
  s.shape = make_shape(1, 8, 1, 1, 4, 4, true);
  for (int64_t r = 0; r < 2; ++r) {
    RankProgram p;
    p.cp_rank = r;
    p.buffers.push_back(BufferDecl{"x", 1, 2, 1, 4, Dtype::bf16});
    p.buffers.push_back(BufferDecl{"y", 1, 2, 1, 4, Dtype::bf16});
    Op a;
    a.payload = AllocOp{0};
    Op a2;
    a2.payload = AllocOp{1};
    Op send;
    send.payload = SendRecvOp{1 - r, -1, {0}, {}, 7, 0};
    send.stream = Stream::comm;
    send.label = "send";
    Op recv;
    recv.payload = SendRecvOp{-1, 1 - r, {}, {1}, 0, 7};
    recv.stream = Stream::comm;
    recv.label = "recv";
    p.ops = {a, a2, send, recv};
    s.ranks.push_back(p);
  }
  // Ranks 0 and 1 both start with a send: rank 0's send needs rank 1 at a receive, and vice versa.
  try {
    (void)build_execution_plan(s);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "schedule");
    const std::string what = e.what();
    REQUIRE(what.find("cp_rank 0 op #2") != std::string::npos);
    REQUIRE(what.find("cp_rank 1 op #2") != std::string::npos);
    REQUIRE(e.fix().find("--backend cpu") != std::string::npos);
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
  fwd.flops = 2.0e9;
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
  REQUIRE(rows[0].flops == 2.0e9);
  REQUIRE(rows[0].measured_s == Approx(2.5e-4).epsilon(1e-12));
  REQUIRE(rows[1].op_kind == "lse_merge");
  REQUIRE(rows[1].bytes == 65536);
  REQUIRE(csv.find("\"fwd step 0 \"\"diagonal\"\"\"") != std::string::npos);
  // calibrate's fit takes it: one attention point, the message skipped, the GEMM efficiency kept (no GEMM rows).
  const GpuSpec base = cluster_preset("dgx-h100", 1)->gpu;
  const sim::CalibrationFit fit = sim::fit_calibration(rows, base, (dir / "measured.csv").string());
  REQUIRE(fit.attention_points == 1);
  REQUIRE(fit.rows_skipped == 1);
  REQUIRE_FALSE(fit.fitted_gemm);
  REQUIRE(fit.gpu.gemm_efficiency == base.gemm_efficiency);
  std::filesystem::remove_all(dir);
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

TEST_CASE("gpu plan: bf16 dQ/dKV accumulators (TE's F16 path) grow the gradient error in the host replay",
          "[gpu_plan]") {
  // p2p over P = 4: every rank adds 4 partial dK/dV blocks. Rounding each add to bf16 (8 significant bits) adds up
  // to 3 extra roundings of relative size 2^-9 each, which the fp32 accumulators do not have, so dk's error must
  // rise; out is untouched (forward only). Same measurement as verify's bf16_accumulation report on the CPU.
  const AttentionShape shape = make_shape(1, 64, 2, 2, 16, 16, true);
  const Schedule good = schedule_for(1, 4, shape, CpCommType::p2p);
  const Schedule acc = inject_fault(good, FaultKind::bf16_accumulation);
  REQUIRE(acc.grad_accumulation_in_dtype);
  VerifyOptions opt;
  opt.seed = 11;
  opt.dtype = Dtype::bf16;
  const VerifyReport g = verify_schedule_run(good, opt, replay_runner(Dtype::bf16)).report;
  const VerifyReport b = verify_schedule_run(acc, opt, replay_runner(Dtype::bf16)).report;
  REQUIRE(b.tensors[3].rel_l2_err > g.tensors[3].rel_l2_err);  // dk
  REQUIRE(b.tensors[0].rel_l2_err == g.tensors[0].rel_l2_err);  // out: bit-identical forward
}

namespace {

/// Vector clock over the streams of a run ((rank, stream) → count).
using Clock = std::map<std::pair<int64_t, int>, int64_t>;

void join_clock(Clock& into, const Clock& from) {
  for (const auto& [k, v] : from) into[k] = std::max(into[k], v);
}

/// One access to a buffer instance: the stream that made it and that stream's clock at the time.
struct Access {
  std::pair<int64_t, int> stream;
  int64_t tick = 0;
  bool write = false;
};

/// Replays the single-device executor's synchronisation (device_executor.cpp: begin() = the plan's waits + start
/// event; batch(): phase 1 begin on every member's comm stream, phase 2 each destination waits for its sources'
/// start events, copies, records `moved`, phase 3 each member waits for its readers' `moved` and records its end)
/// with vector clocks, and checks that every access to a buffer happens after every earlier conflicting access in
/// enqueue order (read-after-write, write-after-read, write-after-write). Returns the number of violations and
/// fills `first` with a description of the first.
/// nccl = true replays the NCCL backend's protocol instead (device_executor.cpp nccl_batch): each sender packs the
/// segments a destination reads from it on its own comm stream (reading its buffers there), the grouped
/// send/recv orders the destination's comm stream after the sender's packs, the destination unpacks in order (its
/// own segments read its own buffers), and no member waits for its readers.
int64_t race_check(const Schedule& s, const ExecutionPlan& plan, std::string& first, bool nccl = false) {
  std::map<std::pair<int64_t, int>, Clock> stream_clock;
  std::map<OpRef, Clock> end_event, start_event, moved_event;
  std::map<std::pair<int64_t, BufferId>, std::vector<Access>> history;  // since the last alloc
  int64_t violations = 0;
  auto access = [&](int64_t rank, BufferId b, std::pair<int64_t, int> st, bool write) {
    Clock& c = stream_clock[st];
    const int64_t tick = ++c[st];
    auto& h = history[{rank, b}];
    for (const Access& a : h) {
      if (!write && !a.write) continue;
      if (c[a.stream] < a.tick) {
        ++violations;
        if (first.empty())
          first = "cp_rank " + std::to_string(rank) + " buffer '" +
                  s.ranks[static_cast<size_t>(rank)].buffers[static_cast<size_t>(b)].name + "' accessed on stream " +
                  std::to_string(st.second) + " of rank " + std::to_string(st.first) +
                  " without ordering after an earlier access on stream " + std::to_string(a.stream.second) +
                  " of rank " + std::to_string(a.stream.first);
      }
    }
    h.push_back(Access{st, tick, write});
  };
  auto begin = [&](const OpRef& ref, std::pair<int64_t, int> st) {
    for (OpIndex w : plan.waits[static_cast<size_t>(ref.rank)][static_cast<size_t>(ref.op)])
      join_clock(stream_clock[st], end_event.at(OpRef{ref.rank, w}));
  };
  for (const PlanStep& step : plan.steps) {
    if (!step.is_batch) {
      const Op& op = s.ranks[static_cast<size_t>(step.op.rank)].ops[static_cast<size_t>(step.op.op)];
      const std::pair<int64_t, int> st{step.op.rank, static_cast<int>(op.stream)};
      begin(step.op, st);
      const BufferUses u = op_buffer_uses(op);
      if (std::holds_alternative<AllocOp>(op.payload)) history[{step.op.rank, u.writes[0]}].clear();
      for (BufferId b : u.reads) access(step.op.rank, b, st, false);
      for (BufferId b : u.writes) access(step.op.rank, b, st, true);
      end_event[step.op] = stream_clock[st];
      continue;
    }
    auto comm = [](int64_t rank) { return std::pair<int64_t, int>{rank, static_cast<int>(Stream::comm)}; };
    for (const CommItem& item : step.items) {
      begin(item.op, comm(item.op.rank));
      ++stream_clock[comm(item.op.rank)][comm(item.op.rank)];
      start_event[item.op] = stream_clock[comm(item.op.rank)];
    }
    auto member = [&](int64_t rank) {
      for (const CommItem& it : step.items)
        if (it.op.rank == rank) return it.op;
      return OpRef{-1, -1};
    };
    if (nccl) {
      std::map<std::pair<int64_t, int64_t>, Clock> sent;  // (src, dst) → the sender's clock after its packs
      for (const CommItem& dst : step.items) {
        for (int64_t src : dst.sources) {
          for (const CopySegment& seg : dst.incoming)
            if (seg.src_rank == src) access(seg.src_rank, seg.src, comm(src), false);
        }
      }
      for (const CommItem& dst : step.items)
        for (int64_t src : dst.sources) sent[{src, dst.op.rank}] = stream_clock[comm(src)];
      for (const CommItem& dst : step.items) {
        const auto st = comm(dst.op.rank);
        for (int64_t src : dst.sources) join_clock(stream_clock[st], sent.at({src, dst.op.rank}));
        for (const CopySegment& seg : dst.incoming) {
          if (seg.src_rank == dst.op.rank) access(seg.src_rank, seg.src, st, false);
          access(seg.dst_rank, seg.dst, st, true);
        }
      }
      for (const CommItem& item : step.items) {
        ++stream_clock[comm(item.op.rank)][comm(item.op.rank)];
        end_event[item.op] = stream_clock[comm(item.op.rank)];
      }
      continue;
    }
    for (const CommItem& item : step.items) {
      const auto st = comm(item.op.rank);
      for (int64_t src : item.sources) join_clock(stream_clock[st], start_event.at(member(src)));
      for (const CopySegment& seg : item.incoming) {
        access(seg.src_rank, seg.src, st, false);
        access(seg.dst_rank, seg.dst, st, true);
      }
      moved_event[item.op] = stream_clock[st];
    }
    for (const CommItem& item : step.items) {
      const auto st = comm(item.op.rank);
      for (int64_t reader : item.readers) join_clock(stream_clock[st], moved_event.at(member(reader)));
      ++stream_clock[st][st];
      end_event[item.op] = stream_clock[st];
    }
  }
  return violations;
}

}  // namespace

TEST_CASE("gpu plan: the executor's stream and event protocol orders every conflicting buffer access", "[gpu_plan]") {
  // Every builder, causal and not, with several [A, P]: no access may race with an earlier conflicting one.
  struct Case {
    CpCommType type;
    int64_t A, P;
    bool causal;
  };
  const Case cases[] = {{CpCommType::a2a_p2p, 2, 2, true}, {CpCommType::a2a_p2p, 2, 3, true},
                        {CpCommType::a2a_p2p, 4, 2, false}, {CpCommType::p2p, 1, 4, true},
                        {CpCommType::a2a, 4, 1, true},      {CpCommType::all_gather, 1, 4, true}};
  for (const Case& c : cases) {
    const AttentionShape shape = make_shape(1, 96, 4, 4, 8, 8, c.causal);
    const Schedule s = build_schedule(c.type, CpLayout(c.A, c.P, 96), shape);
    const ExecutionPlan plan = build_execution_plan(s);
    for (bool nccl : {false, true}) {
      std::string first;
      const int64_t races = race_check(s, plan, first, nccl);
      INFO(to_string(c.type) << " A=" << c.A << " P=" << c.P << (nccl ? " NCCL" : " single-device") << ": " << first);
      REQUIRE(races == 0);
    }
  }
  // The check has teeth: without the plan's cross-stream waits the same protocol races.
  const Schedule s = schedule_for(2, 2, make_shape(1, 32, 4, 2, 16, 16, true));
  ExecutionPlan bare = build_execution_plan(s);
  for (auto& rank : bare.waits)
    for (auto& w : rank) w.clear();
  for (bool nccl : {false, true}) {
    std::string first;
    REQUIRE(race_check(s, bare, first, nccl) > 0);
    REQUIRE(first.find("without ordering") != std::string::npos);
  }
}

TEST_CASE("gpu plan: host replay property sweep over shapes, splits and masks (fixed seeds)", "[gpu_plan]") {
  // Shapes the builders accept: S divisible by 2·A·P, heads divisible by A; dk ≠ dv, b > 1, GQA ratios 1..4.
  struct Case {
    int64_t A, P, b, H, Hkv, dk, dv;
  };
  const Case cases[] = {{3, 2, 1, 6, 3, 8, 8},  {2, 4, 2, 4, 2, 8, 4},  {1, 3, 1, 4, 1, 4, 8},
                        {4, 2, 1, 8, 4, 4, 4},  {2, 2, 3, 8, 2, 16, 8}, {1, 2, 2, 2, 2, 8, 8}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    for (bool causal : {true, false}) {
      ++seed;
      const int64_t S = 2 * c.A * c.P * 3;  // three tokens per half-chunk
      const CpCommType type = c.A == 1 ? CpCommType::p2p : CpCommType::a2a_p2p;
      const Schedule s = build_schedule(type, CpLayout(c.A, c.P, S), make_shape(c.b, S, c.H, c.Hkv, c.dk, c.dv, causal));
      VerifyOptions opt;
      opt.seed = seed;
      opt.dtype = Dtype::fp32;
      const VerifyRun run = verify_schedule_run(s, opt, replay_runner(Dtype::fp32));
      INFO("seed " << seed << " A=" << c.A << " P=" << c.P << " b=" << c.b << " H=" << c.H << "/" << c.Hkv
                   << " dk=" << c.dk << " dv=" << c.dv << (causal ? " causal" : " no mask")
                   << "; repro: this case with VerifyOptions::seed = " << seed << "\n"
                   << to_string(run.report));
      REQUIRE(run.report.pass);
    }
  }
}
