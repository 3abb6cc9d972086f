#include "hcpsim/gpu/execution_plan.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <variant>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule_hazards.hpp"
#include "hcpsim/gpu/block_math.hpp"

namespace hcpsim::gpu {

namespace {

InputError schedule_error(const std::string& problem, const std::string& fix) {
  return InputError(SourceLoc{}, "schedule", problem, fix);
}

const BufferDecl& decl(const Schedule& s, int64_t rank, BufferId id) {
  const RankProgram& prog = s.ranks[static_cast<size_t>(rank)];
  HCPSIM_ASSERT(id >= 0 && static_cast<size_t>(id) < prog.buffers.size(), "execution plan: buffer id out of range");
  return prog.buffers[static_cast<size_t>(id)];
}

const Op& op_at(const Schedule& s, const OpRef& r) {
  return s.ranks[static_cast<size_t>(r.rank)].ops[static_cast<size_t>(r.op)];
}

/// A whole buffer as one contiguous run (for send/recv byte streams).
struct Span {
  BufferId buffer;
  int64_t elements;
};

/// send_recv: the sender's concatenated send buffers onto the receiver's concatenated recv buffers, cut at every
/// boundary of either side (usually one segment per buffer: [k, v] → [k, v]).
std::vector<CopySegment> message_segments(const Schedule& s, const OpRef& sender, const SendRecvOp& send,
                                          const OpRef& receiver, const SendRecvOp& recv) {
  std::vector<Span> from, to;
  int64_t total_from = 0, total_to = 0;
  for (BufferId id : send.send) {
    from.push_back({id, decl(s, sender.rank, id).elements()});
    total_from += from.back().elements;
  }
  for (BufferId id : recv.recv) {
    to.push_back({id, decl(s, receiver.rank, id).elements()});
    total_to += to.back().elements;
  }
  if (total_from != total_to)
    throw schedule_error(fmt::format("message from {} to {} carries {} elements but the receive buffers hold {}",
                                     op_ref_text(s, sender), op_ref_text(s, receiver), total_from, total_to),
                         "the schedule is inconsistent; rebuild it with build_schedule");
  std::vector<CopySegment> segs;
  size_t i = 0, j = 0;
  int64_t off_i = 0, off_j = 0;
  while (i < from.size() && j < to.size()) {
    const int64_t n = std::min(from[i].elements - off_i, to[j].elements - off_j);
    if (n > 0) {
      CopySegment seg;
      seg.src_rank = sender.rank;
      seg.src = from[i].buffer;
      seg.dst_rank = receiver.rank;
      seg.dst = to[j].buffer;
      seg.src_offset = off_i;
      seg.dst_offset = off_j;
      seg.batch = 1;
      seg.rows = 1;
      seg.run_elements = n;
      segs.push_back(seg);
    }
    off_i += n;
    off_j += n;
    if (off_i == from[i].elements) { ++i; off_i = 0; }
    if (j < to.size() && off_j == to[j].elements) { ++j; off_j = 0; }
  }
  return segs;
}

/// Rows [row0, row0 + rows) at heads [head0, head0 + heads) of a [b, R, H, w] buffer as a segment side.
struct Side {
  int64_t offset, batch_stride, row_stride;
};
Side side_of(const BufferDecl& d, int64_t row0, int64_t head0) {
  return Side{(row0 * d.heads + head0) * d.width, d.rows * d.heads * d.width, d.heads * d.width};
}

CopySegment make_segment(int64_t src_rank, BufferId src, const Side& s, int64_t dst_rank, BufferId dst,
                         const Side& d, int64_t batch, int64_t rows, int64_t run, bool accumulate) {
  CopySegment seg;
  seg.src_rank = src_rank;
  seg.src = src;
  seg.dst_rank = dst_rank;
  seg.dst = dst;
  seg.src_offset = s.offset;
  seg.src_batch_stride = s.batch_stride;
  seg.src_row_stride = s.row_stride;
  seg.dst_offset = d.offset;
  seg.dst_batch_stride = d.batch_stride;
  seg.dst_row_stride = d.row_stride;
  seg.batch = batch;
  seg.rows = rows;
  seg.run_elements = run;
  seg.accumulate = accumulate;
  return seg;
}

template <typename OpT>
const OpT& member_op(const Schedule& s, const std::map<int64_t, OpRef>& at, int64_t rank) {
  return std::get<OpT>(op_at(s, at.at(rank)).payload);
}

/// Incoming segments of collective member `me` (AllToAllOp, AllGatherOp, ReduceScatterOp); `at` maps every member
/// rank to its op in the batch. Semantics: schedule.hpp docstrings, as the CPU executor implements them
/// (oracles/src/executor_comm_ops.cpp).
std::vector<CopySegment> collective_segments(const Schedule& s, const std::map<int64_t, OpRef>& at,
                                             const OpRef& me) {
  std::vector<CopySegment> segs;
  const Op& op = op_at(s, me);
  if (const auto* a2a = std::get_if<AllToAllOp>(&op.payload)) {
    const auto A = static_cast<int64_t>(a2a->group.size());
    const int64_t my_index = std::find(a2a->group.begin(), a2a->group.end(), me.rank) - a2a->group.begin();
    const BufferDecl& out = decl(s, me.rank, a2a->output);
    if (a2a->direction == AllToAllOp::Direction::scatter_heads) {
      const BufferDecl& in0 = decl(s, a2a->group[0], member_op<AllToAllOp>(s, at, a2a->group[0]).input);
      const int64_t c = in0.rows / 2;
      const int64_t hl = in0.heads / A;
      for (int64_t k = 0; k < 2 * A; ++k) {
        const int64_t chunk = a2a->chunk_order[static_cast<size_t>(k)];
        const int64_t src_rank = a2a->group[static_cast<size_t>(chunk / 2)];
        const BufferId src = member_op<AllToAllOp>(s, at, src_rank).input;
        const BufferDecl& in = decl(s, src_rank, src);
        segs.push_back(make_segment(src_rank, src, side_of(in, (chunk % 2) * c, my_index * hl), me.rank,
                                    a2a->output, side_of(out, k * c, 0), in.batch, c, hl * in.width, false));
      }
    } else {
      // gather_heads: sender a's slots (2j, 2j+1) = its input half-chunks chunk_order[2j + half] → my rows
      // [half·c, (half+1)·c) at heads [a·hl, (a+1)·hl), with j = my index.
      for (int64_t a = 0; a < A; ++a) {
        const int64_t src_rank = a2a->group[static_cast<size_t>(a)];
        const auto& src_op = member_op<AllToAllOp>(s, at, src_rank);
        const BufferDecl& in = decl(s, src_rank, src_op.input);
        const int64_t c = in.rows / (2 * A);
        for (int64_t half = 0; half < 2; ++half) {
          const int64_t chunk = src_op.chunk_order[static_cast<size_t>(2 * my_index + half)];
          segs.push_back(make_segment(src_rank, src_op.input, side_of(in, chunk * c, 0), me.rank, a2a->output,
                                      side_of(out, half * c, a * in.heads), in.batch, c, in.heads * in.width,
                                      false));
        }
      }
    }
    return segs;
  }
  if (const auto* ag = std::get_if<AllGatherOp>(&op.payload)) {
    const BufferDecl& out = decl(s, me.rank, ag->output);
    const auto n = static_cast<int64_t>(ag->group.size());
    for (int64_t k = 0; k < 2 * n; ++k) {
      const int64_t chunk = ag->chunk_order[static_cast<size_t>(k)];
      const int64_t src_rank = ag->group[static_cast<size_t>(chunk / 2)];
      const BufferId src = member_op<AllGatherOp>(s, at, src_rank).input;
      const BufferDecl& in = decl(s, src_rank, src);
      const int64_t c = in.rows / 2;
      segs.push_back(make_segment(src_rank, src, side_of(in, (chunk % 2) * c, 0), me.rank, ag->output,
                                  side_of(out, k * c, 0), in.batch, c, in.heads * in.width, false));
    }
    return segs;
  }
  const auto& rs = std::get<ReduceScatterOp>(op.payload);
  const BufferDecl& out = decl(s, me.rank, rs.output);
  const auto n = static_cast<int64_t>(rs.group.size());
  const int64_t j = std::find(rs.group.begin(), rs.group.end(), me.rank) - rs.group.begin();
  for (int64_t half = 0; half < 2; ++half) {
    const int64_t chunk = rs.chunk_order[static_cast<size_t>(2 * j + half)];
    for (int64_t a = 0; a < n; ++a) {  // member order: deterministic sums, the first assigns
      const int64_t src_rank = rs.group[static_cast<size_t>(a)];
      const BufferId src = member_op<ReduceScatterOp>(s, at, src_rank).input;
      const BufferDecl& in = decl(s, src_rank, src);
      const int64_t c = in.rows / (2 * n);
      segs.push_back(make_segment(src_rank, src, side_of(in, chunk * c, 0), me.rank, rs.output,
                                  side_of(out, half * c, 0), in.batch, c, in.heads * in.width, a > 0));
    }
  }
  return segs;
}

/// Group, tag and kind of a collective op (for matching).
template <typename OpT>
bool collective_matches(const Schedule& s, const std::vector<int64_t>& pc, const std::set<int64_t>& waiting,
                        const OpT& op) {
  for (int64_t m : op.group) {
    if (m < 0 || m >= static_cast<int64_t>(s.ranks.size()) || !waiting.count(m)) return false;
    const Op& other = s.ranks[static_cast<size_t>(m)].ops[static_cast<size_t>(pc[static_cast<size_t>(m)])];
    const auto* o = std::get_if<OpT>(&other.payload);
    if (o == nullptr || o->tag != op.tag || o->group != op.group || o->chunk_order != op.chunk_order) return false;
  }
  return true;
}

bool matched(const Schedule& s, const std::vector<int64_t>& pc, const std::set<int64_t>& waiting, int64_t rank) {
  const Op& op = s.ranks[static_cast<size_t>(rank)].ops[static_cast<size_t>(pc[static_cast<size_t>(rank)])];
  auto current = [&](int64_t r) -> const Op& {
    return s.ranks[static_cast<size_t>(r)].ops[static_cast<size_t>(pc[static_cast<size_t>(r)])];
  };
  if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
    if (sr->send_peer >= 0) {
      if (!waiting.count(sr->send_peer)) return false;
      const auto* peer = std::get_if<SendRecvOp>(&current(sr->send_peer).payload);
      if (peer == nullptr || peer->recv_peer != rank || peer->recv_tag != sr->send_tag) return false;
    }
    if (sr->recv_peer >= 0) {
      if (!waiting.count(sr->recv_peer)) return false;
      const auto* peer = std::get_if<SendRecvOp>(&current(sr->recv_peer).payload);
      if (peer == nullptr || peer->send_peer != rank || peer->send_tag != sr->recv_tag) return false;
    }
    return true;
  }
  if (const auto* a2a = std::get_if<AllToAllOp>(&op.payload)) return collective_matches(s, pc, waiting, *a2a);
  if (const auto* ag = std::get_if<AllGatherOp>(&op.payload)) return collective_matches(s, pc, waiting, *ag);
  if (const auto* rs = std::get_if<ReduceScatterOp>(&op.payload)) return collective_matches(s, pc, waiting, *rs);
  return false;
}

}  // namespace

