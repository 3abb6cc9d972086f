// The attention backward spreads the (query tile, KV tile) units of a (batch, kv head) item over the threads when
// there are fewer items than threads. Its sums keep one fixed order, so dq, dk and dv must be byte-identical for
// 1, 2 and 8 threads; the shapes below cross the kernels' 128-row / 128-column tiles, so the split has several
// units per row and per column to spread.

#include <cmath>
#include <cstring>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/oracles/block_attention.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"

using namespace hcpsim;

namespace {

bool bytes_equal(const HostTensor& a, const HostTensor& b) {
  return a.same_shape(b) &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.elements())) == 0;
}

double max_abs(const HostTensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.elements(); ++i) m = std::max(m, std::abs(t.data()[i]));
  return m;
}

struct Grads {
  HostTensor dq, dk, dv;
};

/// One block's backward (q rows from offset 3, kv rows from offset 5 of longer tensors) on `threads` threads.
Grads block_backward(int64_t hq, int64_t hkv, int64_t nq, int64_t nk, BlockMask mask, Dtype dtype, int threads) {
  const int64_t dk = 40, dv = 24;
  const double scale = 0.3;
  const HostTensor q = make_input(11, "q", 1, nq + 3, hq, dk, "normal");
  const HostTensor k = make_input(11, "k", 1, nk + 5, hkv, dk, "normal");
  const HostTensor v = make_input(11, "v", 1, nk + 5, hkv, dv, "normal");
  const HostTensor dout = make_input(11, "dout", 1, nq + 3, hq, dv, "normal");
  // The forward of the same block gives a consistent (out, lse), placed at the q rows' offset.
  HostTensor out(1, nq, hq, dv), lse(1, nq, hq, 1);
  attention_block_forward(q, RowRange{3, nq}, k, v, RowRange{5, nk}, mask, scale, out, lse, 1, dtype);
  HostTensor out_g(1, nq + 3, hq, dv), lse_g(1, nq + 3, hq, 1);
  for (int64_t r = 0; r < nq; ++r) {
    for (int64_t h = 0; h < hq; ++h) {
      lse_g(0, r + 3, h, 0) = lse(0, r, h, 0);
      for (int64_t w = 0; w < dv; ++w) out_g(0, r + 3, h, w) = out(0, r, h, w);
    }
  }
  Grads g{HostTensor(1, nq, hq, dk), HostTensor(1, nk, hkv, dk), HostTensor(1, nk, hkv, dv)};
  attention_block_backward(q, k, v, out_g, dout, lse_g, RowRange{3, nq}, RowRange{5, nk}, mask, scale, g.dq, g.dk,
                           g.dv, threads, dtype);
  return g;
}

}  // namespace

TEST_CASE("attention backward: dq, dk, dv byte-identical for 1, 2 and 8 threads when the tiles are split",
          "[oracles]") {
  struct Case {
    int64_t hq, hkv, nq, nk;
    BlockMask mask;
  };
  // hkv = 1: one item, split for 2 and 8 threads; hkv = 3: 2 whole items + 1 split on 2 threads, all split on 8.
  const Case cases[] = {{2, 1, 330, 270, BlockMask::causal},
                        {2, 1, 270, 390, BlockMask::causal_bottom_right},
                        {1, 1, 300, 260, BlockMask::none},
                        {3, 3, 260, 260, BlockMask::causal}};
  for (const Dtype dtype : {Dtype::fp32, Dtype::fp64}) {
    for (const Case& c : cases) {
      INFO("hq " << c.hq << " hkv " << c.hkv << " nq " << c.nq << " nk " << c.nk << " mask "
                 << static_cast<int>(c.mask) << " dtype " << static_cast<int>(dtype));
      const Grads one = block_backward(c.hq, c.hkv, c.nq, c.nk, c.mask, dtype, 1);
      REQUIRE(max_abs(one.dq) > 1e-3);  // not vacuous
      REQUIRE(max_abs(one.dk) > 1e-3);
      REQUIRE(max_abs(one.dv) > 1e-3);
      for (const int threads : {2, 8}) {
        INFO("threads " << threads);
        const Grads many = block_backward(c.hq, c.hkv, c.nq, c.nk, c.mask, dtype, threads);
        CHECK(bytes_equal(many.dq, one.dq));
        CHECK(bytes_equal(many.dk, one.dk));
        CHECK(bytes_equal(many.dv, one.dv));
      }
    }
  }
}

TEST_CASE("non-CP baseline: outputs and grads byte-identical for 1, 2 and 8 threads (one kv head, split tiles)",
          "[oracles]") {
  AttentionInputs in;
  in.q = make_input(5, "q", 1, 300, 2, 32, "clamped_normal");
  in.k = make_input(5, "k", 1, 300, 1, 32, "clamped_normal");
  in.v = make_input(5, "v", 1, 300, 1, 32, "clamped_normal");
  in.dout = make_input(5, "dout", 1, 300, 2, 32, "clamped_normal");
  const AttentionOutputs one = non_cp_baseline_attention(in, true, 0.2, 1, Dtype::fp32);
  REQUIRE(max_abs(one.dk) > 1e-3);
  for (const int threads : {2, 8}) {
    INFO("threads " << threads);
    const AttentionOutputs many = non_cp_baseline_attention(in, true, 0.2, threads, Dtype::fp32);
    CHECK(bytes_equal(many.out, one.out));
    CHECK(bytes_equal(many.softmax_lse, one.softmax_lse));
    CHECK(bytes_equal(many.dq, one.dq));
    CHECK(bytes_equal(many.dk, one.dk));
    CHECK(bytes_equal(many.dv, one.dv));
  }
}
