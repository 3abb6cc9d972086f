#include "hcpsim/sim/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "hcpsim/core/document_mask.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/op_visit.hpp"
#include "hcpsim/core/semantics.hpp"

namespace hcpsim::sim {

namespace {

const BufferDecl& buffer_decl(const RankProgram& program, BufferId id) {
  HCPSIM_ASSERT(id >= 0, "buffer id " + std::to_string(id) + " on cp rank " + std::to_string(program.cp_rank));
  HCPSIM_ASSERT(static_cast<size_t>(id) < program.buffers.size(),
                "buffer id " + std::to_string(id) + " out of range on cp rank " + std::to_string(program.cp_rank));
  return program.buffers[static_cast<size_t>(id)];
}

/// Bytes of `rows` rows of buffer `id` (all batches, heads and width).
int64_t row_range_bytes(const RankProgram& program, BufferId id, const RowRange& rows) {
  const BufferDecl& b = buffer_decl(program, id);
  return b.batch * rows.count * b.heads * b.width * dtype_size_bytes(b.dtype);
}

int64_t whole_buffer_bytes(const RankProgram& program, BufferId id) { return buffer_decl(program, id).size_bytes(); }

void require_positive(double value, const char* what) {
  HCPSIM_ASSERT(std::isfinite(value), std::string(what) + " must be finite");
  HCPSIM_ASSERT(value > 0, std::string(what) + " must be > 0, got " + std::to_string(value));
}

}  // namespace

std::string to_string(LinkLevel level) { return level == LinkLevel::intra_node ? "intra_node" : "inter_node"; }

LinkLevel link_level(int64_t node_a, int64_t node_b) {
  return node_a == node_b ? LinkLevel::intra_node : LinkLevel::inter_node;
}

const LinkSpec& link_spec(const ClusterSpec& cluster, LinkLevel level) {
  return level == LinkLevel::intra_node ? cluster.nvlink : cluster.network;
}

double peak_fraction(Dtype dtype) {
  switch (dtype) {
    case Dtype::bf16:
    case Dtype::fp16: return 1.0;
    case Dtype::fp32: return kFp32PeakFraction;
    case Dtype::fp64: return kFp64PeakFraction;
  }
  HCPSIM_ASSERT(false, "unknown dtype");
  return 0;
}

int64_t attention_block_hbm_bytes(const Op& op, const RankProgram& program) {
  if (const auto* f = std::get_if<AttnFwdBlockOp>(&op.payload)) {
    return row_range_bytes(program, f->q, f->q_rows) + row_range_bytes(program, f->k, f->kv_rows) +
           row_range_bytes(program, f->v, f->kv_rows) + whole_buffer_bytes(program, f->out) +
           whole_buffer_bytes(program, f->lse);
  }
  if (const auto* g = std::get_if<AttnBwdBlockOp>(&op.payload)) {
    return row_range_bytes(program, g->q, g->q_rows) + row_range_bytes(program, g->out, g->q_rows) +
           row_range_bytes(program, g->dout, g->q_rows) + row_range_bytes(program, g->lse, g->q_rows) +
           row_range_bytes(program, g->k, g->kv_rows) + row_range_bytes(program, g->v, g->kv_rows) +
           whole_buffer_bytes(program, g->dq) + whole_buffer_bytes(program, g->dk) + whole_buffer_bytes(program, g->dv);
  }
  HCPSIM_ASSERT(false, "attention_block_hbm_bytes of a " + to_string(op.kind()) + " op '" + op.label + "'");
  return 0;
}

TimePs attention_block_ps(OpKind kind, double flops, int64_t hbm_bytes, Dtype dtype, const GpuSpec& gpu) {
  return attention_block_ps(kind, flops, hbm_bytes, dtype, gpu,
                            kind == OpKind::attn_fwd_block ? gpu.attn_fwd_efficiency : gpu.attn_bwd_efficiency);
}

namespace {

/// Bilinear interpolation in (log2 rows, log2 cols) over the grid of `pts` (all of one mask class and head dim).
double grid_efficiency(const std::vector<const EfficiencyPoint*>& pts, int64_t q_rows, int64_t kv_rows) {
  std::vector<int64_t> rows;
  std::vector<int64_t> cols;
  for (const auto* p : pts) {
    rows.push_back(p->q_rows);
    cols.push_back(p->kv_rows);
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  std::sort(cols.begin(), cols.end());
  cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
  // Bracket x in the sorted grid axis: indices (lo, hi) and weight of hi, clamped at the edges.
  auto bracket = [](const std::vector<int64_t>& axis, int64_t x) {
    if (x <= axis.front()) return std::tuple<size_t, size_t, double>{0, 0, 0.0};
    if (x >= axis.back()) return std::tuple<size_t, size_t, double>{axis.size() - 1, axis.size() - 1, 0.0};
    const auto hi = static_cast<size_t>(std::upper_bound(axis.begin(), axis.end(), x) - axis.begin());
    const size_t lo = hi - 1;
    const double w = (std::log2(static_cast<double>(x)) - std::log2(static_cast<double>(axis[lo]))) /
                     (std::log2(static_cast<double>(axis[hi])) - std::log2(static_cast<double>(axis[lo])));
    return std::tuple<size_t, size_t, double>{lo, hi, w};
  };
  auto at = [&pts](int64_t r, int64_t c) {
    for (const auto* p : pts)
      if (p->q_rows == r && p->kv_rows == c) return p->efficiency;
    HCPSIM_ASSERT(false, "efficiency table is not a full grid: no point at q_rows " + std::to_string(r) +
                             ", kv_rows " + std::to_string(c));
    return 0.0;
  };
  const auto [r0, r1, wr] = bracket(rows, q_rows);
  const auto [c0, c1, wc] = bracket(cols, kv_rows);
  const double top = at(rows[r0], cols[c0]) * (1 - wc) + at(rows[r0], cols[c1]) * wc;
  const double bottom = at(rows[r1], cols[c0]) * (1 - wc) + at(rows[r1], cols[c1]) * wc;
  return top * (1 - wr) + bottom * wr;
}

}  // namespace

double table_efficiency(const std::vector<EfficiencyPoint>& table, int64_t head_dim, int64_t q_rows, int64_t kv_rows,
                        bool causal) {
  HCPSIM_ASSERT(!table.empty(), "empty efficiency table");
  HCPSIM_ASSERT(q_rows >= 1, "q_rows < 1");
  HCPSIM_ASSERT(kv_rows >= 1, "kv_rows < 1");
  bool have_class = false;
  for (const auto& p : table) have_class = have_class || p.causal == causal;
  std::vector<int64_t> dims;
  for (const auto& p : table)
    if (!have_class || p.causal == causal) dims.push_back(p.head_dim);
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  auto at_dim = [&](int64_t d) {
    std::vector<const EfficiencyPoint*> pts;
    for (const auto& p : table)
      if ((!have_class || p.causal == causal) && p.head_dim == d) pts.push_back(&p);
    return grid_efficiency(pts, q_rows, kv_rows);
  };
  if (head_dim <= dims.front()) return at_dim(dims.front());
  if (head_dim >= dims.back()) return at_dim(dims.back());
  const auto hi = static_cast<size_t>(std::upper_bound(dims.begin(), dims.end(), head_dim) - dims.begin());
  const int64_t d0 = dims[hi - 1];
  const int64_t d1 = dims[hi];
  const double w = static_cast<double>(head_dim - d0) / static_cast<double>(d1 - d0);
  return at_dim(d0) * (1 - w) + at_dim(d1) * w;
}

double attention_wave_factor(int64_t tiles, int64_t sm_count) {
  HCPSIM_ASSERT(tiles >= 1, "tiles < 1");
  HCPSIM_ASSERT(sm_count >= 1, "sm_count < 1");
  const int64_t waves = (tiles + sm_count - 1) / sm_count;
  return static_cast<double>(tiles) / static_cast<double>(waves * sm_count);
}

double attention_wave_correction(int64_t tiles, int64_t sm_count) {
  if (sm_count == 0) return 1.0;
  return attention_wave_factor(tiles, sm_count) / attention_wave_factor(kAttentionReferenceTiles, sm_count);
}

namespace {

/// Table efficiency of a block with `rows` rows in the parallelised dimension, wave-corrected and capped at 1.
double tabulated_block_efficiency(const std::vector<EfficiencyPoint>& table, const BufferDecl& q, int64_t q_rows,
                                  int64_t kv_rows, int64_t rows, bool causal, int64_t sm_count) {
  const double e = table_efficiency(table, q.width, q_rows, kv_rows, causal);
  const int64_t tiles = (rows + kAttentionTileRows - 1) / kAttentionTileRows * q.batch * q.heads;
  return std::min(1.0, e * attention_wave_correction(std::max<int64_t>(1, tiles), sm_count));
}

/// The SM count attention blocks are wave-quantised over: 0 (none) for calibrated attention efficiencies.
int64_t attention_sm_count(const GpuSpec& gpu) { return gpu.attn_wave_quantization ? gpu.sm_count : 0; }

}  // namespace

double attention_tile_factor(int64_t q_rows, int64_t kv_rows, bool causal) {
  if (q_rows <= 0 || kv_rows <= 0) return 1.0;
  auto up = [](int64_t n) { return (n + kAttentionTileRows - 1) / kAttentionTileRows * kAttentionTileRows; };
  const auto mask = causal ? BlockMask::causal_bottom_right : BlockMask::none;
  const auto pairs = static_cast<double>(semantics::block_pairs(q_rows, kv_rows, mask));
  const auto padded = static_cast<double>(semantics::block_pairs(up(q_rows), up(kv_rows), mask));
  return padded > 0 ? pairs / padded : 1.0;
}

namespace {

/// attention_block_efficiency of a THD block (a non-empty document mask): one varlen launch over its
/// per-sequence sub-blocks (document_sub_blocks), each at its own table (or scalar) efficiency times
/// attention_tile_factor, combined by FLOPs (time adds up: Σ pairs / Σ pairs_s / e_s), then wave-corrected over
/// the launch's tiles (Σ_s ceil(rows_s / 128) × batch × heads) when tabulated.
double document_block_efficiency(const DocumentMask& doc, bool causal, bool forward, const BufferDecl& q,
                                 const GpuSpec& gpu) {
  const auto& table = forward ? gpu.attn_fwd_table : gpu.attn_bwd_table;
  const double scalar = forward ? gpu.attn_fwd_efficiency : gpu.attn_bwd_efficiency;
  double pairs = 0;
  double weighted_time = 0;  // Σ pairs_s / e_s
  int64_t tiles = 0;
  for (const DocumentSubBlock& b : document_sub_blocks(doc, causal)) {
    const double e = (table.empty() ? scalar : table_efficiency(table, q.width, b.q_rows, b.kv_rows, causal)) *
                     attention_tile_factor(b.q_rows, b.kv_rows, causal);
    pairs += static_cast<double>(b.pairs);
    weighted_time += static_cast<double>(b.pairs) / e;
    const int64_t rows = forward ? b.q_rows : b.kv_rows;
    tiles += (rows + kAttentionTileRows - 1) / kAttentionTileRows * q.batch * q.heads;
  }
  if (weighted_time <= 0) return table.empty() ? scalar : 1.0;  // an empty block: no FLOPs, any efficiency
  const double e = pairs / weighted_time;
  if (table.empty()) return e;
  return std::min(1.0, e * attention_wave_correction(std::max<int64_t>(1, tiles), attention_sm_count(gpu)));
}

}  // namespace

double attention_block_efficiency(const Op& op, const RankProgram& program, const GpuSpec& gpu) {
  if (const auto* f = std::get_if<AttnFwdBlockOp>(&op.payload)) {
    if (!f->doc.empty())
      return document_block_efficiency(f->doc, semantics::is_masked(f->mask), true, buffer_decl(program, f->q), gpu);
    if (gpu.attn_fwd_table.empty()) return gpu.attn_fwd_efficiency;
    const int64_t q = std::max<int64_t>(1, f->q_rows.count);
    const int64_t kv = std::max<int64_t>(1, f->kv_rows.count);
    return tabulated_block_efficiency(gpu.attn_fwd_table, buffer_decl(program, f->q), q, kv, q,
                                      semantics::is_masked(f->mask), attention_sm_count(gpu));
  }
  if (const auto* g = std::get_if<AttnBwdBlockOp>(&op.payload)) {
    if (!g->doc.empty())
      return document_block_efficiency(g->doc, semantics::is_masked(g->mask), false, buffer_decl(program, g->q), gpu);
    if (gpu.attn_bwd_table.empty()) return gpu.attn_bwd_efficiency;
    const int64_t q = std::max<int64_t>(1, g->q_rows.count);
    const int64_t kv = std::max<int64_t>(1, g->kv_rows.count);
    return tabulated_block_efficiency(gpu.attn_bwd_table, buffer_decl(program, g->q), q, kv, kv,
                                      semantics::is_masked(g->mask), attention_sm_count(gpu));
  }
  HCPSIM_ASSERT(false, "attention_block_efficiency of a " + to_string(op.kind()) + " op");
  return 0;
}

TimePs attention_block_ps(OpKind kind, double flops, int64_t hbm_bytes, Dtype dtype, const GpuSpec& gpu,
                          double efficiency) {
  const bool forward = kind == OpKind::attn_fwd_block;
  const bool backward = kind == OpKind::attn_bwd_block;
  HCPSIM_ASSERT(forward || backward, "attention_block_ps of a " + to_string(kind) + " op");
  HCPSIM_ASSERT(flops >= 0, "negative flops");
  HCPSIM_ASSERT(hbm_bytes >= 0, "negative bytes");
  HCPSIM_ASSERT(efficiency <= 1, "efficiency above 1");
  require_positive(gpu.peak_bf16_flops_per_s, "gpu.peak_bf16_flops_per_s");
  require_positive(efficiency, forward ? "gpu.attn_fwd_efficiency" : "gpu.attn_bwd_efficiency");
  require_positive(gpu.hbm_bandwidth_bytes_per_s, "gpu.hbm_bandwidth_bytes_per_s");
  const double compute_s = flops / (gpu.peak_bf16_flops_per_s * peak_fraction(dtype) * efficiency);
  const double memory_s = static_cast<double>(hbm_bytes) / gpu.hbm_bandwidth_bytes_per_s;
  // No launched kernel ends sooner than its launch overhead (the copies and merges pay it too). The tables are
  // end-to-end measurements at >= 512 rows, where a block takes several times the overhead, so only the tiny
  // blocks of short packed sequences or tiny CP chunks reach the floor; an empty block (no pair) is no launch.
  const double launch_s = flops > 0 ? std::max(0.0, gpu.kernel_launch_overhead_s) : 0.0;
  return seconds_to_ps(std::max({compute_s, memory_s, launch_s}));
}

TimePs elementwise_ps(int64_t bytes, const GpuSpec& gpu) {
  HCPSIM_ASSERT(bytes >= 0, "negative bytes");
  require_positive(gpu.hbm_bandwidth_bytes_per_s, "gpu.hbm_bandwidth_bytes_per_s");
  HCPSIM_ASSERT(gpu.kernel_launch_overhead_s >= 0, "negative kernel launch overhead");
  return seconds_to_ps(gpu.kernel_launch_overhead_s + static_cast<double>(bytes) / gpu.hbm_bandwidth_bytes_per_s);
}

TimePs compute_op_ps(const Op& op, const RankProgram& program, Dtype dtype, const GpuSpec& gpu) {
  auto none = [](const auto&) -> TimePs { return 0; };
  auto block = [&](const auto&) -> TimePs {
    return attention_block_ps(op.kind(), op.flops, attention_block_hbm_bytes(op, program), dtype, gpu,
                              attention_block_efficiency(op, program, gpu));
  };
  auto memory_bound = [&](const auto&) -> TimePs { return elementwise_ps(op.bytes, gpu); };
  auto communication = [&](const auto&) -> TimePs {
    HCPSIM_ASSERT(false, "compute_op_ps of a communication op (" + to_string(op.kind()) + ") '" + op.label + "'");
    return 0;
  };
  return visit_op(op.payload, Overload{
                                  [&](const AllocOp& p) { return none(p); },
                                  [&](const FreeOp& p) { return none(p); },
                                  [&](const AttnFwdBlockOp& p) { return block(p); },
                                  [&](const AttnBwdBlockOp& p) { return block(p); },
                                  [&](const LseMergeOp& p) { return memory_bound(p); },
                                  [&](const OutCorrectionOp& p) { return memory_bound(p); },
                                  [&](const CopyOp& p) { return memory_bound(p); },
                                  [&](const ElementwiseOp& p) { return memory_bound(p); },
                                  [&](const GemmOp& p) { return gemm_ps(p, op.bytes, dtype, gpu); },
                                  [&](const AllToAllOp& p) { return communication(p); },
                                  [&](const SendRecvOp& p) { return communication(p); },
                                  [&](const AllGatherOp& p) { return communication(p); },
                                  [&](const ReduceScatterOp& p) { return communication(p); },
                              });
}

namespace {

double wave_fill(int64_t m, int64_t n, int64_t sm_count) {
  if (sm_count <= 0) return 1.0;
  const double tiles =
      static_cast<double>((m + kGemmTileRows - 1) / kGemmTileRows) * static_cast<double>((n + kGemmTileCols - 1) / kGemmTileCols);
  const double sms = static_cast<double>(sm_count);
  return tiles / (std::ceil(tiles / sms) * sms);
}

}  // namespace

double gemm_shape_factor(int64_t m, int64_t n, int64_t k, bool fp8, const GpuSpec& gpu) {
  HCPSIM_ASSERT(m >= 1 && n >= 1 && k >= 1, "GEMM dimensions must be ≥ 1");
  const double fill = static_cast<double>(fp8 ? 2 * kGemmTileFillK : kGemmTileFillK);
  auto loop = [fill](int64_t kk) { return static_cast<double>(kk) / (static_cast<double>(kk) + fill); };
  return wave_fill(m, n, gpu.sm_count) / wave_fill(kGemmReferenceSize, kGemmReferenceSize, gpu.sm_count) *
         loop(k) / loop(kGemmReferenceSize);
}

TimePs gemm_ps(const GemmOp& shape, int64_t bytes, Dtype dtype, const GpuSpec& gpu) {
  HCPSIM_ASSERT(bytes >= 0, "negative GEMM bytes");
  const double fast = shape.fp8 ? gpu.gemm_efficiency_fp8 : gpu.gemm_efficiency_bf16;
  require_positive(fast, shape.fp8 ? "gpu.gemm_efficiency_fp8" : "gpu.gemm_efficiency_bf16");
  const bool split = shape.fp8 && shape.split_accumulator;
  if (split) require_positive(gpu.fp8_split_accumulator_slowdown, "gpu.fp8_split_accumulator_slowdown");
  const double base = split ? fast / std::max(1.0, gpu.fp8_split_accumulator_slowdown) : fast;
  require_positive(gpu.hbm_bandwidth_bytes_per_s, "gpu.hbm_bandwidth_bytes_per_s");
  const double peak = shape.fp8 ? gpu.peak_fp8_flops_per_s : gpu.peak_bf16_flops_per_s * peak_fraction(dtype);
  require_positive(peak, shape.fp8 ? "gpu.peak_fp8_flops_per_s" : "gpu.peak_bf16_flops_per_s");
  const double efficiency = std::min(1.0, base * gemm_shape_factor(shape.m, shape.n, shape.k, shape.fp8, gpu));
  const double flops = 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) * static_cast<double>(shape.k);
  return seconds_to_ps(gpu.kernel_launch_overhead_s +
                       std::max(flops / (peak * efficiency), static_cast<double>(bytes) / gpu.hbm_bandwidth_bytes_per_s));
}

TimePs message_ps(int64_t bytes, LinkLevel level, const ClusterSpec& cluster) {
  HCPSIM_ASSERT(bytes >= 0, "negative message size");
  const LinkSpec& link = link_spec(cluster, level);
  require_positive(link.bandwidth_bytes_per_s, level == LinkLevel::intra_node ? "nvlink.bandwidth_bytes_per_s"
                                                                             : "network.bandwidth_bytes_per_s");
  HCPSIM_ASSERT(link.latency_s >= 0, "negative link latency");
  HCPSIM_ASSERT(cluster.message_latency_s >= 0, "negative message latency");
  return seconds_to_ps(cluster.message_latency_s + link.latency_s +
                       static_cast<double>(bytes) / link.bandwidth_bytes_per_s);
}

}  // namespace hcpsim::sim
