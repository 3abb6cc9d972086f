// The measured per-op CSV of a device run (host code: built into hcpsim_gpu_plan, so it is tested without a GPU).
#include <fmt/format.h>

#include "hcpsim/gpu/device_executor.hpp"

namespace hcpsim::gpu {

namespace {

/// RFC 4180 field quoting: the text in double quotes, inner quotes doubled.
std::string csv_quote(const std::string& text) {
  std::string q = "\"";
  for (char c : text) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

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
                       csv_quote(m.label));
  }
  return csv;
}

}  // namespace hcpsim::gpu
