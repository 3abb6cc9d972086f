#include <algorithm>
#include <array>
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
double loss(const AttentionInputs& in, const AttentionOutputs& r) {
  double l = 0;
  for (int64_t i = 0; i < r.out.elements(); ++i) l += in.dout.data()[i] * r.out.data()[i];
  return l;
}

/// Checks grads.dq, dk, dv against central differences (L(x+ε) − L(x−ε)) / 2ε of the loss Σ dout·out of
/// `attend(inputs)`, element by element. Error model with ε = 1e-5: truncation ε²·|L⁽³⁾|/6 <= 1e-10·O(10) and
/// rounding u·|L|/ε <= 1.1e-16·10/1e-5 = 1.1e-10, so |fd − analytic| <= ~1e-9; bound 1e-7 leaves margin while a
/// wrong formula errs by O(0.01..1). Each gradient must have an element above 1e-3 (not vacuous).
template <typename Attend>
void check_gradients(const AttentionInputs& base, const AttentionOutputs& grads, Attend&& attend) {
  constexpr double kEps = 1e-5;
  constexpr double kTol = 1e-7;
  auto check = [&](HostTensor AttentionInputs::*member, const HostTensor& analytic, const char* name) {
    double max_abs_grad = 0;
    for (int64_t i = 0; i < analytic.elements(); ++i) {
      AttentionInputs plus = base, minus = base;
      (plus.*member).data()[i] += kEps;
      (minus.*member).data()[i] -= kEps;
      const double fd = (loss(plus, attend(plus)) - loss(minus, attend(minus))) / (2 * kEps);
      INFO(name << "[" << i << "] fd " << fd << " analytic " << analytic.data()[i]);
      REQUIRE(std::abs(fd - analytic.data()[i]) <= kTol);
      max_abs_grad = std::max(max_abs_grad, std::abs(analytic.data()[i]));
    }
    REQUIRE(max_abs_grad > 1e-3);
  };
  check(&AttentionInputs::q, grads.dq, "dq");
  check(&AttentionInputs::k, grads.dk, "dk");
  check(&AttentionInputs::v, grads.dv, "dv");
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
  // Tiny causal GQA case (H=2, Hkv=1), dk != dv; error model at check_gradients.
  const AttentionShape shape = make_shape(1, 4, 2, 1, 3, 2, true);
  const double scale = 0.7;
  const AttentionInputs base = make_attention_inputs(3, shape, "uniform");
  check_gradients(base, reference_attention(base, true, scale, 1),
                  [&](const AttentionInputs& in) { return reference_attention(in, true, scale, 1); });
}

