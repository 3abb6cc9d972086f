#include "memory_accounting.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace hcpsim::sim::detail {

MemoryAccounting::MemoryAccounting(const SimContext& ctx) : ctx_(ctx), ranks_(ctx.schedule.ranks.size()) {}

void MemoryAccounting::bind_inputs(int64_t rank) {
  const RankProgram& program = ctx_.program(rank);
  RankMemory& m = ranks_[index_of(rank)];
  m.live.assign(program.buffers.size(), 0);
  for (const IoBinding& in : program.inputs) {
    HCPSIM_ASSERT(in.buffer >= 0, fmt::format("input '{}' on cp rank {} has no buffer", in.tensor, rank));
    HCPSIM_ASSERT(index_of(in.buffer) < program.buffers.size(),
                  fmt::format("input '{}' on cp rank {}: buffer id out of range", in.tensor, rank));
    if (m.live[index_of(in.buffer)]) continue;  // one buffer bound twice is live once
    m.live[index_of(in.buffer)] = 1;
    m.live_bytes += program.buffers[index_of(in.buffer)].size_bytes();
  }
  m.input_bytes = m.live_bytes;
  m.peak_bytes = m.live_bytes;
}

void MemoryAccounting::allocate(int64_t rank, OpIndex i) {
  const Op& op = ctx_.op_of(rank, i);
  const RankProgram& program = ctx_.program(rank);
  RankMemory& m = ranks_[index_of(rank)];
  const BufferId b = std::get<AllocOp>(op.payload).buffer;
  HCPSIM_ASSERT(!m.live[index_of(b)], fmt::format("cp rank {} op {} '{}': alloc of live buffer '{}'", rank, i,
                                                  op.label.str(), program.buffers[index_of(b)].name));
  m.live[index_of(b)] = 1;
  m.live_bytes += program.buffers[index_of(b)].size_bytes();
  m.peak_bytes = std::max(m.peak_bytes, m.live_bytes);
  int64_t& phase_peak = m.phase_peak_bytes[phase_index(op.phase)];
  phase_peak = std::max(phase_peak, m.live_bytes);
  if (ctx_.options.record_timeline) m.changes.emplace_back(i, m.live_bytes);
}

void MemoryAccounting::release(int64_t rank, OpIndex i) {
  const Op& op = ctx_.op_of(rank, i);
  const RankProgram& program = ctx_.program(rank);
  RankMemory& m = ranks_[index_of(rank)];
  const BufferId b = std::get<FreeOp>(op.payload).buffer;
  HCPSIM_ASSERT(m.live[index_of(b)], fmt::format("cp rank {} op {} '{}': free of dead buffer '{}'", rank, i,
                                                 op.label.str(), program.buffers[index_of(b)].name));
  m.live[index_of(b)] = 0;
  m.live_bytes -= program.buffers[index_of(b)].size_bytes();
  if (ctx_.options.record_timeline) m.changes.emplace_back(i, m.live_bytes);
}

}  // namespace hcpsim::sim::detail
