#include "kernel_table.hpp"

#include <fmt/core.h>

#include <array>
#include <string>
#include <variant>

#include "../app_common.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/sim/cost_model.hpp"

namespace hcpsim::app {
namespace {

/// "q x kv, mask" of an attention block, or "" for other ops.
std::string block_shape(const Op& op) {
  if (const auto* f = std::get_if<AttnFwdBlockOp>(&op.payload))
    return fmt::format("{} x {}, {}", f->q_rows.count, f->kv_rows.count, mask_name(f->mask));
  if (const auto* b = std::get_if<AttnBwdBlockOp>(&op.payload))
    return fmt::format("{} x {}, {}", b->q_rows.count, b->kv_rows.count, mask_name(b->mask));
  return "";
}

}  // namespace

void print_kernel_table(const Schedule& schedule, int64_t cp_rank, const GpuSpec& gpu) {
  HCPSIM_ASSERT(cp_rank >= 0 && static_cast<size_t>(cp_rank) < schedule.ranks.size(), "kernel table: bad cp rank");
  const RankProgram& prog = schedule.ranks[static_cast<size_t>(cp_rank)];
  fmt::print("  kernels of cp_rank {} (each with the GPU to itself):\n", cp_rank);
  fmt::print("    {:<8} {:>4}  {:<34} {:<22} {:>13} {:>9}\n", "phase", "step", "op", "q x kv rows, mask", "time",
             "TFLOP/s");
  std::array<sim::TimePs, 2> attention{}, other{};
  for (const Op& op : prog.ops) {
    const OpKind k = op.kind();
    const bool block = k == OpKind::attn_fwd_block || k == OpKind::attn_bwd_block;
    if (!block && k != OpKind::lse_merge && k != OpKind::out_correction && k != OpKind::copy) continue;
    const sim::TimePs ps = sim::compute_op_ps(op, prog, schedule.shape.dtype, gpu);
    const auto ph = static_cast<size_t>(op.phase == Phase::forward ? 0 : 1);
    (block ? attention : other)[ph] += ps;
    const std::string rate =
        block && ps > 0 ? fmt::format("{:.1f}", op.flops / (static_cast<double>(ps) * 1e-12) / 1e12) : "";
    const std::string shape = block ? block_shape(op) : fmt::format("{} B", op.bytes);
    fmt::print("    {:<8} {:>4}  {:<34} {:<22} {:>13} {:>9}\n", to_string(op.phase),
               op.ring_step < 0 ? std::string("-") : std::to_string(op.ring_step), op.label.str().substr(0, 34), shape,
               human_time_ps(ps), rate);
  }
  for (size_t ph = 0; ph < 2; ++ph)
    fmt::print("    {:<8} attention kernels {}, merges + corrections + copies {}\n", ph == 0 ? "forward" : "backward",
               human_time_ps(attention[ph]), human_time_ps(other[ph]));
}

}  // namespace hcpsim::app
