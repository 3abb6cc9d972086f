// Tensor-core attention kernels (attention_tc.hpp) against block_math.hpp's row arithmetic run on the host
// (attn_fwd_row, attn_bwd_delta_row, attn_bwd_dq_row, attn_bwd_dkdv_row: the clear kernels' code), for every
// mask, GQA, dk 64 and 128, row counts that are not tile multiples, nonzero block row offsets, bf16 and fp16.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "catch_compat.hpp"
#include "hcpsim/gpu/attention_tc.hpp"
#include "hcpsim/gpu/block_math.hpp"

namespace {

using hcpsim::gpu::AttnBwdArgs;
using hcpsim::gpu::AttnBwdArgsBf16;
using hcpsim::gpu::AttnFwdArgs;
using hcpsim::gpu::AttnFwdArgsBf16;
using hcpsim::BlockMask;
using hcpsim::Dtype;
using hcpsim::gpu::TensorRef;
using hcpsim::gpu::TensorRefBf16;

/// Unit roundoff of the 16-bit formats (half an ulp at 1): bf16 has 8 significant bits, fp16 11.
/// Source: IEEE 754-2008 binary16; bfloat16 = binary32 truncated to 8 significant bits.
constexpr double kUnitRoundoffBf16 = 0x1p-8;
constexpr double kUnitRoundoffFp16 = 0x1p-11;
/// Relative L2 tolerance of out, dq, dk, dv in units of the format's unit roundoff u. Error model: the
/// tensor-core path rounds P (forward, and Pᵀ for dV) and dS (dQ, dK) to the 16-bit format before its matrix
/// products, a relative perturbation |δ| ≤ u of each term; these perturbations have independent signs, so the
/// error of a sum Σ δ_c·t_c has the size u/√3·‖t‖₂, the size of the sum itself for the random-sign terms used
/// here (not the worst case u·Σ|t_c|). Both sides then round the result once (≤ u/2 relative each). fp32
/// accumulation-order differences (~2⁻²⁴·√d) and exp2f's few-ulp error are negligible. Total ≈ 1.6u (a host
/// emulation of the kernels on these cases measured 0.4u–0.7u); 4u leaves headroom without hiding a real bug (a
/// wrong mask, row or head is an O(1) relative error).
/// Source: the error model above (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1 and §2.8 on
/// statistical rounding error estimates).
constexpr double kRelativeL2InUnits = 4.0;
/// fp32 unit roundoff, for the fp32-only quantities (lse, delta). Source: IEEE 754 binary32.
constexpr double kUnitRoundoffFp32 = 0x1p-24;

/// γ_n = n·u/(1 − n·u) for fp32: the relative error bound of an n-term fp32 sum or dot product.
/// Source: Higham, "Accuracy and Stability of Numerical Algorithms", §3.1.
double gamma_fp32(int64_t n) {
  const double nu = static_cast<double>(n) * kUnitRoundoffFp32;
  return nu / (1.0 - nu);
}

/// Absolute tolerance of one lse value (natural log, fp32 on both sides). Each score scale·q·k is an fp32 dot
/// product in a different order on each side: they differ by δ ≤ 2·γ_d·scale·Σ|q_w·k_w| ≤ 2·γ_d·scale·d
/// (entries in [−1, 1]). lse = max + log Σ exp(s − max): the max moves by ≤ δ, every exponent by ≤ 2δ (so the
/// sum by ≤ 2δ relative), the two fp32 sums of ≤ nk terms differ by ≤ 2·γ_nk relative, and exp/log add a few
/// ulp of the result: |Δlse| ≤ 3δ + 2·γ_nk + 4·u·max(1, |lse|).
double lse_tolerance(int64_t d, int64_t nk, float scale, double lse) {
  const double delta = 2.0 * gamma_fp32(d) * static_cast<double>(scale) * static_cast<double>(d);
  return 3.0 * delta + 2.0 * gamma_fp32(nk) + 4.0 * kUnitRoundoffFp32 * std::fmax(1.0, std::fabs(lse));
}

/// "" when a CUDA device is usable, else why not.
std::string device_unavailable() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(err);
  }
  if (count == 0) return "no usable CUDA device: cudaGetDeviceCount returned 0";
  return "";
}

