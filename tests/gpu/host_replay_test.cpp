// The host replay of the GPU backend, tested without a GPU: the kernels' arithmetic (block_math.hpp) against
// the CPU oracle, and the replay of the execution plan against the float64 reference through the same
// verification as the CPU backend.

#include <cmath>
#include <limits>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/gpu/block_math.hpp"
#include "hcpsim/gpu/execution_plan.hpp"
#include "hcpsim/gpu/host_replay.hpp"
#include "hcpsim/oracles/block_attention.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/precision.hpp"
#include "hcpsim/oracles/verify.hpp"

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
    fa.mask = mask;
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
    if (!fault_must_fail(f) || fault_needs_packing(f)) continue;  // the GPU backend refuses THD
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
