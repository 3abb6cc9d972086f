// Attention kernel benchmark on one GPU: the cuBLAS bf16 GEMM rate as the ceiling, the tensor-core attention
// block (attention_tc.hpp, native bf16 storage) forward and backward at S = 4096 and 8192, and the clear row
// kernels (kernels.hpp) at S = 4096 causal; plus a correctness spot check of the tensor-core outputs against the
// clear kernels. Times are CUDA-event medians after warm-up. Exit codes: 0 ok, 1 spot check failed, 2 no CUDA
// device or bad option, 3 CUDA or cuBLAS error.
//
//   hcpsim_gpu_attention_bench [--quick]     (--quick: fewer repetitions, S = 4096 only; < 60 s)
//
// The last line reads `forward_fraction=<x> backward_fraction=<y>` (tensor-core rate / cuBLAS bf16 rate at
// S = 8192 causal, 16 heads, or S = 4096 with --quick) for grepping.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/gpu/attention_tc.hpp"
#include "hcpsim/gpu/kernels.hpp"

namespace {

using hcpsim::gpu::AttnBwdArgs;
using hcpsim::gpu::AttnBwdArgsBf16;
using hcpsim::gpu::AttnFwdArgs;
using hcpsim::gpu::AttnFwdArgsBf16;
using hcpsim::BlockMask;
using hcpsim::Dtype;
using hcpsim::gpu::TensorRef;
using hcpsim::gpu::TensorRefBf16;

/// GEMM edge for the cuBLAS ceiling: m = n = k = 8192 (1.1 TFLOP per call, well past launch overhead).
/// Source: the usual square large-GEMM peak measurement; big enough for cuBLAS's fastest Hopper kernels.
constexpr int kGemmEdge = 8192;
/// Head dimension (dk = dv) of every timed case. Source: Llama-style models (head_dim 128).
constexpr int64_t kHeadDim = 128;
/// Spot-check limit on max |tensor-core − clear| / max |clear| per tensor: 3·2⁻⁸. Derivation (bf16 unit
/// roundoff u = 2⁻⁸, ulp(x) ≤ 2u·|x|): both paths take the same bf16 inputs and round their fp32 result once to
/// bf16, each by ≤ ulp/2, possibly in opposite directions: fp32 results closer than an ulp end ≤ 1 ulp ≤ 2u·|x|
/// ≤ 2⁻⁷·max|x| apart. Before that rounding, the tensor-core path has also rounded P (forward, dV) and dS (dQ,
/// dK) to bf16 before its products: a relative perturbation ≤ u of each term, random in sign, which moves the
/// fp32 result by ≲ u relative to the tensor's scale. Total ≤ 2u + u = 3·2⁻⁸. (A host emulation of these kernels
/// at this size, 7 data seeds, measured 2.8·10⁻³ to 7.3·10⁻³ against 2⁻⁷ = 7.8·10⁻³, the largest being one 1-ulp
/// flip of a dq element just above a power of two: a flat 2⁻⁷ would fail on a single 2-ulp difference in the top
/// binade.) lse (fp32) differs by summation order only (~10⁻⁷ relative). A real indexing or masking bug is an
/// O(1) relative error.
/// Source: the error model above; IEEE 754 round to nearest even.
constexpr double kSpotTolerance = 3.0 * 0x1p-8;

[[noreturn]] void fail_device(const char* what, const char* detail, int line) {
  std::fprintf(stderr, "attention_bench.cu:%d: %s: %s\n", line, what, detail);
  std::exit(3);
}

#define BENCH_CUDA(call)                                                       \
  do {                                                                         \
    const cudaError_t status_ = (call);                                        \
    if (status_ != cudaSuccess) fail_device(#call, cudaGetErrorString(status_), __LINE__); \
  } while (0)

#define BENCH_CUBLAS(call)                                                     \
  do {                                                                         \
    const cublasStatus_t status_ = (call);                                     \
    if (status_ != CUBLAS_STATUS_SUCCESS) fail_device(#call, cublasGetStatusString(status_), __LINE__); \
  } while (0)

/// SplitMix64 finalizer (Steele, Lea, Flood 2014): every value is a pure function of (tag, index).
__host__ __device__ inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// data[i] = a bf16 value in [−1, 1) from (tag, i), as float (exactly representable) and/or as bf16.
__global__ void fill_kernel(float* as_float, __nv_bfloat16* as_bf16, int64_t count, uint64_t tag) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t bits = mix64(mix64(tag) ^ static_cast<uint64_t>(i));
    const float unit = static_cast<float>(bits >> 40) * 0x1p-24f;  // [0, 1), exact in fp32
    const __nv_bfloat16 x = __float2bfloat16_rn(2.0f * unit - 1.0f);
    if (as_float != nullptr) as_float[i] = __bfloat162float(x);
    if (as_bf16 != nullptr) as_bf16[i] = x;
  }
}

/// to[i] = bf16(from[i]) (exact for bf16 values).
__global__ void to_bf16_kernel(const float* from, __nv_bfloat16* to, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    to[i] = __float2bfloat16_rn(from[i]);
}

/// Threads and maximum blocks of the fill kernels. Source: a multiple of the warp; grid-stride loops cover the rest.
constexpr int kFillThreads = 256;
constexpr int kFillMaxBlocks = 4096;

unsigned fill_blocks(int64_t count) {
  const int64_t blocks = (count + kFillThreads - 1) / kFillThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kFillMaxBlocks));
}