std::string op_ref_text(const Schedule& schedule, const OpRef& ref) {
  const Op& op = op_at(schedule, ref);
  return fmt::format("cp_rank {} op #{} {} '{}'", schedule.ranks[static_cast<size_t>(ref.rank)].cp_rank, ref.op,
                     to_string(op.kind()), op.label);
}

BufferUses op_buffer_uses(const Op& op) {
  if (op.kind() == OpKind::gemm || op.kind() == OpKind::elementwise)
    throw schedule_error("the GPU backend executes attention schedules; a layer-model op (" + to_string(op.kind()) +
                             ") cannot run numerically",
                         "verify an attention schedule (build_schedule), not a layer schedule");
  BufferUses u;
  for (const BufferAccess& a : op_buffer_accesses(op)) (a.writes ? u.writes : u.reads).push_back(a.buffer);
  return u;
}

namespace {

/// True when some access of `a` and some access of `b` to buffer `b_id` conflict (overlapping rows, one writes).
bool conflict_on(const std::vector<BufferAccess>& a, const std::vector<BufferAccess>& b, BufferId b_id) {
  for (const BufferAccess& x : a)
    for (const BufferAccess& y : b)
      if (x.buffer == b_id && accesses_conflict(x, y)) return true;
  return false;
}

/// ExecutionPlan::waits of rank `rank`: for every op, its explicit deps and every read-after-write,
/// write-after-read and write-after-write on a buffer in program order, reduced to the latest such op of each
/// other stream. A buffer wait the deps do not already imply is either between disjoint rows of one buffer (kept)
/// or a real hazard, which the ordering contract forbids (schedule.hpp; check_hazards finds every such pair):
/// HCPSIM_ASSERT naming both ops instead of silently repairing the schedule.
std::vector<std::vector<OpIndex>> hazard_waits(const Schedule& s, int64_t rank) {
  const RankProgram& prog = s.ranks[static_cast<size_t>(rank)];
  const RankOrder order(prog);
  std::vector<std::vector<OpIndex>> waits(prog.ops.size());
  std::vector<OpIndex> last_writer(prog.buffers.size(), -1);
  std::vector<std::vector<OpIndex>> readers(prog.buffers.size());
  std::vector<std::vector<BufferAccess>> accesses(prog.ops.size());
  for (size_t i = 0; i < prog.ops.size(); ++i) {
    const Op& op = prog.ops[i];
    const BufferUses uses = op_buffer_uses(op);
    accesses[i] = op_buffer_accesses(op);
    std::vector<OpIndex> need(op.deps.begin(), op.deps.end());
    auto buffer_wait = [&](OpIndex h, BufferId b) {
      const auto later = static_cast<OpIndex>(i);
      const bool ordered = prog.ops[static_cast<size_t>(h)].stream == op.stream || order.ordered(h, later);
      HCPSIM_ASSERT(ordered || !conflict_on(accesses[static_cast<size_t>(h)], accesses[i], b),
                    fmt::format("execution plan: {} and {} access buffer '{}' on different streams without a chain of "
                                "deps ordering them (a schedule hazard, see check_hazards)",
                                op_ref_text(s, OpRef{rank, h}), op_ref_text(s, OpRef{rank, later}),
                                prog.buffers[static_cast<size_t>(b)].name));
      need.push_back(h);
    };
    for (BufferId b : uses.reads) {
      if (last_writer[static_cast<size_t>(b)] >= 0) buffer_wait(last_writer[static_cast<size_t>(b)], b);
    }
    for (BufferId b : uses.writes) {
      if (last_writer[static_cast<size_t>(b)] >= 0) buffer_wait(last_writer[static_cast<size_t>(b)], b);
      for (OpIndex rd : readers[static_cast<size_t>(b)]) buffer_wait(rd, b);
    }
    // Keep the latest op per other stream: events on one stream complete in order.
    std::map<int, OpIndex> latest;
    for (OpIndex d : need) {
      const Stream st = prog.ops[static_cast<size_t>(d)].stream;
      if (st == op.stream) continue;
      auto& slot = latest.try_emplace(static_cast<int>(st), d).first->second;
      slot = std::max(slot, d);
    }
    for (const auto& [st, d] : latest) waits[i].push_back(d);
    std::sort(waits[i].begin(), waits[i].end());
    for (BufferId b : uses.reads) readers[static_cast<size_t>(b)].push_back(static_cast<OpIndex>(i));
    for (BufferId b : uses.writes) {
      last_writer[static_cast<size_t>(b)] = static_cast<OpIndex>(i);
      readers[static_cast<size_t>(b)].clear();
    }
  }
  return waits;
}

/// Where every rank stands in the host's enqueue walk: pc[r] = its next op not yet enqueued.
struct EnqueueCursor {
  const Schedule& schedule;
  std::vector<int64_t> pc;

