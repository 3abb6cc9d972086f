// CPU oracle benchmark: Eigen's own GEMM rate on this machine vs the oracle's achieved FLOP rate on the fp64
// reference, the same-precision non-CP blockwise computation and the HCP schedule executor, for the default
// scenario's attention shapes (Llama-3.2-1B: S = 8192, dk = dv = 64, GQA 4, causal, [A, P] = [2, 2]).
// Wall-clock timing lives here only (STYLE.md); results go to bench/RESULTS.md by hand.
//
// usage: hcpsim_oracle_bench [seq_length=8192] [heads_q=8] [threads=1]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

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

/// Best-of-3 GEMM rate (GFLOP/s) of an n×n×n product in scalar type T, one thread (EIGEN_DONT_PARALLELIZE).
template <typename T>
double gemm_gflops(int n) {
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const M a = M::Random(n, n), b = M::Random(n, n);
  M c(n, n);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    c.noalias() = a * b;
    best = std::min(best, seconds_since(t0));
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
  const double g32 = gemm_gflops<float>(2048), g64 = gemm_gflops<double>(2048);
  std::printf("Eigen GEMM 2048^3, 1 thread: fp32 %.1f GFLOP/s, fp64 %.1f GFLOP/s\n", g32, g64);
  std::printf("| precision | computation | seconds | GFLOP/s | %% of GEMM | HCP / non-CP |\n|---|---|---|---|---|---|\n");
  for (Dtype dt : {Dtype::fp64, Dtype::fp32}) {
    AttentionInputs in = make_attention_inputs(1234, shape, "clamped_normal");
    for (HostTensor* t : {&in.q, &in.k, &in.v, &in.dout}) round_tensor(*t, dt);
    const double gemm = dt == Dtype::fp64 ? g64 : g32;
    auto t0 = std::chrono::steady_clock::now();
    const AttentionOutputs base = reference_attention(in, true, 0.125, threads, dt);
    const double t_base = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const ExecutionResult run = execute_schedule(sched, in, ExecutionOptions{threads, dt});
    const double t_hcp = seconds_since(t0);
    const double r_base = flops / t_base * 1e-9, r_hcp = flops / t_hcp * 1e-9;
    const char* name = dt == Dtype::fp64 ? "fp64" : "fp32";
    std::printf("| %s | %s | %.2f | %.1f | %.0f%% | |\n", name,
                dt == Dtype::fp64 ? "reference (non-CP blockwise)" : "non-CP blockwise baseline", t_base, r_base,
                100 * r_base / gemm);
    std::printf("| %s | HCP executor | %.2f | %.1f | %.0f%% | %.2fx |\n", name, t_hcp, r_hcp, 100 * r_hcp / gemm,
                t_hcp / t_base);
    (void)base;
    (void)run;
  }
  return 0;
}