/// A device allocation of `count` elements of T, freed at scope exit.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(int64_t count) : count_(count) {
    BENCH_CUDA(cudaMalloc(&data_, static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T)));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }
  T* data() const { return data_; }
  int64_t count() const { return count_; }
  std::vector<float> to_host_float() const {
    std::vector<T> host(static_cast<size_t>(count_));
    BENCH_CUDA(cudaMemcpy(host.data(), data_, host.size() * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> out(host.size());
    for (size_t i = 0; i < host.size(); ++i) {
      if constexpr (std::is_same_v<T, float>) {
        out[i] = host[i];
      } else {
        out[i] = __bfloat162float(host[i]);
      }
    }
    return out;
  }

 private:
  T* data_ = nullptr;
  int64_t count_ = 0;
};

void fill(float* as_float, __nv_bfloat16* as_bf16, int64_t count, uint64_t tag) {
  fill_kernel<<<fill_blocks(count), kFillThreads>>>(as_float, as_bf16, count, tag);
  BENCH_CUDA(cudaGetLastError());
}

/// Median over `reps` timed calls of `run` (after `warmup` untimed ones), in milliseconds.
template <class F>
double median_ms(F&& run, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) run();
  BENCH_CUDA(cudaDeviceSynchronize());
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    BENCH_CUDA(cudaEventRecord(start));
    run();
    BENCH_CUDA(cudaEventRecord(stop));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0.0f;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  return n % 2 == 1 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

/// Repetitions: warm-up and timed calls per measurement.
struct Reps {
  int warmup;
  int timed;
};

/// FLOPs of one S × S attention block (batch 1, hq query heads, dk = dv = 128) under the project's convention:
/// forward 2·(dk + dv), backward 2·(3·dk + 2·dv) per visible (query, key) pair (S(S+1)/2 causal, S² none), times
/// the query heads. Source: core's attn_fwd_flops_per_pair, attn_bwd_flops_per_pair (schedule_builder.hpp) and
/// semantics::block_pairs (semantics.hpp).
double attention_flops(int64_t s, BlockMask mask, int64_t hq, bool backward) {
  const double per_pair = backward ? hcpsim::attn_bwd_flops_per_pair(kHeadDim, kHeadDim)
                                   : hcpsim::attn_fwd_flops_per_pair(kHeadDim, kHeadDim);
  const auto pairs = static_cast<double>(hcpsim::semantics::block_pairs(s, s, mask));
  return per_pair * pairs * static_cast<double>(hq);
}

/// One row of the result table.
struct Row {
  std::string kernel;
  int64_t s;
  BlockMask mask;
  int64_t hq, hkv;
  double ms, tflops;
};

const char* mask_name(BlockMask mask) {
  switch (mask) {
    case BlockMask::none: return "none";
    case BlockMask::causal: return "causal";
    case BlockMask::causal_bottom_right: return "causal_br";
  }
  return "?";
}

/// q, k, v, out, dout, dq, dk, dv (bf16, [1, S, h, 128]) and lse, delta (fp32) for one native bf16 block.
struct Bf16Block {
  int64_t s, hq, hkv;
  DeviceArray<__nv_bfloat16> q, k, v, out, dout, dq, dk, dv;
  DeviceArray<float> lse, delta;
  Bf16Block(int64_t s_, int64_t hq_, int64_t hkv_)
      : s(s_), hq(hq_), hkv(hkv_), q(s_ * hq_ * kHeadDim), k(s_ * hkv_ * kHeadDim), v(s_ * hkv_ * kHeadDim),
        out(s_ * hq_ * kHeadDim), dout(s_ * hq_ * kHeadDim), dq(s_ * hq_ * kHeadDim), dk(s_ * hkv_ * kHeadDim),
        dv(s_ * hkv_ * kHeadDim), lse(s_ * hq_), delta(s_ * hq_) {
    fill(nullptr, q.data(), q.count(), 1);
    fill(nullptr, k.data(), k.count(), 2);
    fill(nullptr, v.data(), v.count(), 3);
    fill(nullptr, dout.data(), dout.count(), 4);
  }
  TensorRefBf16 ref(const DeviceArray<__nv_bfloat16>& t, int64_t heads) const {
    return TensorRefBf16{t.data(), s, heads, kHeadDim};
  }
  AttnFwdArgsBf16 fwd(BlockMask mask) const {
    return AttnFwdArgsBf16{ref(q, hq), ref(k, hkv), ref(v, hkv), ref(out, hq), TensorRef{lse.data(), s, hq, 1},
                           1, 0, s, 0, s, mask, 1.0f / std::sqrt(static_cast<float>(kHeadDim))};
  }
  AttnBwdArgsBf16 bwd(BlockMask mask) const {
    return AttnBwdArgsBf16{ref(q, hq),   ref(k, hkv),  ref(v, hkv),  ref(out, hq), ref(dout, hq),
                           ref(dq, hq),  ref(dk, hkv), ref(dv, hkv), TensorRef{lse.data(), s, hq, 1},
                           delta.data(), 1,            0,            s,            0,
                           s,            mask,         1.0f / std::sqrt(static_cast<float>(kHeadDim))};
  }
};

/// q, k, v, out, dout, dq, dk, dv (float storage of bf16 values) and lse, delta for one clear-kernel block.
struct FloatBlock {
  int64_t s, hq, hkv;
  DeviceArray<float> q, k, v, out, dout, dq, dk, dv, lse, delta;
  FloatBlock(int64_t s_, int64_t hq_, int64_t hkv_)
      : s(s_), hq(hq_), hkv(hkv_), q(s_ * hq_ * kHeadDim), k(s_ * hkv_ * kHeadDim), v(s_ * hkv_ * kHeadDim),
        out(s_ * hq_ * kHeadDim), dout(s_ * hq_ * kHeadDim), dq(s_ * hq_ * kHeadDim), dk(s_ * hkv_ * kHeadDim),
        dv(s_ * hkv_ * kHeadDim), lse(s_ * hq_), delta(s_ * hq_) {
    fill(q.data(), nullptr, q.count(), 1);
    fill(k.data(), nullptr, k.count(), 2);
    fill(v.data(), nullptr, v.count(), 3);
    fill(dout.data(), nullptr, dout.count(), 4);
  }
  TensorRef ref(const DeviceArray<float>& t, int64_t heads) const { return TensorRef{t.data(), s, heads, kHeadDim}; }
  AttnFwdArgs fwd(BlockMask mask) const {
    return AttnFwdArgs{ref(q, hq), ref(k, hkv), ref(v, hkv), ref(out, hq), TensorRef{lse.data(), s, hq, 1},
                       1, 0, s, 0, s, mask, 1.0f / std::sqrt(static_cast<float>(kHeadDim)), Dtype::bf16};
  }
  AttnBwdArgs bwd(BlockMask mask) const {
    return AttnBwdArgs{ref(q, hq),   ref(k, hkv),  ref(v, hkv),  ref(out, hq),
                       ref(dout, hq), TensorRef{lse.data(), s, hq, 1}, ref(dq, hq), ref(dk, hkv),
                       ref(dv, hkv), delta.data(), 1, 0, s, 0, s, mask,
                       1.0f / std::sqrt(static_cast<float>(kHeadDim)), Dtype::bf16};
  }
};

/// max |a − b| / max |b| (NaN if either holds a NaN or b is all zero, which fails the check).
double relative_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0;
  double scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return NAN;
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0.0 ? diff / scale : NAN;
}

