// Efficiency tables of the attention kernels (FlashAttention-2, FlashAttention-3, cuDNN fused attention) on
// H100/H200 and A100, built from published TFLOP/s curves over sequence length.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "hcpsim/config/attention_backend.hpp"
#include "hcpsim/core/error.hpp"

namespace hcpsim {
namespace {

using Curve = std::array<double, 6>;  // TFLOP/s at sequence length 512, 1K, 2K, 4K, 8K, 16K

constexpr int64_t kSeqLens[] = {512, 1024, 2048, 4096, 8192, 16384};

// Source: FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608) Figures 5 and 6: H100 SXM5 BF16 TFLOP/s, head dim
// 128, batch·seqlen = 16K tokens, 16 heads, FA FLOP convention (forward 4·s²·d·h, halved when causal; backward
// 2.5 × forward). The paper's figures plot FlashAttention-3, cuDNN 9.x and FlashAttention-2 side by side.
constexpr Curve kFa3FwdD128 = {467, 565, 625, 638, 646, 648};
constexpr Curve kFa3FwdCausalD128 = {292, 423, 521, 579, 602, 616};
constexpr Curve kFa3BwdD128 = {316, 424, 501, 542, 559, 561};
constexpr Curve kCudnnFwdD128 = {497, 574, 617, 609, 600, 595};
constexpr Curve kCudnnFwdCausalD128 = {315, 410, 484, 518, 529, 539};
constexpr Curve kCudnnBwdD128 = {305, 408, 465, 499, 518, 516};
constexpr Curve kFa2FwdD128 = {309, 350, 362, 368, 370, 370};
constexpr Curve kFa2FwdCausalD128 = {191, 260, 298, 319, 333, 335};
constexpr Curve kFa2BwdD128 = {214, 260, 291, 310, 318, 322};

// Source: the same figures, head dims 64 and 256: endpoints at 512 and 16K only (the interior is interpolated,
// see endpoint_curve). FA3 forward hd64 333→497 (causal 197→473), hd256 482→756 (causal 286→642); backward hd64
// FA3 272→474, FA2 198→291, cuDNN 266→433.
constexpr double kFa3FwdD64[] = {333, 497};
constexpr double kFa3FwdCausalD64[] = {197, 473};
constexpr double kFa3FwdD256[] = {482, 756};
constexpr double kFa3FwdCausalD256[] = {286, 642};
constexpr double kFa3BwdD64[] = {272, 474};
constexpr double kFa2BwdD64[] = {198, 291};
constexpr double kCudnnBwdD64[] = {266, 433};

// Source: NVIDIA H100 SXM5 and A100 SXM4 datasheets: 989.4 and 312 TFLOP/s dense BF16.
constexpr double kH100PeakTflops = 989.4;
constexpr double kA100PeakTflops = 312;
// Source: FlashAttention-2 (Dao 2023, arXiv:2307.08691) on A100 SXM4 80GB: "up to 223–224 TFLOP/s" forward (head
// dim 128, no mask) and 187–196 TFLOP/s backward; the midpoints are used at 16K.
constexpr double kA100Fa2FwdTflops = 223.5;
constexpr double kA100Fa2BwdTflops = 191.5;

/// Assumption: a head dim with only its 512 and 16K values published follows the head-dim-128 curve `shape` times
/// a ratio that moves linearly (in log2 sequence length) from e[0]/shape[0] to e[1]/shape[5]; the endpoints are
/// reproduced exactly.
Curve endpoint_curve(const Curve& shape, const double (&e)[2]) {
  Curve c{};
  const double r0 = e[0] / shape[0];
  const double r5 = e[1] / shape[5];
  for (size_t i = 0; i < 6; ++i) c[i] = shape[i] * (r0 + (r5 - r0) * static_cast<double>(i) / 5);
  return c;
}

/// `c` times the pointwise ratio num / den.
Curve scaled(const Curve& c, const Curve& num, const Curve& den) {
  Curve out{};
  for (size_t i = 0; i < 6; ++i) out[i] = c[i] * num[i] / den[i];
  return out;
}

/// The six curves of one kernel and head dim, TFLOP/s.
struct KernelCurves {
  Curve fwd, fwd_causal, bwd, bwd_causal;
};

/// Head-dim 128 curves of `k` on H100 (published), with the backward causal curve derived.
KernelCurves hd128_curves(AttentionKernel k) {
  KernelCurves c;
  switch (k) {
    case AttentionKernel::flash_attention_3: c = {kFa3FwdD128, kFa3FwdCausalD128, kFa3BwdD128, {}}; break;
    case AttentionKernel::cudnn_fused_attention: c = {kCudnnFwdD128, kCudnnFwdCausalD128, kCudnnBwdD128, {}}; break;
    case AttentionKernel::flash_attention_2: c = {kFa2FwdD128, kFa2FwdCausalD128, kFa2BwdD128, {}}; break;
  }
  // Assumption (no published backward causal curve): the backward loses to the causal mask what the forward
  // loses, bwd_causal(s) = bwd_no_mask(s) · fwd_causal(s) / fwd_no_mask(s).
  c.bwd_causal = scaled(c.bwd, c.fwd_causal, c.fwd);
  return c;
}

/// Curves of `k` at head dim 64 or 256 on H100: published endpoints where the paper gives them (endpoint_curve),
/// else (assumption) the kernel's hd128 curve scaled by FlashAttention-3's hd / hd128 ratio of the same pass; the
/// hd256 backward, published for no kernel, takes FlashAttention-3's forward no-mask ratio.
KernelCurves other_dim_curves(AttentionKernel k, int64_t hd) {
  const KernelCurves base = hd128_curves(k);
  const KernelCurves fa3 = hd128_curves(AttentionKernel::flash_attention_3);
  const bool d64 = hd == 64;
  const Curve fa3_fwd = endpoint_curve(fa3.fwd, d64 ? kFa3FwdD64 : kFa3FwdD256);
  const Curve fa3_fwd_causal = endpoint_curve(fa3.fwd_causal, d64 ? kFa3FwdCausalD64 : kFa3FwdCausalD256);
  KernelCurves c;
  c.fwd = scaled(base.fwd, fa3_fwd, fa3.fwd);
  c.fwd_causal = scaled(base.fwd_causal, fa3_fwd_causal, fa3.fwd_causal);
  if (d64) {
    const double(&e)[2] = k == AttentionKernel::flash_attention_3 ? kFa3BwdD64
                          : k == AttentionKernel::flash_attention_2 ? kFa2BwdD64
                                                                    : kCudnnBwdD64;
    c.bwd = endpoint_curve(base.bwd, e);
  } else {
    c.bwd = scaled(base.bwd, fa3_fwd, fa3.fwd);
  }
  c.bwd_causal = scaled(c.bwd, c.fwd_causal, c.fwd);  // the hd128 assumption
  return c;
}

/// Appends the 6 × 6 grid of one curve: a block r × c takes the value of the square block of the same area,
/// n = sqrt(r·c), interpolated between the tabulated lengths in log2 space (assumption).
void append_grid(std::vector<EfficiencyPoint>& t, const Curve& tflops, double peak_tflops, int64_t hd, bool causal) {
  for (size_t i = 0; i < 6; ++i) {
    for (size_t j = 0; j < 6; ++j) {
      const double pos = static_cast<double>(i + j) / 2;
      const auto lo = static_cast<size_t>(pos);
      const double frac = pos - static_cast<double>(lo);
      const double v = frac == 0 ? tflops[lo] : tflops[lo] * (1 - frac) + tflops[lo + 1] * frac;
      const double e = v / peak_tflops;
      HCPSIM_ASSERT(e > 0 && e <= 1, "attention efficiency out of (0, 1]");
      t.push_back({hd, kSeqLens[i], kSeqLens[j], causal, e});
    }
  }
}

/// Tables from per-head-dim curves; `fwd_scale` / `bwd_scale` multiply the TFLOP/s (1 on H100).
AttentionTables tables(AttentionKernel k, double peak_tflops, double fwd_scale, double bwd_scale) {
  AttentionTables t;
  for (int causal = 0; causal < 2; ++causal) {
    for (int64_t hd : {64, 128, 256}) {
      const KernelCurves c = hd == 128 ? hd128_curves(k) : other_dim_curves(k, hd);
      Curve f = causal ? c.fwd_causal : c.fwd;
      Curve b = causal ? c.bwd_causal : c.bwd;
      for (auto& v : f) v *= fwd_scale;
      for (auto& v : b) v *= bwd_scale;
      append_grid(t.forward, f, peak_tflops, hd, causal == 1);
      append_grid(t.backward, b, peak_tflops, hd, causal == 1);
    }
  }
  return t;
}

}  // namespace

AttentionTables attention_kernel_tables(const std::string& gpu_name, AttentionKernel kernel) {
  // Source: NVIDIA H200 datasheet: the same Hopper SMs and clocks as H100 SXM5 (more and faster HBM), so the
  // compute-bound attention curves are taken as equal (assumption).
  if (gpu_name.rfind("H100", 0) == 0 || gpu_name.rfind("H200", 0) == 0) return tables(kernel, kH100PeakTflops, 1, 1);
  if (gpu_name.rfind("A100", 0) == 0) {
    // Assumption: on A100 every kernel follows FlashAttention-2's H100 curves (pass, mask, head dim) scaled so the
    // hd128 no-mask 16K point is the FA2 paper's A100 figure. FlashAttention-3 does not run on sm80; cuDNN fused
    // attention on A100 has no published curve and is taken to match FlashAttention-2 (same mma.sync tiles).
    const KernelCurves h100 = hd128_curves(AttentionKernel::flash_attention_2);
    return tables(AttentionKernel::flash_attention_2, kA100PeakTflops, kA100Fa2FwdTflops / h100.fwd[5],
                  kA100Fa2BwdTflops / h100.bwd[5]);
  }
  return {};  // B200 and unknown GPUs: no published curves, the scalar efficiencies stay
}

}  // namespace hcpsim
