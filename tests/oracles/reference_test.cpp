#include <cmath>
#include <cstring>
#include <limits>

#include "catch_compat.hpp"
#include "hcpsim/oracles/block_attention.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"
#include "hcpsim/oracles/verify.hpp"
#include "naive_attention.hpp"

using namespace hcpsim;

namespace {

AttentionShape make_shape(int64_t b, int64_t s, int64_t h, int64_t hkv, int64_t dk, int64_t dv, bool causal) {
  AttentionShape shape;
  shape.batch = b;
  shape.seq_length = s;
  shape.heads_q = h;
  shape.heads_kv = hkv;
  shape.head_dim_qk = dk;
  shape.head_dim_v = dv;
  shape.causal = causal;
  shape.softmax_scale = 1.0 / std::sqrt(static_cast<double>(dk));
  return shape;
}

bool bytes_equal(const HostTensor& a, const HostTensor& b) {
  return a.same_shape(b) &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.elements())) == 0;
}

/// Σ dout·out: the scalar whose gradient the backward computes.
double loss(const AttentionInputs& in, bool causal, double scale) {
  const AttentionOutputs r = reference_attention(in, causal, scale, 1);
  double l = 0;
  for (int64_t i = 0; i < r.out.elements(); ++i) l += in.dout.data()[i] * r.out.data()[i];
  return l;
}

}  // namespace

TEST_CASE("oracles: reference matches a naive triple-loop implementation", "[oracles]") {
  struct Case {
    int64_t b, s, h, hkv, dk, dv;
    bool causal;
  };
  // MHA and GQA (H=4, Hkv=2 and Hkv=1), dk != dv, b = 2, and S = 300 (> 128 rows: several query tiles).
  const Case cases[] = {{2, 8, 4, 2, 8, 4, true},  {2, 8, 4, 2, 8, 4, false}, {1, 6, 4, 1, 3, 5, true},
                        {1, 6, 2, 2, 4, 4, false}, {1, 300, 2, 1, 8, 4, true}, {1, 300, 2, 1, 8, 4, false}};
  for (const Case& c : cases) {
    const AttentionShape shape = make_shape(c.b, c.s, c.h, c.hkv, c.dk, c.dv, c.causal);
    INFO("b " << c.b << " S " << c.s << " H " << c.h << " Hkv " << c.hkv << " dk " << c.dk << " dv " << c.dv
              << " causal " << c.causal);
    const AttentionInputs in = make_attention_inputs(42, shape, "normal");
    const AttentionOutputs ref = reference_attention(in, c.causal, shape.softmax_scale, 2);
    const AttentionOutputs naive = test::naive_attention(in, c.causal, shape.softmax_scale);
    // Both are fp64 with different association (GEMM blocking, tiles vs plain loops). Per element the rounding
    // error is <= ~n·u with n <= S·max(dk, dv) = 2400 terms and u = 1.1e-16, i.e. <= 3e-13, amplified at most
    // ~10x by exp/log for |scores| <= sqrt(dk)·(max |x|)² with normal inputs: bound 1e-11 relative L2.
    constexpr double kTol = 1e-11;
    const VerifyReport report = compare_outputs(ref, naive, kTol);
    INFO(to_string(report));
    REQUIRE(report.pass);
    for (const TensorError& e : report.tensors) {
      REQUIRE(e.ref_l2_norm > 0);
      REQUIRE(e.compared == e.shape[0] * e.shape[1] * e.shape[2] * e.shape[3]);
    }
  }
}

TEST_CASE("oracles: reference gradients match central finite differences", "[oracles]") {
  // Tiny causal GQA case (H=2, Hkv=1), dk != dv. loss = Σ dout·out; dL/dx ≈ (L(x+ε) − L(x−ε)) / 2ε.
  // Error model with ε = 1e-5: truncation ε²·|L'''|/6 <= 1e-10·O(10) and rounding u·|L|/ε <= 1.1e-16·10/1e-5
  // = 1.1e-10, so |fd − analytic| <= ~1e-9; bound 1e-7 leaves margin while a wrong formula errs by O(0.01..1).
  const AttentionShape shape = make_shape(1, 4, 2, 1, 3, 2, true);
  const double scale = 0.7;
  const AttentionInputs base = make_attention_inputs(3, shape, "uniform");
  const AttentionOutputs grads = reference_attention(base, true, scale, 1);
  constexpr double kEps = 1e-5;
  constexpr double kTol = 1e-7;
  auto check = [&](HostTensor AttentionInputs::*member, const HostTensor& analytic, const char* name) {
    double max_abs_grad = 0;
    for (int64_t i = 0; i < analytic.elements(); ++i) {
      AttentionInputs plus = base, minus = base;
      (plus.*member).data()[i] += kEps;
      (minus.*member).data()[i] -= kEps;
      const double fd = (loss(plus, true, scale) - loss(minus, true, scale)) / (2 * kEps);
      INFO(name << "[" << i << "] fd " << fd << " analytic " << analytic.data()[i]);
      REQUIRE(std::abs(fd - analytic.data()[i]) <= kTol);
      max_abs_grad = std::max(max_abs_grad, std::abs(analytic.data()[i]));
    }
    REQUIRE(max_abs_grad > 1e-3);  // not vacuous
  };
  check(&AttentionInputs::q, grads.dq, "dq");
  check(&AttentionInputs::k, grads.dk, "dk");
  check(&AttentionInputs::v, grads.dv, "dv");
}