  [[nodiscard]] bool finished(int64_t r) const {
    return pc[static_cast<size_t>(r)] >= static_cast<int64_t>(schedule.ranks[static_cast<size_t>(r)].ops.size());
  }
  [[nodiscard]] OpRef next(int64_t r) const { return OpRef{r, static_cast<OpIndex>(pc[static_cast<size_t>(r)])}; }
  [[nodiscard]] const Op& current(int64_t r) const { return op_at(schedule, next(r)); }
  [[nodiscard]] int64_t ranks() const { return static_cast<int64_t>(schedule.ranks.size()); }
};

/// Enqueue order: round-robin over ranks in rank order, each rank enqueues its non-communication ops until it
/// reaches a communication op (or its end).
void enqueue_until_communication(EnqueueCursor& cur, std::vector<PlanStep>& steps) {
  for (int64_t r = 0; r < cur.ranks(); ++r) {
    while (!cur.finished(r) && !is_communication(cur.current(r).kind())) {
      PlanStep step;
      step.op = cur.next(r);
      steps.push_back(std::move(step));
      ++cur.pc[static_cast<size_t>(r)];
    }
  }
}

/// Rendezvous: the ranks whose waiting communication ops form the next batch, the largest mutually matched subset
/// of the unfinished ranks; empty when every rank has finished.
/// @throws InputError (key "schedule") when ranks wait but none of their ops can be matched (a deadlock).
std::set<int64_t> next_rendezvous(const EnqueueCursor& cur) {
  std::set<int64_t> waiting;
  for (int64_t r = 0; r < cur.ranks(); ++r) {
    if (!cur.finished(r)) waiting.insert(r);
  }
  if (waiting.empty()) return waiting;
  // Largest mutually matched subset: drop unmatched members until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (!matched(cur.schedule, cur.pc, waiting, *it)) {
        it = waiting.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
  }
  if (waiting.empty()) {
    std::string text = "no communication op can be matched under NCCL rendezvous semantics:";
    for (int64_t r = 0; r < cur.ranks(); ++r) {
      if (!cur.finished(r)) text += "\n  " + op_ref_text(cur.schedule, cur.next(r));
    }
    throw schedule_error(text, "the schedule deadlocks when sends wait for their receives; use --backend cpu");
  }
  return waiting;
}

