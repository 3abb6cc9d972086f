#include "hcpsim/core/schedule_hazards.hpp"

#include <array>
#include <variant>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/op_visit.hpp"

namespace hcpsim {

namespace {

// A new op kind must get its read and write sets below (visit_op refuses to compile without them) and a line in the
// ordering contract if it orders ops.

BufferAccess read(BufferId b, RowRange rows = kAllRows) { return BufferAccess{b, rows, true, false}; }
BufferAccess write(BufferId b, RowRange rows = kAllRows, bool also_reads = false) {
  return BufferAccess{b, rows, also_reads, true};
}

std::string rows_text(const RowRange& r) {
  if (r.begin == kAllRows.begin && r.count == kAllRows.count) return "all rows";
  return "rows [" + std::to_string(r.begin) + ", " + std::to_string(r.end()) + ")";
}

std::string access_text(const BufferAccess& a) {
  const char* verb = a.reads && a.writes ? "reads and writes " : (a.writes ? "writes " : "reads ");
  return verb + rows_text(a.rows);
}

std::string op_text(const RankProgram& p, OpIndex i) {
  const Op& op = p.ops[static_cast<size_t>(i)];
  return "op #" + std::to_string(i) + " " + to_string(op.kind()) + " '" + op.label + "' (stream " +
         to_string(op.stream) + ")";
}

/// True when `a` covers every row of its buffer (then every later access conflicts with it).
bool whole_buffer_write(const RankProgram& p, const BufferAccess& a) {
  return a.writes && a.rows.begin <= 0 && a.rows.end() >= p.buffers[static_cast<size_t>(a.buffer)].rows;
}

}  // namespace

std::vector<BufferAccess> op_buffer_accesses(const Op& op) {
  return visit_op(
      op.payload, Overload{
          [](const AllocOp& p) { return std::vector<BufferAccess>{write(p.buffer)}; },
          [](const FreeOp& p) { return std::vector<BufferAccess>{write(p.buffer)}; },
          [](const AllToAllOp& p) { return std::vector<BufferAccess>{read(p.input), write(p.output)}; },
          [](const AllGatherOp& p) { return std::vector<BufferAccess>{read(p.input), write(p.output)}; },
          [](const ReduceScatterOp& p) { return std::vector<BufferAccess>{read(p.input), write(p.output)}; },
          [](const SendRecvOp& p) {
            std::vector<BufferAccess> a;
            for (BufferId b : p.send) a.push_back(read(b));
            for (BufferId b : p.recv) a.push_back(write(b));
            return a;
          },
          [](const AttnFwdBlockOp& p) {
            return std::vector<BufferAccess>{read(p.q, p.q_rows), read(p.k, p.kv_rows), read(p.v, p.kv_rows),
                                             write(p.out), write(p.lse)};
          },
          [](const AttnBwdBlockOp& p) {
            return std::vector<BufferAccess>{read(p.q, p.q_rows),    read(p.k, p.kv_rows),   read(p.v, p.kv_rows),
                                             read(p.out, p.q_rows),  read(p.dout, p.q_rows), read(p.lse, p.q_rows),
                                             write(p.dq),            write(p.dk),            write(p.dv)};
          },
          [](const LseMergeOp& p) {
            return std::vector<BufferAccess>{read(p.src, {0, p.dst_rows.count}), write(p.dst, p.dst_rows, true)};
          },
          [](const OutCorrectionOp& p) {
            const RowRange src_rows{0, p.dst_rows.count};
            return std::vector<BufferAccess>{read(p.src, src_rows), read(p.src_lse, src_rows),
                                             read(p.lse, p.dst_rows), write(p.dst, p.dst_rows, p.accumulate)};
          },
          [](const CopyOp& p) {
            return std::vector<BufferAccess>{read(p.src, p.src_rows), write(p.dst, p.dst_rows, p.accumulate)};
          },
          [](const GemmOp&) { return std::vector<BufferAccess>{}; },
          [](const ElementwiseOp&) { return std::vector<BufferAccess>{}; },
      });
}

bool accesses_conflict(const BufferAccess& a, const BufferAccess& b) {
  if (a.buffer != b.buffer || !(a.writes || b.writes)) return false;
  if (a.rows.count <= 0 || b.rows.count <= 0) return false;  // an empty range touches nothing
  return a.rows.begin < b.rows.end() && b.rows.begin < a.rows.end();
}

RankOrder::RankOrder(const RankProgram& program) : ops_(program.ops.size()), words_((ops_ + 63) / 64) {
  before_.assign(ops_ * words_, 0);
  std::array<OpIndex, kStreamCount> last_on;  // the latest op of each stream so far
  last_on.fill(-1);
  for (size_t i = 0; i < ops_; ++i) {
    const Op& op = program.ops[i];
    uint64_t* row = before_.data() + i * words_;
    auto inherit = [&](OpIndex p) {
      HCPSIM_ASSERT(p >= 0 && static_cast<size_t>(p) < i, "RankOrder: op " + std::to_string(i) + " of cp_rank " +
                                                             std::to_string(program.cp_rank) +
                                                             " depends on a later op");
      const uint64_t* from = before_.data() + static_cast<size_t>(p) * words_;
      for (size_t w = 0; w < words_; ++w) row[w] |= from[w];
      row[static_cast<size_t>(p) / 64] |= uint64_t{1} << (static_cast<size_t>(p) % 64);
    };
    OpIndex& prev = last_on[static_cast<size_t>(op.stream)];
    if (prev >= 0) inherit(prev);
    for (OpIndex d : op.deps) inherit(d);
    prev = static_cast<OpIndex>(i);
  }
}

bool RankOrder::ordered(OpIndex earlier, OpIndex later) const {
  HCPSIM_ASSERT(earlier >= 0 && later >= 0 && static_cast<size_t>(earlier) < ops_ && static_cast<size_t>(later) < ops_,
                "RankOrder: op index out of range");
  const auto e = static_cast<size_t>(earlier);
  return (before_[static_cast<size_t>(later) * words_ + e / 64] >> (e % 64)) & 1U;
}

std::optional<Hazard> find_hazard(const RankProgram& program) {
  const RankOrder order(program);
  // Per buffer: the accesses since (and including) its last whole-buffer write. An access before that write is
  // ordered before every later access once both links through the write are checked.
  struct Prior {
    OpIndex op;
    BufferAccess access;
  };
  std::vector<std::vector<Prior>> history(program.buffers.size());
  for (size_t i = 0; i < program.ops.size(); ++i) {
    const Op& op = program.ops[i];
    const auto later = static_cast<OpIndex>(i);
    const std::vector<BufferAccess> accesses = op_buffer_accesses(op);
    for (const BufferAccess& a : accesses) {
      HCPSIM_ASSERT(a.buffer >= 0 && static_cast<size_t>(a.buffer) < program.buffers.size(),
                    "find_hazard: buffer id out of range");
      for (const Prior& p : history[static_cast<size_t>(a.buffer)]) {
        if (program.ops[static_cast<size_t>(p.op)].stream == op.stream) continue;  // stream order
        if (!accesses_conflict(p.access, a) || order.ordered(p.op, later)) continue;
        return Hazard{p.op, later, p.access, a};
      }
    }
    for (const BufferAccess& a : accesses) {
      auto& h = history[static_cast<size_t>(a.buffer)];
      if (whole_buffer_write(program, a)) h.clear();
      h.push_back(Prior{later, a});
    }
  }
  return std::nullopt;
}

std::string hazard_text(const RankProgram& program, const Hazard& h) {
  const std::string& buffer = program.buffers[static_cast<size_t>(h.earlier_access.buffer)].name;
  return "cp_rank " + std::to_string(program.cp_rank) + ": " + op_text(program, h.earlier) + " " +
         access_text(h.earlier_access) + " of buffer '" + buffer + "' and " + op_text(program, h.later) + " " +
         access_text(h.later_access) + " of it, but no chain of deps and stream order orders them";
}

void check_hazards(const RankProgram& program) {
  const std::optional<Hazard> h = find_hazard(program);
  HCPSIM_ASSERT(!h.has_value(), "buffer hazard: " + hazard_text(program, *h));
}

void check_hazards(const Schedule& schedule) {
  for (const RankProgram& r : schedule.ranks) check_hazards(r);
}

}  // namespace hcpsim
