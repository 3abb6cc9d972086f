#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/oracles/block_attention.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"
#include "hcpsim/oracles/verify.hpp"
#include "naive_attention.hpp"

using namespace hcpsim;

namespace {

AttentionShape make_shape(int64_t b, int64_t s, int64_t h, int64_t hkv, int64_t dk, int64_t dv, bool causal) {
  return test::attention_shape(b, s, h, hkv, dk, dv, causal);
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
  // merge conventions (docs/algorithm.md §4.4 recommendation)
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

namespace {

/// Relative L2 distance ‖a − b‖ / ‖b‖ over all elements (b nonzero by the callers' REQUIREs).
double rel_l2(const HostTensor& a, const HostTensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.elements(); ++i) {
    const double d = a.data()[i] - b.data()[i];
    num += d * d;
    den += b.data()[i] * b.data()[i];
  }
  return std::sqrt(num / den);
}

/// Columns of a block of nq × nk visible to block row r (the documented mask semantics, written independently).
int64_t naive_visible(BlockMask mask, int64_t r, int64_t nq, int64_t nk) {
  const int64_t v = mask == BlockMask::none ? nk : mask == BlockMask::causal ? r + 1 : r + 1 + nk - nq;
  return std::max<int64_t>(0, std::min(v, nk));
}

}  // namespace

TEST_CASE("oracles: tiled block kernels match a naive loop for every mask on multi-tile, unaligned blocks",
          "[oracles]") {
  // Block shapes that cross the kernels' 128-row / 128-column tiles at unaligned offsets, with the causal diagonal
  // cutting tiles (row chunks), nq < nk and nq > nk (leading rows that see nothing), and GQA 2.
  struct Case {
    int64_t nq, nk;
    BlockMask mask;
  };
  const Case cases[] = {{200, 330, BlockMask::causal_bottom_right}, {330, 200, BlockMask::causal_bottom_right},
                        {330, 200, BlockMask::causal},              {270, 270, BlockMask::causal},
                        {150, 290, BlockMask::none}};
  const double scale = 0.35;
  for (const Case& c : cases) {
    INFO("nq " << c.nq << " nk " << c.nk << " mask " << static_cast<int>(c.mask));
    // q rows are taken from offset 7 of a longer tensor to exercise q_rows.begin; kv rows from offset 5.
    const HostTensor q = make_input(3, "q", 1, c.nq + 7, 2, 8, "normal");
    const HostTensor k = make_input(3, "k", 1, c.nk + 5, 1, 8, "normal");
    const HostTensor v = make_input(3, "v", 1, c.nk + 5, 1, 4, "normal");
    const HostTensor dout = make_input(3, "do", 1, c.nq + 7, 2, 4, "normal");
    HostTensor out(1, c.nq, 2, 4), lse(1, c.nq, 2, 1);
    attention_block_forward(q, RowRange{7, c.nq}, k, v, RowRange{5, c.nk}, c.mask, scale, out, lse, 1);
    // The backward reads out and lse at q_rows: place them at the same offset as q.
    HostTensor out_g(1, c.nq + 7, 2, 4), lse_g(1, c.nq + 7, 2, 1);
    for (int64_t r = 0; r < c.nq; ++r) {
      for (int64_t h = 0; h < 2; ++h) {
        lse_g(0, r + 7, h, 0) = lse(0, r, h, 0);
        for (int64_t w = 0; w < 4; ++w) out_g(0, r + 7, h, w) = out(0, r, h, w);
      }
    }
    HostTensor dq(1, c.nq, 2, 8), dk(1, c.nk, 1, 8), dv(1, c.nk, 1, 4);
    attention_block_backward(q, k, v, out_g, dout, lse_g, RowRange{7, c.nq}, RowRange{5, c.nk}, c.mask, scale, dq,
                             dk, dv, 1);
    // Naive: plain loops over the visible pairs, in the same conventions.
    HostTensor n_out(1, c.nq, 2, 4), n_lse(1, c.nq, 2, 1), n_dq(1, c.nq, 2, 8), n_dk(1, c.nk, 1, 8),
        n_dv(1, c.nk, 1, 4);
    int64_t empty_rows = 0;
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t r = 0; r < c.nq; ++r) {
        const int64_t vis = naive_visible(c.mask, r, c.nq, c.nk);
        if (vis == 0) {
          n_lse(0, r, h, 0) = -std::numeric_limits<double>::infinity();
          empty_rows += 1;
          continue;
        }
        std::vector<double> p(static_cast<size_t>(vis));
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < vis; ++j) {
          double s = 0;
          for (int64_t d = 0; d < 8; ++d) s += q(0, r + 7, h, d) * k(0, j + 5, 0, d);
          p[static_cast<size_t>(j)] = s * scale;
          m = std::max(m, s * scale);
        }
        double l = 0;
        for (double& x : p) l += (x = std::exp(x - m));
        n_lse(0, r, h, 0) = m + std::log(l);
        for (double& x : p) x /= l;
        double delta = 0;
        for (int64_t d = 0; d < 4; ++d) {
          for (int64_t j = 0; j < vis; ++j) n_out(0, r, h, d) += p[static_cast<size_t>(j)] * v(0, j + 5, 0, d);
          delta += dout(0, r + 7, h, d) * n_out(0, r, h, d);
        }
        for (int64_t j = 0; j < vis; ++j) {
          const double pj = p[static_cast<size_t>(j)];
          double dp = 0;
          for (int64_t d = 0; d < 4; ++d) {
            dp += dout(0, r + 7, h, d) * v(0, j + 5, 0, d);
            n_dv(0, j, 0, d) += pj * dout(0, r + 7, h, d);
          }
          for (int64_t d = 0; d < 8; ++d) {
            n_dq(0, r, h, d) += scale * pj * (dp - delta) * k(0, j + 5, 0, d);
            n_dk(0, j, 0, d) += scale * pj * (dp - delta) * q(0, r + 7, h, d);
          }
        }
      }
    }
    if (c.nq > c.nk && c.mask == BlockMask::causal_bottom_right) REQUIRE(empty_rows == 2 * (c.nq - c.nk));
    // Empty rows are exact (−inf / 0); finite lse compared elementwise.
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t r = 0; r < c.nq; ++r) {
        if (std::isinf(n_lse(0, r, h, 0))) {
          REQUIRE(lse(0, r, h, 0) == n_lse(0, r, h, 0));
        } else {
          REQUIRE(lse(0, r, h, 0) == Approx(n_lse(0, r, h, 0)).epsilon(1e-13));
        }
      }
    }
    // fp64 both ways, different association: per element ≲ n·u with n ≤ 330·8 terms (3e-13), amplified ≲ 10x by
    // exp/log (as in the reference-vs-naive test above): 1e-11 relative L2.
    constexpr double kTol = 1e-11;
    for (const auto& [got, want] : {std::pair{&out, &n_out}, std::pair{&dq, &n_dq}, std::pair{&dk, &n_dk},
                                    std::pair{&dv, &n_dv}}) {
      double norm = 0;
      for (double x : want->values()) norm += x * x;
      REQUIRE(norm > 0);
      for (double x : got->values()) REQUIRE(std::isfinite(x));
      REQUIRE(rel_l2(*got, *want) < kTol);
    }
  }
}
