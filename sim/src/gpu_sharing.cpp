#include "gpu_sharing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "hcpsim/sim/cost_model.hpp"

namespace hcpsim::sim::detail {

GpuSharing::GpuSharing(SimContext& ctx) : ctx_(ctx), gpus_(ctx.schedule.ranks.size()) {}

TimePs GpuSharing::kernel_ps(int64_t rank, OpIndex i) {
  const Op& op = ctx_.op_of(rank, i);
  const RankProgram& prog = ctx_.program(rank);
  int64_t q_rows = -1, kv_rows = -1, head_dim = -1, mask = -1;
  if (const auto* f = std::get_if<AttnFwdBlockOp>(&op.payload)) {
    q_rows = f->q_rows.count;
    kv_rows = f->kv_rows.count;
    head_dim = prog.buffers[index_of(f->q)].width;
    mask = static_cast<int64_t>(f->mask);
  } else if (const auto* g = std::get_if<AttnBwdBlockOp>(&op.payload)) {
    q_rows = g->q_rows.count;
    kv_rows = g->kv_rows.count;
    head_dim = prog.buffers[index_of(g->q)].width;
    mask = static_cast<int64_t>(g->mask);
  } else {
    return compute_op_ps(op, prog, ctx_.schedule.shape.dtype, ctx_.cluster.gpu);
  }
  const int64_t hbm = attention_block_hbm_bytes(op, prog);
  const KernelKey key{static_cast<int64_t>(op.kind()), q_rows, kv_rows, head_dim, mask, hbm, op.flops};
  const auto it = kernel_cache_.find(key);
  if (it != kernel_cache_.end()) return it->second;
  const TimePs ps = compute_op_ps(op, prog, ctx_.schedule.shape.dtype, ctx_.cluster.gpu);
  kernel_cache_.emplace(key, ps);
  return ps;
}

bool GpuSharing::slows_compute() const {
  return ctx_.options.share_gpu_between_kernels && ctx_.cluster.gpu.compute_slowdown_during_comm != 1.0;
}

void GpuSharing::comm_running_change(int64_t rank, int delta) {
  if (slows_compute()) advance_gpu(rank);
  gpus_[index_of(rank)].comm_running += delta;
  if (slows_compute()) reschedule_gpu(rank);
}

void GpuSharing::start_kernel(int64_t rank, OpIndex i) {
  const TimePs work_ps = kernel_ps(rank, i);
  if (!ctx_.options.share_gpu_between_kernels) {
    ctx_.finish_after(work_ps, rank, i);
    return;
  }
  constexpr int64_t kMaxShareableWorkPs = std::numeric_limits<int64_t>::max() / (kShareScale * kStreamCount);
  if (work_ps > kMaxShareableWorkPs)
    throw InputError(SourceLoc{}, "simulation",
                     fmt::format("cp rank {} op {} ('{}') is a kernel of {:.3g} s, beyond the {:.3g} s that kernels "
                                 "sharing a GPU can last",
                                 rank, i, ctx_.op_of(rank, i).label.str(), static_cast<double>(work_ps) * 1e-12,
                                 static_cast<double>(kMaxShareableWorkPs) * 1e-12),
                     "check the model size (heads, kv_channels, seq_length per CP rank) and the GPU's peak rates");
  advance_gpu(rank);
  gpus_[index_of(rank)].running.push_back(RunningKernel{i, work_ps * kShareScale, -1});
  reschedule_gpu(rank);
}

void GpuSharing::advance_gpu(int64_t rank) {
  GpuState& g = gpus_[index_of(rank)];
  const TimePs elapsed = ctx_.queue.now() - g.updated_ps;
  if (!g.running.empty() && elapsed > 0) {
    HCPSIM_ASSERT(static_cast<int64_t>(g.running.size()) <= kStreamCount, "more running kernels than streams");
    const int64_t progress = elapsed * g.rate_units_per_ps;
    for (RunningKernel& k : g.running) k.remaining_units = std::max<int64_t>(0, k.remaining_units - progress);
    // What communication took: each kernel would have progressed kShareScale / n units per ps (sharing the GPU
    // with the other kernels costs nothing in total) and got rate_units_per_ps.
    const int64_t full = kShareScale / static_cast<int64_t>(g.running.size());
    if (g.rate_units_per_ps < full) {
      auto& lost = ctx_.progress[index_of(rank)].comm_slowdown_units;
      for (const RunningKernel& k : g.running)
        lost[phase_index(ctx_.op_of(rank, k.op).phase)] += elapsed * (full - g.rate_units_per_ps);
    }
  }
  g.updated_ps = ctx_.queue.now();
}

void GpuSharing::reschedule_gpu(int64_t rank) {
  GpuState& g = gpus_[index_of(rank)];
  const auto n = static_cast<int64_t>(g.running.size());
  if (n == 0) return;
  g.rate_units_per_ps = kShareScale / n;
  if (g.comm_running > 0 && slows_compute()) {
    // Rounded once to an integer rate (per-mille exact with kShareScale = 6000).
    g.rate_units_per_ps = std::max<int64_t>(
        1, std::llround(static_cast<double>(kShareScale) /
                        (static_cast<double>(n) * ctx_.cluster.gpu.compute_slowdown_during_comm)));
  }
  for (RunningKernel& k : g.running) {
    if (k.completion >= 0) ctx_.queue.cancel(k.completion);
    const int64_t rate = g.rate_units_per_ps;
    const TimePs delay = (k.remaining_units + rate - 1) / rate;
    const int64_t key = pack(rank, k.op);
    k.completion = ctx_.queue.schedule_after(delay, kPriorityCompletion,
                                             [this, key] { kernel_done(key >> 32, unpack_op(key)); });
  }
}

void GpuSharing::kernel_done(int64_t rank, OpIndex i) {
  advance_gpu(rank);
  GpuState& g = gpus_[index_of(rank)];
  const auto it = std::find_if(g.running.begin(), g.running.end(), [i](const RunningKernel& k) { return k.op == i; });
  HCPSIM_ASSERT(it != g.running.end(), fmt::format("cp rank {} op {}: completion of a kernel not running", rank, i));
  HCPSIM_ASSERT(it->remaining_units == 0, fmt::format("cp rank {} op {}: kernel completed early", rank, i));
  g.running.erase(it);
  reschedule_gpu(rank);
  ctx_.finisher.finish_op(rank, i);
}

}  // namespace hcpsim::sim::detail