/// The batch of the current ops of `members` (in rank order), each with the copy segments that write into it.
PlanStep batch_step(const EnqueueCursor& cur, const std::set<int64_t>& members) {
  const Schedule& schedule = cur.schedule;
  PlanStep step;
  step.is_batch = true;
  std::map<int64_t, OpRef> at;
  for (int64_t r : members) at[r] = cur.next(r);
  for (int64_t r : members) {
    CommItem item;
    item.op = at[r];
    const Op& op = op_at(schedule, item.op);
    if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
      if (sr->recv_peer >= 0) {
        const OpRef sender = at[sr->recv_peer];
        item.incoming =
            message_segments(schedule, sender, std::get<SendRecvOp>(op_at(schedule, sender).payload), item.op, *sr);
      }
    } else {
      item.incoming = collective_segments(schedule, at, item.op);
    }
    step.items.push_back(std::move(item));
  }
  return step;
}

/// Fills every item's sources (ranks its segments read) and readers (ranks whose segments read it), and adds the
/// batch's segments and cross-rank elements to the plan's totals.
void link_sources_and_readers(PlanStep& step, ExecutionPlan& plan) {
  std::map<int64_t, size_t> index_of;
  for (size_t i = 0; i < step.items.size(); ++i) index_of[step.items[i].op.rank] = i;
  for (CommItem& item : step.items) {
    std::set<int64_t> src;
    for (const CopySegment& seg : item.incoming) {
      plan.segments += 1;
      if (seg.src_rank != item.op.rank) {
        src.insert(seg.src_rank);
        plan.moved_elements += seg.elements();
      }
    }
    item.sources.assign(src.begin(), src.end());
  }
  for (const CommItem& item : step.items) {
    for (int64_t s : item.sources) step.items[index_of.at(s)].readers.push_back(item.op.rank);
  }
  for (CommItem& item : step.items) {
    std::sort(item.readers.begin(), item.readers.end());
    item.readers.erase(std::unique(item.readers.begin(), item.readers.end()), item.readers.end());
  }
}

}  // namespace

