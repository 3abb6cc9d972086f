// The measured per-op CSV of a device run (host code: built into hcpsim_gpu_plan, so it is tested without a GPU).
#include <fmt/format.h>

#include <algorithm>

#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/io/csv.hpp"

namespace hcpsim::gpu {

std::string measured_ops_csv(const DeviceRunResult& run, Dtype dtype) {
  std::string csv = "op_kind,dtype,head_dim,q_rows,kv_rows,causal,m,n,k,bytes,flops,measured_s,cp_rank,op_index,stream,"
                    "kernel,label\n";
  for (const MeasuredOp& m : run.timeline) {
    if (m.kind == OpKind::alloc || m.kind == OpKind::free) continue;
    const bool attention = m.kind == OpKind::attn_fwd_block || m.kind == OpKind::attn_bwd_block;
    csv += fmt::format("{},{},{},{},{},{},,,,{},{:.17g},{:.17g},{},{},{},{},{}\n", to_string(m.kind), to_string(dtype),
                       attention ? std::to_string(m.head_dim) : "", attention ? std::to_string(m.q_rows) : "",
                       attention ? std::to_string(m.kv_rows) : "", attention ? (m.causal ? "1" : "0") : "", m.bytes,
                       m.flops, m.end_s - m.start_s, m.cp_rank, m.op_index, to_string(m.stream), m.kernel,
                       csv_quoted(m.label));
  }
  return csv;
}

TraceTimeline measured_timeline(const DeviceRunResult& run) {
  TraceTimeline t;
  int64_t ranks = 0;
  for (const MeasuredOp& m : run.timeline) ranks = std::max(ranks, m.cp_rank + 1);
  t.processes = {TraceProcess{0, "node 0", 0}, TraceProcess{1, "fabric", 1}};
  for (int64_t r = 0; r < ranks; ++r)
    for (int s = 0; s < kStreamCount; ++s)
      t.threads.push_back(TraceThread{0, stream_tid(r, static_cast<Stream>(s)),
                                      "gpu " + std::to_string(r) + " cp rank " + std::to_string(r) + " " +
                                          to_string(static_cast<Stream>(s))});
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
