#pragma once
// Private to sim/: compute kernels on the GPUs — their cost-model durations (memoised), and the sharing of a GPU's
// SMs between the kernels that run on it at the same time (SimOptions::share_gpu_between_kernels), slowed down
// while a communication op of the GPU runs (GpuSpec::compute_slowdown_during_comm).

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "sim_context.hpp"

namespace hcpsim::sim::detail {

// Processor sharing of a GPU's SMs in integer arithmetic: remaining kernel work is kept in units of
// 1/kShareScale ps of full-speed GPU time, so that with n ≤ kStreamCount running kernels each one's progress
// over Δ ps, Δ·kShareScale/n units, is an integer. kShareScale = 1000·lcm(1, 2, 3); the factor 1000 gives a
// compute slowdown during communication (a real factor) a per-mille-exact integer rate.
constexpr int64_t kShareScale = 6000;
static_assert(kStreamCount == 3, "kShareScale must be divisible by every possible number of running kernels");

/// The compute kernels of every rank's GPU. Finished kernels are reported to SimContext::finisher.
class GpuSharing {
 public:
  explicit GpuSharing(SimContext& ctx);

  /// Starts compute op i of `rank` now: it needs its cost-model duration of GPU time, at full speed, or shared
  /// with the other kernels running on the GPU.
  void start_kernel(int64_t rank, OpIndex i);
  /// A communication op of `rank` started (+1) or finished (−1): compute speed may change.
  void comm_running_change(int64_t rank, int delta);

 private:
  /// A kernel running on a shared GPU.
  struct RunningKernel {
    OpIndex op = -1;
    int64_t remaining_units = 0;  ///< full-speed GPU time still needed, in 1/kShareScale ps
    EventId completion = -1;      ///< pending completion event (rescheduled whenever the sharing changes)
  };
  /// The sharing state of one rank's GPU.
  struct GpuState {
    std::vector<RunningKernel> running;       ///< kernels sharing the GPU now, in start order
    int64_t rate_units_per_ps = kShareScale;  ///< progress of each running kernel since updated_ps
    int64_t comm_running = 0;                 ///< communication ops started and not finished
    TimePs updated_ps = 0;                    ///< time up to which `running` progress has been applied
  };

  /// compute_op_ps, memoised by (kind, block shape, mask, bytes, flops): ranks repeat the same kernels, and
  /// the efficiency-table lookup is the expensive part. The key holds every input of compute_op_ps.
  TimePs kernel_ps(int64_t rank, OpIndex i);
  [[nodiscard]] bool slows_compute() const;
  /// Applies the progress of the running kernels since the last change.
  void advance_gpu(int64_t rank);
  /// (Re)schedules the completion of every running kernel for the current number of running kernels:
  /// remaining / (kShareScale / n) ps, rounded up (a kernel never finishes early; the error is < 1 ps per change).
  void reschedule_gpu(int64_t rank);
  void kernel_done(int64_t rank, OpIndex i);

  SimContext& ctx_;
  std::vector<GpuState> gpus_;  ///< indexed by cp rank
  using KernelKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double>;
  std::map<KernelKey, TimePs> kernel_cache_;  ///< kernel_ps memo (std::map: ordered, deterministic)
};

}  // namespace hcpsim::sim::detail