/// Spot check at S = 512 causal, 4 query heads over 2 kv heads: tensor-core (native bf16) against the clear
/// kernels (float storage, format bf16). The backward of both paths takes the clear forward's out and lse.
bool spot_check() {
  constexpr int64_t kS = 512, kHq = 4, kHkv = 2;
  FloatBlock clear(kS, kHq, kHkv);
  Bf16Block tc(kS, kHq, kHkv);  // same tags: the same bf16 values as `clear`
  hcpsim::gpu::launch_attn_fwd_clear(clear.fwd(BlockMask::causal), nullptr);
  if (!hcpsim::gpu::launch_attn_fwd_tensor_core_bf16(tc.fwd(BlockMask::causal), nullptr)) {
    std::fprintf(stderr, "spot check: the tensor-core forward rejected its arguments\n");
    return false;
  }
  BENCH_CUDA(cudaDeviceSynchronize());
  const std::vector<float> out_tc = tc.out.to_host_float(), lse_tc = tc.lse.to_host_float();
  // The backward of both paths from the clear forward's out (bf16 values) and lse.
  to_bf16_kernel<<<fill_blocks(clear.out.count()), kFillThreads>>>(clear.out.data(), tc.out.data(),
                                                                    clear.out.count());
  BENCH_CUDA(cudaGetLastError());
  BENCH_CUDA(cudaMemcpy(tc.lse.data(), clear.lse.data(), static_cast<size_t>(kS * kHq) * sizeof(float),
                        cudaMemcpyDeviceToDevice));
  hcpsim::gpu::launch_attn_bwd_clear(clear.bwd(BlockMask::causal), nullptr);
  if (!hcpsim::gpu::launch_attn_bwd_tensor_core_bf16(tc.bwd(BlockMask::causal), nullptr)) {
    std::fprintf(stderr, "spot check: the tensor-core backward rejected its arguments\n");
    return false;
  }
  BENCH_CUDA(cudaDeviceSynchronize());
  struct Pair {
    const char* name;
    std::vector<float> tc, clear;
  };
  const Pair pairs[] = {{"out", out_tc, clear.out.to_host_float()},
                        {"lse", lse_tc, clear.lse.to_host_float()},
                        {"dq", tc.dq.to_host_float(), clear.dq.to_host_float()},
                        {"dk", tc.dk.to_host_float(), clear.dk.to_host_float()},
                        {"dv", tc.dv.to_host_float(), clear.dv.to_host_float()}};
  bool ok = true;
  std::printf("spot check S=%lld causal heads=%lld/%lld dk=%lld: max|tc - clear| / max|clear| (limit 3*2^-8 = %.6f)\n",
              static_cast<long long>(kS), static_cast<long long>(kHq), static_cast<long long>(kHkv),
              static_cast<long long>(kHeadDim), kSpotTolerance);
  for (const Pair& p : pairs) {
    const double rel = relative_max_diff(p.tc, p.clear);
    const bool pass = rel <= kSpotTolerance;  // false for NaN
    ok = ok && pass;
    std::printf("  %-4s %.3e %s\n", p.name, rel, pass ? "ok" : "FAIL");
  }
  return ok;
}

}  // namespace