ExecutionPlan build_execution_plan(const Schedule& schedule) {
  if (const RunBlocker blocker = numeric_run_blocker(schedule); blocker.blocked())
    throw schedule_error("the GPU backend executes attention schedules: " + blocker.problem, blocker.fix);
  schedule.check_invariants();
#ifndef NDEBUG
  check_hazards(schedule);
#endif
  ExecutionPlan plan;
  // Cross-stream waits first: they reject layer-model ops before any rendezvous is formed.
  for (size_t r = 0; r < schedule.ranks.size(); ++r)
    plan.waits.push_back(hazard_waits(schedule, static_cast<int64_t>(r)));
  EnqueueCursor cur{schedule, std::vector<int64_t>(schedule.ranks.size(), 0)};
  for (;;) {
    enqueue_until_communication(cur, plan.steps);
    const std::set<int64_t> members = next_rendezvous(cur);
    if (members.empty()) break;
    PlanStep step = batch_step(cur, members);
    link_sources_and_readers(step, plan);
    for (int64_t r : members) ++cur.pc[static_cast<size_t>(r)];
    plan.steps.push_back(std::move(step));
    ++plan.batches;
  }
  return plan;
}

int64_t planned_peak_bytes(const RankProgram& prog) {
  constexpr int64_t kFloatBytes = 4;  // float storage (block_math.hpp)
  int64_t live = 0;
  for (const IoBinding& b : prog.inputs) live += prog.buffers[static_cast<size_t>(b.buffer)].elements() * kFloatBytes;
  int64_t peak = live;
  for (const Op& op : prog.ops) {
    if (const auto* a = std::get_if<AllocOp>(&op.payload)) {
      live += prog.buffers[static_cast<size_t>(a->buffer)].elements() * kFloatBytes;
      peak = std::max(peak, live);
    } else if (const auto* f = std::get_if<FreeOp>(&op.payload)) {
      live -= prog.buffers[static_cast<size_t>(f->buffer)].elements() * kFloatBytes;
    }
  }
  return peak;
}

