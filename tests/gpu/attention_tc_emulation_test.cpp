// The tensor-core kernels' own source (gpu/src/attention_tc_kernels.cuh), compiled for the host through the CUDA
// emulation of tc_emulation.hpp and compared with the clear row kernels' arithmetic (block_math.hpp): runs on
// every machine, GPU or not, so the kernels' tiling, masking, GQA mapping and barriers are tested in CI.
#include "tc_emulation.hpp"
// clang-format off: the emulation must come first
#include "../../gpu/src/attention_tc_kernels.cuh"
// clang-format on

#include <cmath>
#include <limits>
#include <vector>

#include "catch_compat.hpp"

namespace hcpsim::gpu {
namespace {

template <class S, class T, int D>
void emu_fwd(const FwdParams<S>& p) {
  if (p.batch == 0 || p.nq == 0) return;
  emu::launch(static_cast<unsigned>(tile_count(p.nq)), static_cast<unsigned>(p.q.heads),
              static_cast<unsigned>(p.batch), kFwdThreads, FwdSmem<D>::bytes, [&] { attn_fwd_tc_kernel<S, T, D>(p); });
}

template <class S, class T, int D>
void emu_bwd(const BwdParams<S>& p) {
  if (p.batch == 0) return;
  if (p.nq > 0) {
    const int64_t rows = p.batch * p.nq * p.q.heads;
    emu::launch(static_cast<unsigned>((rows + kDeltaRowsPerBlock - 1) / kDeltaRowsPerBlock), 1, 1, kBwdThreads, 0,
                [&] { attn_bwd_delta_tc_kernel<S>(p); });
  }
  if (p.nk > 0)
    emu::launch(static_cast<unsigned>(tile_count(p.nk)), static_cast<unsigned>(p.k.heads),
                static_cast<unsigned>(p.batch), kBwdThreads, BwdSmem<D>::bytes,
                [&] { attn_bwd_dkdv_tc_kernel<S, T, D>(p); });
  if (p.nq > 0)
    emu::launch(static_cast<unsigned>(tile_count(p.nq)), static_cast<unsigned>(p.q.heads),
                static_cast<unsigned>(p.batch), kBwdThreads, BwdSmem<D>::bytes,
                [&] { attn_bwd_dq_tc_kernel<S, T, D>(p); });
}

/// A float buffer [b, rows, heads, width], NaN outside the rows a case fills.
struct Buf {
  int64_t batch, rows, heads, width;
  std::vector<float> v;
  Buf(int64_t b, int64_t r, int64_t h, int64_t w)
      : batch(b), rows(r), heads(h), width(w),
        v(static_cast<size_t>(b * r * h * w), std::numeric_limits<float>::quiet_NaN()) {}
  TensorRef ref() { return TensorRef{v.data(), rows, heads, width}; }
  float& at(int64_t b, int64_t r, int64_t h, int64_t w) {
    return v[static_cast<size_t>(((b * rows + r) * heads + h) * width + w)];
  }
  /// Rows [r0, r0 + n) from a SplitMix-style hash of (tag, index), uniform in [-1, 1), rounded to `format`.
  void fill(int64_t r0, int64_t n, uint64_t tag, Dtype format) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t r = r0; r < r0 + n; ++r)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t w = 0; w < width; ++w) {
            uint64_t x = tag * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(((b * rows + r) * heads + h) * width + w);
            x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
            x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
            x ^= x >> 31;
            at(b, r, h, w) = semantics::round_to_dtype(static_cast<float>(2.0 * static_cast<double>(x >> 11) * 0x1p-53 - 1.0), format);
          }
  }
};

/// rel L2 of rows [0, n) of got vs want (both finite there), and rows ≥ n of got untouched (NaN).
double rel_l2_rows(Buf& got, Buf& want, int64_t n) {
  double d2 = 0, r2 = 0;
  for (int64_t b = 0; b < got.batch; ++b)
    for (int64_t r = 0; r < got.rows; ++r)
      for (int64_t h = 0; h < got.heads; ++h)
        for (int64_t w = 0; w < got.width; ++w) {
          const float x = got.at(b, r, h, w);
          if (r >= n) {
            REQUIRE(std::isnan(x));  // no write past the block
            continue;
          }
          const float y = want.at(b, r, h, w);
          REQUIRE(std::isfinite(x));
          d2 += (static_cast<double>(x) - y) * (static_cast<double>(x) - y);
          r2 += static_cast<double>(y) * y;
        }
  REQUIRE(r2 > 0);
  return std::sqrt(d2 / r2);
}

