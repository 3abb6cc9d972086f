// The measured per-op CSV of a device run (host code: built into hcpsim_gpu_plan, so it is tested without a GPU).
#include <algorithm>

#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/io/measured_ops.hpp"

namespace hcpsim::gpu {

std::string measured_ops_csv(const DeviceRunResult& run, Dtype dtype) {
  std::vector<MeasuredOpRow> rows;
  for (const MeasuredOp& m : run.timeline) {
    if (m.kind == OpKind::alloc || m.kind == OpKind::free) continue;  // zero-time bookkeeping
    MeasuredOpRow r;
    r.op_kind = to_string(m.kind);
    r.dtype = to_string(dtype);
    r.head_dim = m.head_dim;
    r.q_rows = m.q_rows;
    r.kv_rows = m.kv_rows;
    r.causal = m.causal;
    r.bytes = m.bytes;
    r.flops = m.flops;
    r.measured_s = m.end_s - m.start_s;
    r.cp_rank = m.cp_rank;
    r.op_index = static_cast<int64_t>(m.op_index);
    r.stream = to_string(m.stream);
    r.kernel = m.kernel;
    r.label = m.label;
    rows.push_back(std::move(r));
  }
  return hcpsim::measured_ops_csv(rows);
}

TraceTimeline measured_timeline(const DeviceRunResult& run) {
  TraceTimeline t;
  int64_t ranks = 0;
  for (const MeasuredOp& m : run.timeline) ranks = std::max(ranks, m.cp_rank + 1);
  t.processes = {TraceProcess{0, "node 0", 0}, TraceProcess{1, "fabric", 1}};
  for (int64_t r = 0; r < ranks; ++r)
    for (int s = 0; s < kStreamCount; ++s)
      t.threads.push_back(
          TraceThread{0, stream_tid(r, static_cast<Stream>(s)), stream_thread_name(r, r, static_cast<Stream>(s))});
  for (const MeasuredOp& m : run.timeline) {
    // Picoseconds are the trace's integer time unit; a measured time is cut to whole ps.
    const auto start_ps = static_cast<int64_t>(m.start_s * 1e12);
    const auto end_ps = static_cast<int64_t>(m.end_s * 1e12);
    t.slices.push_back(TraceSlice{m.kernel.empty() ? m.label : m.label + " [" + m.kernel + "]",
                                  to_string(m.kind),
                                  0,
                                  stream_tid(m.cp_rank, m.stream),
                                  start_ps,
                                  end_ps,
                                  {{"cp_rank", m.cp_rank},
                                   {"op_index", static_cast<int64_t>(m.op_index)},
                                   {"kind", to_string(m.kind)},
                                   {"phase", to_string(m.phase)},
                                   {"ring_step", m.ring_step},
                                   {"start_ps", start_ps},
                                   {"end_ps", end_ps},
                                   {"flops", m.flops},
                                   {"bytes", m.bytes}}});
  }
  return t;
}

}  // namespace hcpsim::gpu
