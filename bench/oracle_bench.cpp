// CPU oracle benchmark: Eigen's own GEMM rate on this machine vs the oracle's achieved FLOP rate on the fp64
// reference, the same-precision non-CP blockwise computation and the HCP schedule executor, for the default
// scenario's attention shapes (Llama-3.2-1B: S = 8192, dk = dv = 64, GQA 4, causal, [A, P] = [2, 2]).
// Wall-clock timing lives here only (docs/architecture.md "Conventions"); results go to bench/RESULTS.md by hand.
//
// usage: hcpsim_oracle_bench [seq_length=8192] [heads_q=8] [threads=1] [heap=warm|cold]
//
// Timing: with 1 thread the rates use process CPU time (user + system), so time slices taken by other work on a
// shared host do not count; with more threads, wall-clock time. heap=warm (default) first touches and frees a
// 2 GiB heap region (huge pages where available) with glibc's mmap and trimming turned off, so later buffer
// allocations reuse resident pages: on the VM build host a fresh 4 KiB page costs ~15 µs on first touch (≈3 GB/s), which otherwise adds the executor's
// per-rank buffers' page faults to its compute time. heap=cold measures with fresh pages.
#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/oracles/cpu_executor.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/precision.hpp"
#include "hcpsim/oracles/reference.hpp"

using namespace hcpsim;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// A wall-clock and a process-CPU-time stopwatch.
struct Stopwatch {
  std::chrono::steady_clock::time_point wall0 = std::chrono::steady_clock::now();
  std::clock_t cpu0 = std::clock();
  [[nodiscard]] double wall_s() const { return seconds_since(wall0); }
  [[nodiscard]] double cpu_s() const { return static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC; }
};

/// Keeps freed memory in the heap and pre-faults `bytes` of it (see the header comment).
void warm_heap(size_t bytes) {
  mallopt(M_TRIM_THRESHOLD, -1);       // never return freed heap memory to the kernel
  mallopt(M_MMAP_MAX, 0);              // every allocation from the (reused) heap
  auto* p = static_cast<char*>(std::malloc(bytes));
  if (p == nullptr) return;
  // Transparent huge pages where the kernel offers them (madvise mode): one fault per 2 MiB instead of per 4 KiB.
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  volatile char* touch = p;  // volatile: a memset right before free() may be optimised away
  for (size_t i = 0; i < bytes; i += 4096) touch[i] = 1;
  std::free(p);
}

/// Best-of-3 GEMM rate (GFLOP/s, process CPU time) of an n×n×n product in scalar type T, one thread
/// (EIGEN_DONT_PARALLELIZE).
template <typename T>
double gemm_gflops(int n) {
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const M a = M::Random(n, n), b = M::Random(n, n);
  M c(n, n);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const Stopwatch t;
    c.noalias() = a * b;
    best = std::min(best, t.cpu_s());
  }
  volatile T sink = c(0, 0);
  (void)sink;
  return 2.0 * n * static_cast<double>(n) * n / best * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t S = argc > 1 ? std::atoll(argv[1]) : 8192;
  const int64_t H = argc > 2 ? std::atoll(argv[2]) : 8;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 1;
  const bool warm = argc <= 4 || std::string(argv[4]) != "cold";
  const Stopwatch sw_warm;
  if (warm) warm_heap(size_t{2} << 30);
  const double warm_s = sw_warm.wall_s();
  AttentionShape shape;
  shape.batch = 1;
  shape.seq_length = S;
  shape.heads_q = H;
  shape.heads_kv = H / 4;  // Llama-3.2-1B: 32 q heads, 8 KV groups
  shape.head_dim_qk = 64;
  shape.head_dim_v = 64;
  shape.causal = true;
  shape.softmax_scale = 0.125;
  const Schedule sched = build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, S), shape);
  const double flops = sched.total_flops(Phase::forward) + sched.total_flops(Phase::backward);
  std::printf("shape: b=1 S=%lld H=%lld Hkv=%lld dk=dv=64 causal, [A,P]=[2,2], threads %d; useful FLOPs %.4g "
              "(fwd+bwd, causal pairs only)\n",
              static_cast<long long>(S), static_cast<long long>(H), static_cast<long long>(shape.heads_kv), threads,
              flops);
  double g32 = gemm_gflops<float>(2048), g64 = gemm_gflops<double>(2048);
  struct Row {
    const char* name;
    const char* what;
    double wall_s, cpu_s;
  };
  std::vector<Row> rows;
  // Each computation runs kRepeats times and keeps its fastest run (time slices and SMT siblings taken by other
  // work on a shared host only ever slow a run down); the GEMM rate is measured again at the end and the higher
  // value kept, so the "% of GEMM" column errs low.
  constexpr int kRepeats = 2;
  for (Dtype dt : {Dtype::fp64, Dtype::fp32}) {
    AttentionInputs in = make_attention_inputs(1234, shape, "clamped_normal");
    for (HostTensor* t : {&in.q, &in.k, &in.v, &in.dout}) round_tensor(*t, dt);
    const char* name = dt == Dtype::fp64 ? "fp64" : "fp32";
    Row base{name, dt == Dtype::fp64 ? "reference (non-CP blockwise)" : "non-CP blockwise baseline", 1e30, 1e30};
    Row hcp{name, "HCP executor", 1e30, 1e30};
    for (int rep = 0; rep < kRepeats; ++rep) {
      const Stopwatch sw_base;
      const AttentionOutputs ref = reference_attention(in, true, 0.125, threads, dt);
      base.wall_s = std::min(base.wall_s, sw_base.wall_s());
      base.cpu_s = std::min(base.cpu_s, sw_base.cpu_s());
      const Stopwatch sw_hcp;
      const ExecutionResult run = execute_schedule(sched, in, ExecutionOptions{threads, dt});
      hcp.wall_s = std::min(hcp.wall_s, sw_hcp.wall_s());
      hcp.cpu_s = std::min(hcp.cpu_s, sw_hcp.cpu_s());
      (void)ref;
      (void)run;
    }
    rows.push_back(base);
    rows.push_back(hcp);
  }
  g32 = std::max(g32, gemm_gflops<float>(2048));
  g64 = std::max(g64, gemm_gflops<double>(2048));
  std::printf("Eigen GEMM 2048^3, 1 thread: fp32 %.1f GFLOP/s, fp64 %.1f GFLOP/s; heap %s (%.1f s); best of %d runs; "
              "rates from %s time\n", g32, g64, warm ? "warm" : "cold", warm_s, kRepeats,
              threads == 1 ? "process CPU" : "wall-clock");
  std::printf("| precision | computation | wall s | CPU s | GFLOP/s | %% of GEMM | HCP / non-CP |\n"
              "|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < rows.size(); i += 2) {
    const double gemm = i == 0 ? g64 : g32;
    const Row& base = rows[i];
    const Row& hcp = rows[i + 1];
    const double t_base = threads == 1 ? base.cpu_s : base.wall_s, t_hcp = threads == 1 ? hcp.cpu_s : hcp.wall_s;
    const double r_base = flops / t_base * 1e-9, r_hcp = flops / t_hcp * 1e-9;
    std::printf("| %s | %s | %.2f | %.2f | %.1f | %.0f%% | |\n", base.name, base.what, base.wall_s, base.cpu_s, r_base,
                100 * r_base / gemm);
    std::printf("| %s | %s | %.2f | %.2f | %.1f | %.0f%% | %.2fx |\n", hcp.name, hcp.what, hcp.wall_s, hcp.cpu_s,
                r_hcp, 100 * r_hcp / gemm, t_hcp / t_base);
  }
  return 0;
}
