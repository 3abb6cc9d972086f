// The measured timeline of a device run (device_run.hpp): per op of this process's ranks the elapsed time of its
// start and end events since its device's t0 event, with the op's identity, the kernel that ran an attention
// block and the block's dimensions.

#include <algorithm>
#include <variant>
#include <vector>

#include <cuda_runtime.h>

#include "device_run.hpp"
#include "hcpsim/core/semantics.hpp"
#include "hcpsim/gpu/cuda_check.hpp"

namespace hcpsim::gpu::detail {

std::vector<MeasuredOp> DeviceRun::measure() {
  std::vector<MeasuredOp> timeline;
  for (size_t r = 0; r < s_.ranks.size(); ++r) {
    const RankProgram& prog = s_.ranks[r];
    if (!mine(static_cast<int64_t>(r))) continue;
    use_device(static_cast<int64_t>(r));
    cudaEvent_t t0 = t0_.at(device_of_[r]);
    for (size_t i = 0; i < prog.ops.size(); ++i) {
      const Op& op = prog.ops[i];
      MeasuredOp m;
      m.cp_rank = prog.cp_rank;
      m.op_index = static_cast<OpIndex>(i);
      m.kind = op.kind();
      m.phase = op.phase;
      m.stream = op.stream;
      m.ring_step = op.ring_step;
      m.label = op.label;
      m.device = device_of_[r];
      m.flops = op.flops;
      m.bytes = op.bytes;
      float start_ms = 0, end_ms = 0;
      HCPSIM_CUDA_CHECK(cudaEventElapsedTime(&start_ms, t0, start_[r][i]));
      HCPSIM_CUDA_CHECK(cudaEventElapsedTime(&end_ms, t0, end_[r][i]));
      m.start_s = static_cast<double>(start_ms) * 1e-3;
      m.end_s = std::max(m.start_s, static_cast<double>(end_ms) * 1e-3);
      const auto it = kernel_.find(OpRef{static_cast<int64_t>(r), static_cast<OpIndex>(i)});
      if (it != kernel_.end()) m.kernel = it->second;
      if (const auto* f = std::get_if<AttnFwdBlockOp>(&op.payload)) {
        m.head_dim = prog.buffers[static_cast<size_t>(f->q)].width;
        m.q_rows = f->q_rows.count;
        m.kv_rows = f->kv_rows.count;
        m.causal = semantics::is_masked(f->mask);
      } else if (const auto* b = std::get_if<AttnBwdBlockOp>(&op.payload)) {
        m.head_dim = prog.buffers[static_cast<size_t>(b->q)].width;
        m.q_rows = b->q_rows.count;
        m.kv_rows = b->kv_rows.count;
        m.causal = semantics::is_masked(b->mask);
      }
      timeline.push_back(std::move(m));
    }
  }
  return timeline;
}

}  // namespace hcpsim::gpu::detail