struct Case {
  int64_t hq, hkv, q_row0, nq, kv_row0, nk;
  BlockMask mask;
  Dtype format;
};

constexpr int D = 64;  // head dim of every case (the kernels are instantiated for 64 and 128)

/// Tolerance: both sides compute in fp32 from the same 16-bit inputs and round out/dq/dk/dv once; the tensor-core
/// path also rounds P (and dS) to the 16-bit format before the second products, like FlashAttention. Each rounding
/// has relative size ≤ u (bf16 2^-8, fp16 2^-11) and enters the sums with random signs, so the relative L2
/// difference is about u (measured 0.4–0.7 u); 4u bounds it, while a wrong mask, tile offset or head mapping
/// changes whole rows (O(1) relative).
double tolerance(const Case& c) {
  const double u = c.format == Dtype::bf16 ? 0x1p-8 : 0x1p-11;
  return 4 * u;
}

/// The inputs of a case, batch 1: q and dout filled at rows [q_row0, q_row0 + nq), k and v at rows
/// [kv_row0, kv_row0 + nk), NaN in the rows around them.
struct CaseInputs {
  Buf q, dout, k, v;
};

CaseInputs make_inputs(const Case& c) {
  const int64_t b = 1, qrows = c.q_row0 + c.nq + 2, krows = c.kv_row0 + c.nk + 3;
  CaseInputs in{Buf(b, qrows, c.hq, D), Buf(b, qrows, c.hq, D), Buf(b, krows, c.hkv, D), Buf(b, krows, c.hkv, D)};
  in.q.fill(c.q_row0, c.nq, 1, c.format);
  in.k.fill(c.kv_row0, c.nk, 2, c.format);
  in.v.fill(c.kv_row0, c.nk, 3, c.format);
  in.dout.fill(c.q_row0, c.nq, 4, c.format);
  return in;
}

/// Forward: the tensor-core kernel against the row kernel, which writes its out and lse into out_ref and lse_ref
/// ([1, nq + 1, hq, ·]) for the backward.
void check_forward(const Case& c, CaseInputs& in, Buf& out_ref, Buf& lse_ref) {
  const int64_t b = 1;
  Buf out(b, c.nq + 1, c.hq, D), lse(b, c.nq + 1, c.hq, 1);
  AttnFwdArgs f;
  f.q = in.q.ref();
  f.k = in.k.ref();
  f.v = in.v.ref();
  f.batch = b;
  f.q_row0 = c.q_row0;
  f.nq = c.nq;
  f.kv_row0 = c.kv_row0;
  f.nk = c.nk;
  f.mask = c.mask;
  f.scale = 0.125f;
  f.format = c.format;
  AttnFwdArgs fr = f;
  fr.out = out_ref.ref();
  fr.lse = lse_ref.ref();
  for (int64_t r = 0; r < c.nq; ++r)
    for (int64_t h = 0; h < c.hq; ++h) attn_fwd_row(fr, 0, r, h);
  f.out = out.ref();
  f.lse = lse.ref();
  REQUIRE(tensor_core_supported(f));
  if (c.format == Dtype::bf16) {
    emu_fwd<float, __nv_bfloat16, D>(fwd_params<float>(f, f.format));
  } else {
    emu_fwd<float, __half, D>(fwd_params<float>(f, f.format));
  }
  REQUIRE(rel_l2_rows(out, out_ref, c.nq) <= tolerance(c));
  for (int64_t r = 0; r < c.nq; ++r)
    for (int64_t h = 0; h < c.hq; ++h) {
      const float want = lse_ref.at(0, r, h, 0), got = lse.at(0, r, h, 0);
      if (std::isinf(want)) {
        REQUIRE(got == want);  // a row with no visible key: −inf (and out = 0, checked above)
      } else {
        REQUIRE(std::fabs(got - want) <= 1e-5 * (1 + std::fabs(want)));
      }
    }
}