TEST_CASE("oracles: reference is byte-identical for any thread count", "[oracles]") {
  // GQA 2 with b = 2 in one row chunk, and GQA 4 over S = 600 (three chunks of 256 query rows).
  for (const AttentionShape& shape : {make_shape(2, 200, 4, 2, 8, 8, true), make_shape(1, 600, 4, 1, 8, 4, true)}) {
    INFO("S " << shape.seq_length);
    const AttentionInputs in = make_attention_inputs(11, shape, "clamped_normal");
    const AttentionOutputs one = reference_attention(in, true, shape.softmax_scale, 1);
    const AttentionOutputs two = reference_attention(in, true, shape.softmax_scale, 2);
    const AttentionOutputs three = reference_attention(in, true, shape.softmax_scale, 3);
    // GQA runs one (batch, kv head) item per thread when there are enough of them (summing each group's dK/dV in
    // place), else one item per query head with a partial each: both give the same bits. 8 threads take the second
    // way for both shapes; 1 thread the first.
    const AttentionOutputs eight = reference_attention(in, true, shape.softmax_scale, 8);
    for (const AttentionOutputs* r : {&two, &three, &eight}) {
      REQUIRE(bytes_equal(one.out, r->out));
      REQUIRE(bytes_equal(one.softmax_lse, r->softmax_lse));
      REQUIRE(bytes_equal(one.dq, r->dq));
      REQUIRE(bytes_equal(one.dk, r->dk));
      REQUIRE(bytes_equal(one.dv, r->dv));
    }
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

namespace {

/// Hand-checkable inputs: S = 2, dk = dv = 1, scale 0.5, one kv head with k = [0, ln 2], v = [3, 6], and one query
/// head per entry of `q_heads` (its q rows and dout rows), so that the scores 0.5·q·k are 0, ln 2 or 2 ln 2 and
/// every probability is a small fraction (1/3, 2/3, 1/2, 1/5, 4/5).
AttentionInputs tiny_inputs(const std::vector<std::pair<std::array<double, 2>, std::array<double, 2>>>& q_heads) {
  const auto hq = static_cast<int64_t>(q_heads.size());
  AttentionInputs in;
  in.q = HostTensor(1, 2, hq, 1);
  in.dout = HostTensor(1, 2, hq, 1);
  in.k = HostTensor(1, 2, 1, 1);
  in.v = HostTensor(1, 2, 1, 1);
  in.k(0, 0, 0, 0) = 0;
  in.k(0, 1, 0, 0) = std::log(2.0);
  in.v(0, 0, 0, 0) = 3;
  in.v(0, 1, 0, 0) = 6;
  for (int64_t h = 0; h < hq; ++h) {
    for (int64_t i = 0; i < 2; ++i) {
      in.q(0, i, h, 0) = q_heads[static_cast<size_t>(h)].first[static_cast<size_t>(i)];
      in.dout(0, i, h, 0) = q_heads[static_cast<size_t>(h)].second[static_cast<size_t>(i)];
    }
  }
  return in;
}

/// Element (row i, head h) of a width-1 tensor equals `want` to 1e-14 relative, about 45 ulp of the few roundings
/// on either side (exactly for −inf and 0).
void require_value(const HostTensor& t, int64_t i, int64_t h, double want, const char* name) {
  const double got = t(0, i, h, 0);
  INFO(name << "[row " << i << ", head " << h << "] = " << got << ", want " << want);
  if (std::isinf(want) || want == 0) {
    REQUIRE(got == want);
  } else {
    REQUIRE(std::abs(got - want) <= 1e-14 * std::abs(want));
  }
}

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kThird = 1.0 / 3.0;

/// Expected rows 0 and 1 of one query head (width 1): out, softmax_lse, dq.
struct HeadValues {
  std::array<double, 2> out, lse, dq;
};

void require_head(const AttentionOutputs& r, int64_t h, const HeadValues& want) {
  for (int64_t i = 0; i < 2; ++i) {
    const auto k = static_cast<size_t>(i);
    require_value(r.out, i, h, want.out[k], "out");
    require_value(r.softmax_lse, i, h, want.lse[k], "lse");
    require_value(r.dq, i, h, want.dq[k], "dq");
  }
}

/// Expected rows 0 and 1 of the single kv head's dk and dv.
void require_kv(const AttentionOutputs& r, const std::array<double, 2>& dk, const std::array<double, 2>& dv) {
  for (int64_t j = 0; j < 2; ++j) {
    require_value(r.dk, j, 0, dk[static_cast<size_t>(j)], "dk");
    require_value(r.dv, j, 0, dv[static_cast<size_t>(j)], "dv");
  }
}

}  // namespace

TEST_CASE("oracles: reference equals hand-computed attention for S = 2, with and without the causal mask",
          "[oracles]") {
  // q = [2, 2] → scores 0.5·q·k = [0, ln 2] on both rows: P = [1/3, 2/3], out = 1 + 4 = 5, lse = ln 3.
  // dout = [1, 2]: dP_i = dout_i·[3, 6], D_i = 5·dout_i, dS_i = dout_i·[−2/3, 2/3];
  // dq_i = 0.5·dS_i·k = dout_i·ln 2/3, dk_j = 0.5·Σ_i dS_ij·q_i = Σ_i dS_ij, dv_j = Σ_i P_ij·dout_i.
  const AttentionInputs in = tiny_inputs({{{2, 2}, {1, 2}}});
  SECTION("no mask") {
    const AttentionOutputs r = reference_attention(in, false, 0.5, 1);
    require_head(r, 0, {{5, 5}, {std::log(3.0), std::log(3.0)}, {kLn2 * kThird, 2 * kLn2 * kThird}});
    require_kv(r, {-2, 2}, {1, 2});
  }
  SECTION("causal") {
    // Row 0 sees key 0 only: P = [1, 0], out = v_0 = 3, lse = score 0, dS_0 = P·(dP − D) = 0, so dq_0 = 0;
    // dk from row 1 only (dS_1 = 2·[−2/3, 2/3]); dv = [1·1 + (1/3)·2, (2/3)·2].
    const AttentionOutputs r = reference_attention(in, true, 0.5, 1);
    require_head(r, 0, {{3, 5}, {0, std::log(3.0)}, {0, 2 * kLn2 * kThird}});
    require_kv(r, {-4 * kThird, 4 * kThird}, {1 + 2 * kThird, 4 * kThird});
  }
}

TEST_CASE("oracles: reference sums dk and dv over a GQA group of two query heads (hand-computed)", "[oracles]") {
  // Head 0 as in the previous case; head 1: q = [0, 4], dout = [1, 1], so its row 0 has scores [0, 0]: P = [1/2,
  // 1/2], out = 4.5, lse = ln 2, dS = 0.5·([3, 6] − 4.5) = [−3/4, 3/4]; row 1 scores [0, 2 ln 2]: P = [1/5, 4/5],
  // out = 27/5, lse = ln 5, dS = [1/5·(3 − 5.4), 4/5·(6 − 5.4)] = [−0.48, 0.48].
  // Head 1 alone: dq = 0.5·dS·k = [0.375 ln 2, 0.24 ln 2], dk = 0.5·Σ_i dS_ij·q_i = [−0.96, 0.96] (q_0 = 0),
  // dv = Σ_i P_ij = [0.7, 1.3]; the kv head's dk, dv are head 0's plus head 1's.
  const AttentionInputs in = tiny_inputs({{{2, 2}, {1, 2}}, {{0, 4}, {1, 1}}});
  SECTION("no mask") {
    const AttentionOutputs r = reference_attention(in, false, 0.5, 2);
    require_head(r, 0, {{5, 5}, {std::log(3.0), std::log(3.0)}, {kLn2 * kThird, 2 * kLn2 * kThird}});
    require_head(r, 1, {{4.5, 5.4}, {kLn2, std::log(5.0)}, {0.375 * kLn2, 0.24 * kLn2}});
    require_kv(r, {-2.96, 2.96}, {1.7, 3.3});
  }
  SECTION("causal") {
    // Head 1 row 0 sees key 0 only: out = 3, lse = 0, dq = 0, dv gets P = [1, 0]; row 1 unchanged.
    const AttentionOutputs r = reference_attention(in, true, 0.5, 2);
    require_head(r, 0, {{3, 5}, {0, std::log(3.0)}, {0, 2 * kLn2 * kThird}});
    require_head(r, 1, {{3, 5.4}, {0, std::log(5.0)}, {0, 0.24 * kLn2}});
    require_kv(r, {-4 * kThird - 0.96, 4 * kThird + 0.96}, {1 + 2 * kThird + 1.2, 4 * kThird + 0.8});
  }
}

TEST_CASE("oracles: a reference row that sees no key gets lse = -inf, out = 0, dq = 0 and adds no gradient",
          "[oracles]") {
  // Head 0 of the S = 2 case with row 0's keys empty: row 1 is the unmasked row (dout 2), and dk, dv come from it
  // alone: dk = 0.5·2·dS_1 = [−4/3, 4/3], dv = 2·P_1 = [2/3, 4/3].
  const AttentionInputs in = tiny_inputs({{{2, 2}, {1, 2}}});
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  for (const KeyRange empty : {KeyRange{0, 0}, KeyRange{2, 1}}) {
    const AttentionOutputs r = reference_attention(in, std::vector<KeyRange>{empty, {0, 2}}, 0.5, 1);
    require_head(r, 0, {{0, 5}, {kNegInf, std::log(3.0)}, {0, 2 * kLn2 * kThird}});
    require_kv(r, {-4 * kThird, 4 * kThird}, {2 * kThird, 4 * kThird});
  }
  // Every row empty: all zeros and −inf, no NaN.
  const AttentionOutputs none = reference_attention(in, std::vector<KeyRange>{{0, 0}, {1, 1}}, 0.5, 1);
  for (const HostTensor* t : {&none.out, &none.dq, &none.dk, &none.dv}) {
    for (double x : t->values()) REQUIRE(x == 0.0);
  }
  for (double x : none.softmax_lse.values()) REQUIRE(x == kNegInf);
}

TEST_CASE("oracles: reference key ranges follow the mask definitions", "[oracles]") {
  auto ranges = [](const std::vector<KeyRange>& keys) {
    std::vector<std::pair<int64_t, int64_t>> v;
    for (const KeyRange& k : keys) v.emplace_back(k.begin, k.end);
    return v;
  };
  using V = std::vector<std::pair<int64_t, int64_t>>;
  REQUIRE(ranges(reference_key_ranges(3, false)) == V{{0, 3}, {0, 3}, {0, 3}});
  REQUIRE(ranges(reference_key_ranges(3, true)) == V{{0, 1}, {0, 2}, {0, 3}});
  // Window [left, right]: i − left ≤ j ≤ i + right; causal also j ≤ i; −1 = unbounded.
  REQUIRE(ranges(reference_key_ranges(4, false, 1, 0)) == V{{0, 1}, {0, 2}, {1, 3}, {2, 4}});
  REQUIRE(ranges(reference_key_ranges(4, false, 0, 1)) == V{{0, 2}, {1, 3}, {2, 4}, {3, 4}});
  REQUIRE(ranges(reference_key_ranges(4, true, 2, -1)) == V{{0, 1}, {0, 2}, {0, 3}, {1, 4}});
  REQUIRE(ranges(reference_key_ranges(4, false, -1, 1)) == V{{0, 2}, {0, 3}, {0, 4}, {0, 4}});
  REQUIRE(reference_key_ranges(0, true).empty());
}

TEST_CASE("oracles: reference gradients with a window, an empty row and GQA match finite differences", "[oracles]") {
  // GQA 2 (H = 4, Hkv = 2); row 2 sees no key, the others a causal window of 2 keys; error model at check_gradients.
  const AttentionShape shape = make_shape(1, 5, 4, 2, 3, 2, false);
  const double scale = 0.6;
  const AttentionInputs base = make_attention_inputs(17, shape, "uniform");
  std::vector<KeyRange> keys = reference_key_ranges(5, true, 1);
  keys[2] = KeyRange{0, 0};
  const AttentionOutputs grads = reference_attention(base, keys, scale, 3);
  check_gradients(base, grads, [&](const AttentionInputs& in) { return reference_attention(in, keys, scale, 1); });
  for (int64_t h = 0; h < 4; ++h) REQUIRE(grads.softmax_lse(0, 2, h, 0) == -std::numeric_limits<double>::infinity());
}

TEST_CASE("oracles: reference probabilities follow exp's underflow to 0 exactly, on every lane of a row",
          "[oracles]") {
  // S = 11 unmasked rows of one head (dk = dv = 1; 11 is no multiple of the vector width, so the last packet is
  // padded). Every query is 1 and every key 0 except key `far` = −2000: its score is −2000 below the row maximum,
  // where exp underflows to 0 (std::exp(−2000) = 0; Eigen's packet exp clamps its argument and would give
  // ~5.56e-309). Every key position takes the far key in turn (every lane of 2-, 4- and 8-wide packets, and the
  // padded tail). Then P_i,far = 0 exactly, so dv_far = Σ_i P_i,far·dout_i = 0 and dk_far = 0, and every other key
  // gets P = 1/10 exactly, out_i = Σ_j P_ij·v_j = 0.1·(Σ_{j≠far} v_j).
  const AttentionShape shape = make_shape(1, 11, 1, 1, 1, 1, false);
  for (int64_t far = 0; far < 11; ++far) {
    INFO("far key " << far);
    AttentionInputs in = make_attention_inputs(5, shape, "normal");
    double v_sum = 0;
    for (int64_t j = 0; j < 11; ++j) {
      in.q(0, j, 0, 0) = 1.0;
      in.k(0, j, 0, 0) = j == far ? -2000.0 : 0.0;
      v_sum += j == far ? 0.0 : in.v(0, j, 0, 0);
    }
    for (int threads : {1, 2}) {
      const AttentionOutputs r = reference_attention(in, false, 1.0, threads);
      REQUIRE(r.dv(0, far, 0, 0) == 0.0);
      REQUIRE(r.dk(0, far, 0, 0) == 0.0);
      for (int64_t i = 0; i < 11; ++i) {
        REQUIRE(r.softmax_lse(0, i, 0, 0) == Approx(std::log(10.0)).epsilon(1e-15));
        REQUIRE(r.out(0, i, 0, 0) == Approx(0.1 * v_sum).epsilon(1e-13));
      }
    }
  }
}