CopySegment copy_op_segment(const RankProgram& program, int64_t rank, const CopyOp& op) {
  const BufferDecl& dd = program.buffers[static_cast<size_t>(op.dst)];
  const BufferDecl& sd = program.buffers[static_cast<size_t>(op.src)];
  CopySegment seg;
  seg.src_rank = rank;
  seg.src = op.src;
  seg.dst_rank = rank;
  seg.dst = op.dst;
  seg.src_offset = op.src_rows.begin * sd.heads * sd.width;
  seg.src_batch_stride = sd.rows * sd.heads * sd.width;
  seg.src_row_stride = sd.heads * sd.width;
  seg.dst_offset = op.dst_rows.begin * dd.heads * dd.width;
  seg.dst_batch_stride = dd.rows * dd.heads * dd.width;
  seg.dst_row_stride = dd.heads * dd.width;
  seg.batch = dd.batch;
  seg.rows = op.dst_rows.count;
  seg.run_elements = dd.heads * dd.width;
  seg.accumulate = op.accumulate;
  return seg;
}

void apply_segment_on_host(const CopySegment& seg, const float* src, float* dst, Dtype acc_format) {
  for (int64_t b = 0; b < seg.batch; ++b) {
    for (int64_t r = 0; r < seg.rows; ++r) {
      const float* s = src + seg.src_offset + b * seg.src_batch_stride + r * seg.src_row_stride;
      float* d = dst + seg.dst_offset + b * seg.dst_batch_stride + r * seg.dst_row_stride;
      for (int64_t e = 0; e < seg.run_elements; ++e) d[e] = seg.accumulate ? semantics::round_to_dtype(d[e] + s[e], acc_format) : s[e];
    }
  }
}

}  // namespace hcpsim::gpu