TEST_CASE("oracles: reference is byte-identical for any thread count", "[oracles]") {
  const AttentionShape shape = make_shape(2, 200, 4, 2, 8, 8, true);
  const AttentionInputs in = make_attention_inputs(11, shape, "clamped_normal");
  const AttentionOutputs one = reference_attention(in, true, shape.softmax_scale, 1);
  const AttentionOutputs two = reference_attention(in, true, shape.softmax_scale, 2);
  const AttentionOutputs three = reference_attention(in, true, shape.softmax_scale, 3);
  for (const AttentionOutputs* r : {&two, &three}) {
    REQUIRE(bytes_equal(one.out, r->out));
    REQUIRE(bytes_equal(one.softmax_lse, r->softmax_lse));
    REQUIRE(bytes_equal(one.dq, r->dq));
    REQUIRE(bytes_equal(one.dk, r->dk));
    REQUIRE(bytes_equal(one.dv, r->dv));
  }
}

TEST_CASE("oracles: empty rows give lse = -inf and out = 0, never NaN", "[oracles]") {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const AttentionShape shape = make_shape(1, 4, 2, 1, 4, 3, false);
  const AttentionInputs in = make_attention_inputs(5, shape, "clamped_normal");
  for (BlockMask mask : {BlockMask::none, BlockMask::causal}) {
    HostTensor out(1, 4, 2, 3, 99.0), lse(1, 4, 2, 1, 99.0);
    // a block with no KV rows: every row sees nothing
    attention_block_forward(in.q, RowRange{0, 4}, in.k, in.v, RowRange{2, 0}, mask, 0.5, out, lse, 1);
    for (int64_t i = 0; i < out.elements(); ++i) REQUIRE(out.data()[i] == 0.0);
    for (int64_t i = 0; i < lse.elements(); ++i) REQUIRE(lse.data()[i] == kNegInf);
    // its backward writes exact zeros
    HostTensor dq(1, 4, 2, 4, 99.0), dk(1, 0, 1, 4), dv(1, 0, 1, 3);
    HostTensor gout = make_input(1, "o", 1, 4, 2, 3, "uniform");
    HostTensor glse = make_input(1, "l", 1, 4, 2, 1, "uniform");
    attention_block_backward(in.q, in.k, in.v, gout, in.dout, glse, RowRange{0, 4}, RowRange{2, 0}, mask, 0.5, dq, dk,
                             dv, 1);
    for (int64_t i = 0; i < dq.elements(); ++i) REQUIRE(dq.data()[i] == 0.0);
  }
  // merge conventions (HCP_ALGORITHM.md §4.4 recommendation)
  REQUIRE(lse_merge(kNegInf, kNegInf) == kNegInf);
  REQUIRE(lse_merge(1.5, kNegInf) == 1.5);
  REQUIRE(lse_merge(kNegInf, -2.0) == -2.0);
  REQUIRE(std::isnan(lse_merge(std::numeric_limits<double>::quiet_NaN(), 0.0)));
  REQUIRE(std::isnan(lse_merge(kNegInf, std::numeric_limits<double>::quiet_NaN())));
  // log(e^0 + e^0) = log 2; log(e^1 + e^3) = 3 + log1p(e^-2)
  REQUIRE(std::abs(lse_merge(0.0, 0.0) - std::log(2.0)) < 1e-16);
  REQUIRE(lse_merge(1.0, 3.0) == 3.0 + std::log1p(std::exp(-2.0)));
  REQUIRE(lse_merge(3.0, 1.0) == lse_merge(1.0, 3.0));
}

TEST_CASE("oracles: a causal block is top-left over local row order", "[oracles]") {
  // q rows [2, 5) against kv rows [1, 4) of the same tensor: local row r sees local kv c <= r, i.e. row 0 sees
  // exactly one key; that equals a no-mask block with a single key.
  const AttentionShape shape = make_shape(1, 6, 1, 1, 4, 2, false);
  const AttentionInputs in = make_attention_inputs(8, shape, "clamped_normal");
  HostTensor out(1, 3, 1, 2), lse(1, 3, 1, 1), out1(1, 1, 1, 2), lse1(1, 1, 1, 1);
  attention_block_forward(in.q, RowRange{2, 3}, in.k, in.v, RowRange{1, 3}, BlockMask::causal, 0.5, out, lse, 1);
  attention_block_forward(in.q, RowRange{2, 1}, in.k, in.v, RowRange{1, 1}, BlockMask::none, 0.5, out1, lse1, 1);
  // One visible key: out = v exactly (p = exp(s − s) / 1 = 1), lse = the score.
  REQUIRE(out(0, 0, 0, 0) == in.v(0, 1, 0, 0));
  REQUIRE(out(0, 0, 0, 1) == in.v(0, 1, 0, 1));
  REQUIRE(lse(0, 0, 0, 0) == lse1(0, 0, 0, 0));
  double s = 0;
  for (int64_t d = 0; d < 4; ++d) s += in.q(0, 2, 0, d) * in.k(0, 1, 0, d);
  REQUIRE(std::abs(lse(0, 0, 0, 0) - 0.5 * s) < 1e-15);
}
