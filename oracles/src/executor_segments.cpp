// The CPU executor's data movement: communication batches and copies as core's copy segments.

#include "executor_segments.hpp"

#include <variant>

#include "hcpsim/core/error.hpp"

namespace hcpsim::cpu_exec {

namespace {

/// The group of a collective op, nullptr for any other op.
const std::vector<int64_t>* group_of(const Op& op) {
  if (const auto* a = std::get_if<AllToAllOp>(&op.payload)) return &a->group;
  if (const auto* g = std::get_if<AllGatherOp>(&op.payload)) return &g->group;
  if (const auto* r = std::get_if<ReduceScatterOp>(&op.payload)) return &r->group;
  return nullptr;
}

}  // namespace

void apply_segment(ExecutorState& state, const CopySegment& seg) {
  const HostTensor& src = live_buffer(state.ranks[static_cast<size_t>(seg.src_rank)], seg.src, "segment source");
  HostTensor& dst = live_buffer(state.ranks[static_cast<size_t>(seg.dst_rank)], seg.dst, "segment destination");
  apply_copy_segment(seg, src.data(), dst.data(), state.acc_dtype);
}

void run_batch(ExecutorState& state, const std::vector<OpRef>& members) {
  for (const OpRef& me : members) {
    const std::vector<CopySegment> segs = incoming_segments(state.schedule, members, me);
    int64_t elements = 0;
    for (const CopySegment& seg : segs) {
      apply_segment(state, seg);
      elements += seg.elements();
    }
    const Op& op = state.schedule.ranks[static_cast<size_t>(me.rank)].ops[static_cast<size_t>(me.op)];
    if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
      if (sr->recv_peer >= 0) {
        ++state.stats.messages;
        state.stats.message_elements += elements;
      }
    } else {
      const std::vector<int64_t>* group = group_of(op);
      HCPSIM_ASSERT(group != nullptr && !group->empty(), op_text(state.ranks[static_cast<size_t>(me.rank)],
                                                                  static_cast<size_t>(me.op)) + ": not a collective");
      if (group->front() == me.rank) ++state.stats.all_to_alls;  // one per collective, counted at its first member
    }
  }
  state.stats.ops_executed += static_cast<int64_t>(members.size());
  ++state.stats.batches;
}

void run_copy(ExecutorState& state, RankState& st, const CopyOp& op, const std::string& where) {
  const HostTensor& dst = live_buffer(st, op.dst, "copy dst");
  const HostTensor& src = live_buffer(st, op.src, "copy src");
  check_rows(dst, op.dst_rows, where + " dst_rows");
  check_rows(src, op.src_rows, where + " src_rows");
  HCPSIM_ASSERT(op.dst_rows.count == op.src_rows.count, where + ": dst and src row counts differ");
  HCPSIM_ASSERT(dst.batch() == src.batch(), where + ": batch differs");
  HCPSIM_ASSERT(dst.heads() == src.heads(), where + ": heads differ");
  HCPSIM_ASSERT(dst.width() == src.width(), where + ": width differs");
  if (op.dst == op.src) {
    const bool disjoint = op.dst_rows.end() <= op.src_rows.begin || op.src_rows.end() <= op.dst_rows.begin;
    HCPSIM_ASSERT(disjoint, where + ": copy within one buffer with overlapping rows");
  }
  apply_segment(state, copy_op_segment(*st.program, st.program->rank, op));
}

}  // namespace hcpsim::cpu_exec