/// SplitMix64 finalizer: a pure function of its input, so every value is reproducible from (seed, tag, index).
/// Source: Steele, Lea, Flood 2014, "Fast splittable pseudorandom number generators".
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A value in [−1, 1) exactly representable in `format`, from (tag, index).
float random_value(uint64_t tag, uint64_t index, Dtype format) {
  const uint64_t bits = mix64(mix64(tag) ^ index);
  const double unit = static_cast<double>(bits >> 11) * 0x1p-53;  // [0, 1)
  return hcpsim::semantics::round_to_dtype(static_cast<float>(2.0 * unit - 1.0), format);
}

float quiet_nan() { return std::numeric_limits<float>::quiet_NaN(); }

/// One tensor [batch, rows, heads, width] (bshd, float storage) with a host copy and a device copy. Starts as NaN
/// everywhere, so a kernel that reads outside its block or leaves an output unwritten shows it.
class Buffer {
 public:
  Buffer(int64_t batch, int64_t rows, int64_t heads, int64_t width)
      : batch_(batch), rows_(rows), heads_(heads), width_(width),
        host(static_cast<size_t>(batch * rows * heads * width), quiet_nan()) {
    const size_t bytes = (host.empty() ? 1 : host.size()) * sizeof(float);
    REQUIRE(cudaMalloc(&device_, bytes) == cudaSuccess);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { cudaFree(device_); }

  TensorRef host_ref() { return TensorRef{host.data(), rows_, heads_, width_}; }
  TensorRef device_ref() const { return TensorRef{device_, rows_, heads_, width_}; }
  float* device() const { return device_; }
  float& at(int64_t b, int64_t r, int64_t h, int64_t w) {
    return host[static_cast<size_t>(((b * rows_ + r) * heads_ + h) * width_ + w)];
  }
  int64_t batch() const { return batch_; }
  int64_t rows() const { return rows_; }
  int64_t heads() const { return heads_; }
  int64_t width() const { return width_; }
  void upload() {
    REQUIRE(cudaMemcpy(device_, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  void download() {
    REQUIRE(cudaMemcpy(host.data(), device_, host.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  /// Rows [row0, row0 + n) get random values of `format` (tag-seeded); the others stay NaN.
  void fill_rows(int64_t row0, int64_t n, uint64_t tag, Dtype format) {
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t r = row0; r < row0 + n; ++r)
        for (int64_t h = 0; h < heads_; ++h)
          for (int64_t w = 0; w < width_; ++w)
            at(b, r, h, w) = random_value(tag, static_cast<uint64_t>(((b * rows_ + r) * heads_ + h) * width_ + w),
                                          format);
  }

 private:
  int64_t batch_, rows_, heads_, width_;
  float* device_ = nullptr;

 public:
  std::vector<float> host;
};

/// Relative L2 error over rows [0, n) of got against want (both finite there, want nonzero), and that row n (the
/// one past the block, when the tensor has it) is still NaN in got: written rows only.
void require_close(Buffer& got, Buffer& want, int64_t n, double tolerance, const char* what) {
  double diff2 = 0.0;
  double ref2 = 0.0;
  int64_t non_finite = 0;
  int64_t written_past = 0;
  for (int64_t b = 0; b < got.batch(); ++b)
    for (int64_t r = 0; r < got.rows(); ++r)
      for (int64_t h = 0; h < got.heads(); ++h)
        for (int64_t w = 0; w < got.width(); ++w) {
          const float x = got.at(b, r, h, w);
          if (r >= n) {
            if (!std::isnan(x)) ++written_past;
            continue;
          }
          const float y = want.at(b, r, h, w);
          if (!std::isfinite(x) || !std::isfinite(y)) {
            ++non_finite;
            continue;
          }
          diff2 += (static_cast<double>(x) - y) * (static_cast<double>(x) - y);
          ref2 += static_cast<double>(y) * y;
        }
  const double rel = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  INFO(what << ": relative L2 error " << rel << " (tolerance " << tolerance << "), reference norm "
            << std::sqrt(ref2) << ", non-finite " << non_finite << ", rows past the block written " << written_past);
  REQUIRE(non_finite == 0);
  REQUIRE(written_past == 0);
  REQUIRE(ref2 > 0.0);  // not vacuous
  REQUIRE(rel <= tolerance);
}

/// One attention block configuration.
struct Case {
  int64_t batch, hq, hkv, d, q_row0, nq, kv_row0, nk;
  BlockMask mask;
  Dtype format;
  float scale;
};

std::string describe(const Case& c) {
  return "batch " + std::to_string(c.batch) + ", heads " + std::to_string(c.hq) + "/" + std::to_string(c.hkv) +
         ", d " + std::to_string(c.d) + ", q rows " + std::to_string(c.q_row0) + "+" + std::to_string(c.nq) +
         ", kv rows " + std::to_string(c.kv_row0) + "+" + std::to_string(c.nk) + ", mask " +
         std::to_string(static_cast<int>(c.mask)) + ", format " + std::to_string(static_cast<int>(c.format)) +
         ", scale " + std::to_string(c.scale);
}

/// Forward and backward of one block on the device (tensor cores) and on the host (block_math.hpp rows); checks
/// out, lse, delta, dq, dk, dv, the empty-row rule, untouched rows past the block and run-to-run determinism.
void run_case(const Case& c) {
  INFO(describe(c));
  const double u = c.format == Dtype::bf16 ? kUnitRoundoffBf16 : kUnitRoundoffFp16;
  const double tolerance = kRelativeL2InUnits * u;
  const int64_t q_rows = c.q_row0 + c.nq + 2;   // rows outside the block stay NaN: the kernels must not read them
  const int64_t kv_rows = c.kv_row0 + c.nk + 3;
  Buffer q(c.batch, q_rows, c.hq, c.d), dout(c.batch, q_rows, c.hq, c.d);  // [b, s, hq, d]
  Buffer k(c.batch, kv_rows, c.hkv, c.d), v(c.batch, kv_rows, c.hkv, c.d);  // [b, s, hkv, d]
  q.fill_rows(c.q_row0, c.nq, 1, c.format);
  k.fill_rows(c.kv_row0, c.nk, 2, c.format);
  v.fill_rows(c.kv_row0, c.nk, 3, c.format);
  dout.fill_rows(c.q_row0, c.nq, 4, c.format);
  q.upload();
  k.upload();
  v.upload();
  dout.upload();

  // Forward. out, lse have one row past the block, which must stay NaN.
  Buffer out_ref(c.batch, c.nq + 1, c.hq, c.d), lse_ref(c.batch, c.nq + 1, c.hq, 1);
  Buffer out(c.batch, c.nq + 1, c.hq, c.d), lse(c.batch, c.nq + 1, c.hq, 1);
  out.upload();
  lse.upload();
  AttnFwdArgs fwd{q.host_ref(), k.host_ref(), v.host_ref(), out_ref.host_ref(), lse_ref.host_ref(),
                  c.batch, c.q_row0, c.nq, c.kv_row0, c.nk, c.mask, c.scale, c.format};
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t r = 0; r < c.nq; ++r)
      for (int64_t h = 0; h < c.hq; ++h) hcpsim::gpu::attn_fwd_row(fwd, b, r, h);
  fwd.q = q.device_ref();
  fwd.k = k.device_ref();
  fwd.v = v.device_ref();
  fwd.out = out.device_ref();
  fwd.lse = lse.device_ref();
  REQUIRE(hcpsim::gpu::tensor_core_supported(fwd));
  REQUIRE(hcpsim::gpu::launch_attn_fwd_tensor_core(fwd, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  out.download();
  lse.download();

  // lse: −inf exactly where the reference has it (rows that see no key, whose out must be exactly 0), else close.
  int64_t empty_rows = 0;
  double lse_excess = 0.0;  // max over rows of |Δlse| / tolerance
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t r = 0; r < c.nq; ++r)
      for (int64_t h = 0; h < c.hq; ++h) {
        const float want = lse_ref.at(b, r, h, 0);
        const float got = lse.at(b, r, h, 0);
        if (want == -INFINITY) {
          ++empty_rows;
          REQUIRE(got == -INFINITY);
          for (int64_t w = 0; w < c.d; ++w) REQUIRE(out.at(b, r, h, w) == 0.0f);
          continue;
        }
        REQUIRE(std::isfinite(got));
        const double err = std::fabs(static_cast<double>(got) - want);
        lse_excess = std::fmax(lse_excess, err / lse_tolerance(c.d, c.nk, c.scale, want));
      }
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.hq; ++h) REQUIRE(std::isnan(lse.at(b, c.nq, h, 0)));
  INFO("lse: max error / tolerance " << lse_excess << ", rows with no visible key " << empty_rows);
  REQUIRE(lse_excess <= 1.0);
  require_close(out, out_ref, c.nq, tolerance, "out");

  // Backward, given the reference out and lse at the block's global q rows (as the executor passes them).
  Buffer out_g(c.batch, q_rows, c.hq, c.d), lse_g(c.batch, q_rows, c.hq, 1);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t r = 0; r < c.nq; ++r)
      for (int64_t h = 0; h < c.hq; ++h) {
        lse_g.at(b, c.q_row0 + r, h, 0) = lse_ref.at(b, r, h, 0);
        for (int64_t w = 0; w < c.d; ++w) out_g.at(b, c.q_row0 + r, h, w) = out_ref.at(b, r, h, w);
      }
  out_g.upload();
  lse_g.upload();
  Buffer delta_ref(c.batch, c.nq, c.hq, 1), delta(c.batch, c.nq, c.hq, 1);
  Buffer dq_ref(c.batch, c.nq + 1, c.hq, c.d), dq(c.batch, c.nq + 1, c.hq, c.d);
  Buffer dk_ref(c.batch, c.nk + 1, c.hkv, c.d), dk(c.batch, c.nk + 1, c.hkv, c.d);
  Buffer dv_ref(c.batch, c.nk + 1, c.hkv, c.d), dv(c.batch, c.nk + 1, c.hkv, c.d);
  dq.upload();
  dk.upload();
  dv.upload();
  AttnBwdArgs bwd{q.host_ref(),      k.host_ref(),  v.host_ref(),  out_g.host_ref(), dout.host_ref(),
                  lse_g.host_ref(),  dq_ref.host_ref(), dk_ref.host_ref(), dv_ref.host_ref(), delta_ref.host.data(),
                  c.batch, c.q_row0, c.nq, c.kv_row0, c.nk, c.mask, c.scale, c.format};
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t r = 0; r < c.nq; ++r)
      for (int64_t h = 0; h < c.hq; ++h) hcpsim::gpu::attn_bwd_delta_row(bwd, b, r, h);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t r = 0; r < c.nq; ++r)
      for (int64_t h = 0; h < c.hq; ++h) hcpsim::gpu::attn_bwd_dq_row(bwd, b, r, h);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t r = 0; r < c.nk; ++r)
      for (int64_t g = 0; g < c.hkv; ++g) hcpsim::gpu::attn_bwd_dkdv_row(bwd, b, r, g);
  bwd.q = q.device_ref();
  bwd.k = k.device_ref();
  bwd.v = v.device_ref();
  bwd.out = out_g.device_ref();
  bwd.dout = dout.device_ref();
  bwd.lse = lse_g.device_ref();
  bwd.dq = dq.device_ref();
  bwd.dk = dk.device_ref();
  bwd.dv = dv.device_ref();
  bwd.delta = delta.device();
  REQUIRE(hcpsim::gpu::tensor_core_supported(bwd));
  REQUIRE(hcpsim::gpu::launch_attn_bwd_tensor_core(bwd, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  delta.download();
  dq.download();
  dk.download();
  dv.download();

  // delta: both sides are fp32 dot products of d terms in different orders: |Δ| ≤ 2·γ_d·Σ|dout·out|.
  const double gamma_d = gamma_fp32(c.d);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t r = 0; r < c.nq; ++r)
      for (int64_t h = 0; h < c.hq; ++h) {
        double abs_sum = 0.0;
        for (int64_t w = 0; w < c.d; ++w)
          abs_sum += std::fabs(static_cast<double>(dout.at(b, c.q_row0 + r, h, w)) * out_g.at(b, c.q_row0 + r, h, w));
        const double err = std::fabs(static_cast<double>(delta.at(b, r, h, 0)) - delta_ref.at(b, r, h, 0));
        INFO("delta row " << r << " head " << h << ": error " << err);
        REQUIRE(err <= 2.0 * gamma_d * abs_sum);
      }
  require_close(dq, dq_ref, c.nq, tolerance, "dq");
  require_close(dk, dk_ref, c.nk, tolerance, "dk");
  require_close(dv, dv_ref, c.nk, tolerance, "dv");
  // Rows that see no key get dq = 0 exactly (every P is 0).
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t r = 0; r < c.nq; ++r)
      for (int64_t h = 0; h < c.hq; ++h)
        if (lse_ref.at(b, r, h, 0) == -INFINITY)
          for (int64_t w = 0; w < c.d; ++w) REQUIRE(dq.at(b, r, h, w) == 0.0f);

  // Deterministic: a second run gives the same bits (no atomics, fixed reduction order).
  const std::vector<float> dq_first = dq.host, dk_first = dk.host, dv_first = dv.host;
  REQUIRE(hcpsim::gpu::launch_attn_bwd_tensor_core(bwd, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  dq.download();
  dk.download();
  dv.download();
  REQUIRE(std::memcmp(dq_first.data(), dq.host.data(), dq.host.size() * sizeof(float)) == 0);
  REQUIRE(std::memcmp(dk_first.data(), dk.host.data(), dk.host.size() * sizeof(float)) == 0);
  REQUIRE(std::memcmp(dv_first.data(), dv.host.data(), dv.host.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("gpu: tensor-core attention, causal, bf16, dk 128, whole tiles", "[gpu][attention_tc]") {
  const std::string why = device_unavailable();
  if (!why.empty()) GPU_SKIP_IF_NO_DEVICE(why);
  run_case(Case{1, 2, 2, 128, 0, 192, 0, 192, BlockMask::causal, Dtype::bf16, 0.08838834764831845f});
}

TEST_CASE("gpu: tensor-core attention, no mask, fp16, dk 64, GQA 4/2, partial tiles and row offsets",
          "[gpu][attention_tc]") {
  const std::string why = device_unavailable();
  if (!why.empty()) GPU_SKIP_IF_NO_DEVICE(why);
  run_case(Case{2, 4, 2, 64, 37, 100, 19, 72, BlockMask::none, Dtype::fp16, 0.125f});
}

TEST_CASE("gpu: tensor-core attention, bottom-right causal with nq > nk (rows with no key), bf16, sharp softmax",
          "[gpu][attention_tc]") {
  const std::string why = device_unavailable();
  if (!why.empty()) GPU_SKIP_IF_NO_DEVICE(why);
  // visible(r) = r + 1 + 72 − 100: rows 0..27 see no key (lse −inf, out 0, dq 0). scale 1/2 on d = 128 makes
  // the scores ~5.7× wider than 1/√d (standard deviation ≈ 1.9), a peaked softmax whose running max moves
  // between the two KV tiles.
  run_case(Case{1, 4, 2, 128, 3, 100, 5, 72, BlockMask::causal_bottom_right, Dtype::bf16, 0.5f});
}

TEST_CASE("gpu: tensor-core attention, bottom-right causal with nq < nk, fp16, dk 128, GQA 2/1",
          "[gpu][attention_tc]") {
  const std::string why = device_unavailable();
  if (!why.empty()) GPU_SKIP_IF_NO_DEVICE(why);
  run_case(Case{1, 2, 1, 128, 5, 70, 64, 200, BlockMask::causal_bottom_right, Dtype::fp16, 0.08838834764831845f});
}

TEST_CASE("gpu: tensor-core attention, top-left causal with nq > nk, bf16, dk 64, several q tiles per KV tile",
          "[gpu][attention_tc]") {
  const std::string why = device_unavailable();
  if (!why.empty()) GPU_SKIP_IF_NO_DEVICE(why);
  run_case(Case{1, 3, 3, 64, 11, 150, 130, 90, BlockMask::causal, Dtype::bf16, 0.125f});
}

TEST_CASE("gpu: tensor-core attention, causal, fp16, dk 64, GQA 4/1 over many tiles", "[gpu][attention_tc]") {
  const std::string why = device_unavailable();
  if (!why.empty()) GPU_SKIP_IF_NO_DEVICE(why);
  run_case(Case{2, 4, 1, 64, 0, 300, 0, 300, BlockMask::causal, Dtype::fp16, 0.125f});
}

TEST_CASE("gpu: tensor-core attention with no key rows: out 0, lse -inf, dq 0; no query rows: nothing written",
          "[gpu][attention_tc]") {
  const std::string why = device_unavailable();
  if (!why.empty()) GPU_SKIP_IF_NO_DEVICE(why);
  constexpr int64_t kD = 64;
  constexpr int64_t kNq = 70;
  Buffer q(1, kNq, 2, kD), kv(1, 1, 1, kD), dout(1, kNq, 2, kD);
  q.fill_rows(0, kNq, 11, Dtype::bf16);
  dout.fill_rows(0, kNq, 12, Dtype::bf16);
  q.upload();
  kv.upload();
  dout.upload();
  Buffer out(1, kNq, 2, kD), lse(1, kNq, 2, 1);
  out.upload();
  lse.upload();
  AttnFwdArgs fwd{q.device_ref(), kv.device_ref(), kv.device_ref(), out.device_ref(), lse.device_ref(),
                  1, 0, kNq, 0, 0, BlockMask::none, 0.125f, Dtype::bf16};
  REQUIRE(hcpsim::gpu::launch_attn_fwd_tensor_core(fwd, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  out.download();
  lse.download();
  for (const float x : out.host) REQUIRE(x == 0.0f);
  for (const float x : lse.host) REQUIRE(x == -INFINITY);

  // Backward with nk = 0: delta from out = 0 is 0 and dq = 0.
  Buffer dq(1, kNq, 2, kD), delta(1, kNq, 2, 1), dkv(1, 1, 1, kD);
  dq.upload();
  dkv.upload();
  AttnBwdArgs bwd{q.device_ref(), kv.device_ref(), kv.device_ref(), out.device_ref(), dout.device_ref(),
                  lse.device_ref(), dq.device_ref(), dkv.device_ref(), dkv.device_ref(), delta.device(),
                  1, 0, kNq, 0, 0, BlockMask::none, 0.125f, Dtype::bf16};
  REQUIRE(hcpsim::gpu::launch_attn_bwd_tensor_core(bwd, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  dq.download();
  dkv.download();
  for (const float x : dq.host) REQUIRE(x == 0.0f);
  for (const float x : dkv.host) REQUIRE(std::isnan(x));  // zero KV rows: nothing written

  // nq = 0: nothing to compute, nothing written.
  Buffer out2(1, 1, 2, kD), lse2(1, 1, 2, 1);
  out2.upload();
  lse2.upload();
  AttnFwdArgs none{q.device_ref(), q.device_ref(), q.device_ref(), out2.device_ref(), lse2.device_ref(),
                   1, 0, 0, 0, kNq, BlockMask::causal, 0.125f, Dtype::fp16};
  REQUIRE(hcpsim::gpu::launch_attn_fwd_tensor_core(none, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  out2.download();
  for (const float x : out2.host) REQUIRE(std::isnan(x));
}

TEST_CASE("gpu: tensor-core attention on native bf16 storage gives the same bits as on float storage",
          "[gpu][attention_tc]") {
  const std::string why = device_unavailable();
  if (!why.empty()) GPU_SKIP_IF_NO_DEVICE(why);
  // Same kernels, same arithmetic; only the loads (cp.async of bf16 vs float→bf16 conversion, exact) and the final
  // store (RNE to bf16 either way) differ, so every output is bit-identical: REQUIRE(==).
  constexpr int64_t kD = 128, kN = 130, kHq = 4, kHkv = 2;
  constexpr float kScale = 0.08838834764831845f;
  Buffer q(1, kN, kHq, kD), k(1, kN, kHkv, kD), v(1, kN, kHkv, kD), dout(1, kN, kHq, kD);
  q.fill_rows(0, kN, 21, Dtype::bf16);
  k.fill_rows(0, kN, 22, Dtype::bf16);
  v.fill_rows(0, kN, 23, Dtype::bf16);
  dout.fill_rows(0, kN, 24, Dtype::bf16);
  Buffer out(1, kN, kHq, kD), lse(1, kN, kHq, 1), dq(1, kN, kHq, kD), dk(1, kN, kHkv, kD), dv(1, kN, kHkv, kD);
  Buffer delta(1, kN, kHq, 1);
  for (Buffer* b : {&q, &k, &v, &dout, &out, &lse, &dq, &dk, &dv}) b->upload();
  const AttnFwdArgs fwd{q.device_ref(), k.device_ref(), v.device_ref(), out.device_ref(), lse.device_ref(),
                        1, 0, kN, 0, kN, BlockMask::causal, kScale, Dtype::bf16};
  REQUIRE(hcpsim::gpu::launch_attn_fwd_tensor_core(fwd, nullptr));
  const AttnBwdArgs bwd{q.device_ref(),   k.device_ref(),  v.device_ref(),  out.device_ref(), dout.device_ref(),
                        lse.device_ref(), dq.device_ref(), dk.device_ref(), dv.device_ref(),  delta.device(),
                        1, 0, kN, 0, kN, BlockMask::causal, kScale, Dtype::bf16};
  REQUIRE(hcpsim::gpu::launch_attn_bwd_tensor_core(bwd, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (Buffer* b : {&out, &lse, &dq, &dk, &dv}) b->download();

  // The same tensors as bf16 (the top 16 bits of each float: exact for bf16 values).
  auto to_bf16 = [](const std::vector<float>& xs) {
    std::vector<uint16_t> ys(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      uint32_t u = 0;
      std::memcpy(&u, &xs[i], sizeof u);
      ys[i] = static_cast<uint16_t>(u >> 16);
    }
    return ys;
  };
  auto from_bf16 = [](const std::vector<uint16_t>& ys) {
    std::vector<float> xs(ys.size());
    for (size_t i = 0; i < ys.size(); ++i) {
      const uint32_t u = static_cast<uint32_t>(ys[i]) << 16;
      std::memcpy(&xs[i], &u, sizeof u);
    }
    return xs;
  };
  struct Bf16Device {
    __nv_bfloat16* ptr = nullptr;
    size_t n = 0;
    explicit Bf16Device(const std::vector<uint16_t>& host) : n(host.size()) {
      REQUIRE(cudaMalloc(&ptr, n * sizeof(uint16_t)) == cudaSuccess);
      REQUIRE(cudaMemcpy(ptr, host.data(), n * sizeof(uint16_t), cudaMemcpyHostToDevice) == cudaSuccess);
    }
    Bf16Device(const Bf16Device&) = delete;
    Bf16Device& operator=(const Bf16Device&) = delete;
    ~Bf16Device() { cudaFree(ptr); }
    std::vector<uint16_t> download() const {
      std::vector<uint16_t> host(n);
      REQUIRE(cudaMemcpy(host.data(), ptr, n * sizeof(uint16_t), cudaMemcpyDeviceToHost) == cudaSuccess);
      return host;
    }
  };
  const std::vector<uint16_t> nan_q(q.host.size(), 0x7FC0u), nan_kv(k.host.size(), 0x7FC0u);
  Bf16Device q16(to_bf16(q.host)), k16(to_bf16(k.host)), v16(to_bf16(v.host)), dout16(to_bf16(dout.host));
  Bf16Device out16(nan_q), dq16(nan_q), dk16(nan_kv), dv16(nan_kv);
  Buffer lse_native(1, kN, kHq, 1), delta_native(1, kN, kHq, 1);
  lse_native.upload();
  auto ref16 = [](const Bf16Device& t, int64_t heads) { return TensorRefBf16{t.ptr, kN, heads, kD}; };
  const AttnFwdArgsBf16 fwd16{ref16(q16, kHq), ref16(k16, kHkv), ref16(v16, kHkv), ref16(out16, kHq),
                              lse_native.device_ref(), 1, 0, kN, 0, kN, BlockMask::causal, kScale};
  REQUIRE(hcpsim::gpu::tensor_core_supported(fwd16));
  REQUIRE(hcpsim::gpu::launch_attn_fwd_tensor_core_bf16(fwd16, nullptr));
  const AttnBwdArgsBf16 bwd16{ref16(q16, kHq),  ref16(k16, kHkv),  ref16(v16, kHkv),  ref16(out16, kHq),
                              ref16(dout16, kHq), ref16(dq16, kHq), ref16(dk16, kHkv), ref16(dv16, kHkv),
                              lse_native.device_ref(), delta_native.device(), 1, 0, kN, 0, kN, BlockMask::causal,
                              kScale};
  REQUIRE(hcpsim::gpu::tensor_core_supported(bwd16));
  REQUIRE(hcpsim::gpu::launch_attn_bwd_tensor_core_bf16(bwd16, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  lse_native.download();

  double norm = 0.0;
  for (const float x : out.host) norm += std::fabs(x);
  REQUIRE(norm > 0.0);  // not vacuous
  REQUIRE(std::memcmp(lse_native.host.data(), lse.host.data(), lse.host.size() * sizeof(float)) == 0);
  REQUIRE(from_bf16(out16.download()) == out.host);
  REQUIRE(from_bf16(dq16.download()) == dq.host);
  REQUIRE(from_bf16(dk16.download()) == dk.host);
  REQUIRE(from_bf16(dv16.download()) == dv.host);
}

TEST_CASE("gpu: tensor-core attention rejects fp32, dk 96, dk != dv, uneven GQA and misaligned views",
          "[gpu][attention_tc]") {
  // Host-only checks: no device needed, and an unsupported launch must return false without launching.
  alignas(16) static float storage[64];
  const TensorRef q{storage, 1, 4, 128}, k{storage, 1, 2, 128}, lse{storage, 1, 4, 1};
  AttnFwdArgs fwd{q, k, k, q, lse, 1, 0, 1, 0, 1, BlockMask::causal, 0.125f, Dtype::bf16};
  REQUIRE(hcpsim::gpu::tensor_core_supported(fwd));  // the baseline is supported, so each rejection below is real
  fwd.format = Dtype::fp16;
  REQUIRE(hcpsim::gpu::tensor_core_supported(fwd));

  AttnFwdArgs fp32 = fwd;
  fp32.format = Dtype::fp32;
  REQUIRE_FALSE(hcpsim::gpu::tensor_core_supported(fp32));
  REQUIRE_FALSE(hcpsim::gpu::launch_attn_fwd_tensor_core(fp32, nullptr));

  AttnFwdArgs d96 = fwd;
  d96.q.width = d96.k.width = d96.v.width = d96.out.width = 96;
  REQUIRE_FALSE(hcpsim::gpu::tensor_core_supported(d96));
  REQUIRE_FALSE(hcpsim::gpu::launch_attn_fwd_tensor_core(d96, nullptr));

  AttnFwdArgs dv64 = fwd;
  dv64.v.width = dv64.out.width = 64;
  REQUIRE_FALSE(hcpsim::gpu::tensor_core_supported(dv64));

  AttnFwdArgs gqa = fwd;
  gqa.k.heads = gqa.v.heads = 3;
  REQUIRE_FALSE(hcpsim::gpu::tensor_core_supported(gqa));

  AttnFwdArgs misaligned = fwd;
  misaligned.q.data = storage + 1;
  REQUIRE_FALSE(hcpsim::gpu::tensor_core_supported(misaligned));

  AttnBwdArgs bwd{q, k, k, q, q, lse, q, k, k, storage, 1, 0, 1, 0, 1, BlockMask::causal, 0.125f, Dtype::bf16};
  REQUIRE(hcpsim::gpu::tensor_core_supported(bwd));
  bwd.format = Dtype::fp32;
  REQUIRE_FALSE(hcpsim::gpu::tensor_core_supported(bwd));
  REQUIRE_FALSE(hcpsim::gpu::launch_attn_bwd_tensor_core(bwd, nullptr));
  bwd.format = Dtype::bf16;
  bwd.dk.width = 96;
  REQUIRE_FALSE(hcpsim::gpu::tensor_core_supported(bwd));
  bwd.dk.width = 128;
  bwd.delta = nullptr;
  REQUIRE_FALSE(hcpsim::gpu::tensor_core_supported(bwd));
}