/// The benchmark proper (main catches the DeviceError a failed clear-kernel launch throws).
static int run(bool quick) {
  int device_count = 0;
  const cudaError_t probe = cudaGetDeviceCount(&device_count);
  if (probe != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "attention_bench: no usable CUDA device (%s)\n",
                 probe != cudaSuccess ? cudaGetErrorString(probe) : "cudaGetDeviceCount returned 0");
    return 2;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, compute capability %d.%d%s\n", prop.name, prop.multiProcessorCount, prop.major,
              prop.minor, quick ? " (--quick)" : "");

  if (!spot_check()) {
    std::fprintf(stderr, "attention_bench: spot check FAILED\n");
    return 1;
  }

  const Reps gemm_reps = quick ? Reps{2, 10} : Reps{3, 20};
  const Reps attn_reps = quick ? Reps{2, 5} : Reps{3, 10};
  const Reps clear_reps = quick ? Reps{1, 2} : Reps{1, 3};

  // cuBLAS bf16 GEMM: C = A·B, bf16 in and out, fp32 compute.
  double gemm_tflops = 0.0;
  {
    const int64_t elems = int64_t{kGemmEdge} * kGemmEdge;
    DeviceArray<__nv_bfloat16> a(elems), b(elems), c(elems);
    fill(nullptr, a.data(), elems, 101);
    fill(nullptr, b.data(), elems, 102);
    cublasHandle_t handle = nullptr;
    BENCH_CUBLAS(cublasCreate(&handle));
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const double ms = median_ms(
        [&] {
          BENCH_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, kGemmEdge, kGemmEdge, kGemmEdge, &alpha,
                                    a.data(), CUDA_R_16BF, kGemmEdge, b.data(), CUDA_R_16BF, kGemmEdge, &beta,
                                    c.data(), CUDA_R_16BF, kGemmEdge, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        },
        gemm_reps.warmup, gemm_reps.timed);
    BENCH_CUBLAS(cublasDestroy(handle));
    gemm_tflops = 2.0 * kGemmEdge * static_cast<double>(kGemmEdge) * kGemmEdge / (ms * 1e-3) / 1e12;
    std::printf("cuBLAS bf16 GEMM %d^3: %.3f ms, %.1f TFLOP/s\n", kGemmEdge, ms, gemm_tflops);
  }

  std::vector<Row> rows;
  struct Shape {
    int64_t s;
    BlockMask mask;
    int64_t hq, hkv;
  };
  std::vector<Shape> shapes;
  const std::vector<int64_t> lengths = quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 8192};
  for (const int64_t s : lengths) {
    shapes.push_back({s, BlockMask::causal, 16, 16});
    shapes.push_back({s, BlockMask::none, 16, 16});
  }
  shapes.push_back({lengths.back(), BlockMask::causal, 32, 8});  // GQA
  for (const Shape& sh : shapes) {
    Bf16Block blk(sh.s, sh.hq, sh.hkv);
    const AttnFwdArgsBf16 fwd = blk.fwd(sh.mask);
    const AttnBwdArgsBf16 bwd = blk.bwd(sh.mask);
    if (!hcpsim::gpu::tensor_core_supported(fwd) || !hcpsim::gpu::tensor_core_supported(bwd)) {
      std::fprintf(stderr, "attention_bench: the tensor-core kernels reject S=%lld heads=%lld/%lld\n",
                   static_cast<long long>(sh.s), static_cast<long long>(sh.hq), static_cast<long long>(sh.hkv));
      return 3;
    }
    const double fwd_ms = median_ms([&] { hcpsim::gpu::launch_attn_fwd_tensor_core_bf16(fwd, nullptr); },
                                    attn_reps.warmup, attn_reps.timed);
    const double bwd_ms = median_ms([&] { hcpsim::gpu::launch_attn_bwd_tensor_core_bf16(bwd, nullptr); },
                                    attn_reps.warmup, attn_reps.timed);
    rows.push_back({"attn_fwd_tensor_core", sh.s, sh.mask, sh.hq, sh.hkv, fwd_ms,
                    attention_flops(sh.s, sh.mask, sh.hq, false) / (fwd_ms * 1e-3) / 1e12});
    rows.push_back({"attn_bwd_tensor_core", sh.s, sh.mask, sh.hq, sh.hkv, bwd_ms,
                    attention_flops(sh.s, sh.mask, sh.hq, true) / (bwd_ms * 1e-3) / 1e12});
  }
  {
    // The clear row kernels (one thread per row, fp32 CUDA cores): S = 4096 causal only, they are slow.
    constexpr int64_t kClearS = 4096;
    FloatBlock blk(kClearS, 16, 16);
    const AttnFwdArgs fwd = blk.fwd(BlockMask::causal);
    const AttnBwdArgs bwd = blk.bwd(BlockMask::causal);
    const double fwd_ms =
        median_ms([&] { hcpsim::gpu::launch_attn_fwd_clear(fwd, nullptr); }, clear_reps.warmup, clear_reps.timed);
    const double bwd_ms =
        median_ms([&] { hcpsim::gpu::launch_attn_bwd_clear(bwd, nullptr); }, clear_reps.warmup, clear_reps.timed);
    rows.push_back({"attn_fwd_clear", kClearS, BlockMask::causal, 16, 16, fwd_ms,
                    attention_flops(kClearS, BlockMask::causal, 16, false) / (fwd_ms * 1e-3) / 1e12});
    rows.push_back({"attn_bwd_clear", kClearS, BlockMask::causal, 16, 16, bwd_ms,
                    attention_flops(kClearS, BlockMask::causal, 16, true) / (bwd_ms * 1e-3) / 1e12});
  }

  std::printf("\n%-22s %6s %-7s %6s %10s %9s %9s\n", "kernel", "S", "mask", "heads", "ms", "TFLOP/s", "of_cuBLAS");
  for (const Row& r : rows) {
    const std::string heads = std::to_string(r.hq) + "/" + std::to_string(r.hkv);
    std::printf("%-22s %6lld %-7s %6s %10.3f %9.1f %9.3f\n", r.kernel.c_str(), static_cast<long long>(r.s),
                mask_name(r.mask), heads.c_str(), r.ms, r.tflops, r.tflops / gemm_tflops);
  }
  double forward_fraction = NAN;
  double backward_fraction = NAN;
  for (const Row& r : rows) {
    if (r.s != lengths.back() || r.mask != BlockMask::causal || r.hq != 16 || r.hkv != 16) continue;
    if (r.kernel == "attn_fwd_tensor_core") forward_fraction = r.tflops / gemm_tflops;
    if (r.kernel == "attn_bwd_tensor_core") backward_fraction = r.tflops / gemm_tflops;
  }
  std::printf("\nforward_fraction=%.4f backward_fraction=%.4f S=%lld\n", forward_fraction, backward_fraction,
              static_cast<long long>(lengths.back()));
  return 0;
}

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
      return 2;
    }
  }
  try {
    return run(quick);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attention_bench: %s\n", e.what());
    return 3;
  }
}