/// Backward, given the reference's out and lse (rows [0, nq)) as the global ones: the tensor-core kernels'
/// delta, dq, dk, dv against the row kernels'.
void check_backward(const Case& c, CaseInputs& in, Buf& out_ref, Buf& lse_ref) {
  const int64_t b = 1, qrows = in.q.rows;
  Buf gout(b, qrows, c.hq, D), glse(b, qrows, c.hq, 1);
  for (int64_t r = 0; r < c.nq; ++r)
    for (int64_t h = 0; h < c.hq; ++h) {
      glse.at(0, c.q_row0 + r, h, 0) = lse_ref.at(0, r, h, 0);
      for (int64_t w = 0; w < D; ++w) gout.at(0, c.q_row0 + r, h, w) = out_ref.at(0, r, h, w);
    }
  Buf dq(b, c.nq + 1, c.hq, D), dk(b, c.nk + 1, c.hkv, D), dv(b, c.nk + 1, c.hkv, D);
  Buf dq_ref(b, c.nq + 1, c.hq, D), dk_ref(b, c.nk + 1, c.hkv, D), dv_ref(b, c.nk + 1, c.hkv, D);
  std::vector<float> delta(static_cast<size_t>(c.nq * c.hq)), delta_ref(delta.size());
  AttnBwdArgs g;
  g.q = in.q.ref();
  g.k = in.k.ref();
  g.v = in.v.ref();
  g.out = gout.ref();
  g.dout = in.dout.ref();
  g.lse = glse.ref();
  g.batch = b;
  g.q_row0 = c.q_row0;
  g.nq = c.nq;
  g.kv_row0 = c.kv_row0;
  g.nk = c.nk;
  g.mask = c.mask;
  g.scale = 0.125f;
  g.format = c.format;
  AttnBwdArgs gr = g;
  gr.dq = dq_ref.ref();
  gr.dk = dk_ref.ref();
  gr.dv = dv_ref.ref();
  gr.delta = delta_ref.data();
  for (int64_t r = 0; r < c.nq; ++r)
    for (int64_t h = 0; h < c.hq; ++h) attn_bwd_delta_row(gr, 0, r, h);
  for (int64_t r = 0; r < c.nq; ++r)
    for (int64_t h = 0; h < c.hq; ++h) attn_bwd_dq_row(gr, 0, r, h);
  for (int64_t kr = 0; kr < c.nk; ++kr)
    for (int64_t h = 0; h < c.hkv; ++h) attn_bwd_dkdv_row(gr, 0, kr, h);
  g.dq = dq.ref();
  g.dk = dk.ref();
  g.dv = dv.ref();
  g.delta = delta.data();
  REQUIRE(tensor_core_supported(g));
  if (c.format == Dtype::bf16) {
    emu_bwd<float, __nv_bfloat16, D>(bwd_params<float>(g, g.format));
  } else {
    emu_bwd<float, __half, D>(bwd_params<float>(g, g.format));
  }
  for (size_t i = 0; i < delta.size(); ++i) REQUIRE(std::fabs(delta[i] - delta_ref[i]) <= 1e-4);
  const double tol = tolerance(c);
  REQUIRE(rel_l2_rows(dq, dq_ref, c.nq) <= tol);
  REQUIRE(rel_l2_rows(dk, dk_ref, c.nk) <= tol);
  REQUIRE(rel_l2_rows(dv, dv_ref, c.nk) <= tol);
}

void check_case(const Case& c) {
  CaseInputs in = make_inputs(c);
  Buf out_ref(1, c.nq + 1, c.hq, D), lse_ref(1, c.nq + 1, c.hq, 1);
  check_forward(c, in, out_ref, lse_ref);
  check_backward(c, in, out_ref, lse_ref);
}

}  // namespace
}  // namespace hcpsim::gpu

using hcpsim::BlockMask;
using hcpsim::Dtype;

TEST_CASE("gpu kernels (host emulation): tensor-core forward and backward equal the row kernels", "[gpu_emulation]") {
  // Partial tiles (80 and 72 rows against 64-row tiles), row offsets, both causal alignments (rows with no key
  // under bottom-right with nq > nk), no mask, GQA 2/1, bf16 and fp16.
  const hcpsim::gpu::Case cases[] = {
      {2, 1, 3, 80, 5, 72, BlockMask::causal, Dtype::bf16},
      {2, 2, 0, 72, 2, 80, BlockMask::none, Dtype::fp16},
      {2, 1, 1, 80, 0, 40, BlockMask::causal_bottom_right, Dtype::bf16},
  };
  for (const auto& c : cases) {
    INFO("hq " << c.hq << "/" << c.hkv << " q " << c.q_row0 << "+" << c.nq << " kv " << c.kv_row0 << "+" << c.nk
               << " mask " << static_cast<int>(c.mask) << " format " << static_cast<int>(c.format));
    hcpsim::gpu::check_case(c);
  }
}
