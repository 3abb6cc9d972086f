#include "hcpsim/gpu/execution_plan.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <variant>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/lowering.hpp"
#include "hcpsim/core/program_walker.hpp"
#include "hcpsim/core/schedule_hazards.hpp"
#include "hcpsim/gpu/block_math.hpp"

namespace hcpsim::gpu {

namespace {

InputError schedule_error(const std::string& problem, const std::string& fix) {
  return InputError(SourceLoc{}, "schedule", problem, fix);
}

}  // namespace

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

/// The batch of the walker's `members` (in rank order), each with the copy segments that write into it.
PlanStep batch_step(const Schedule& schedule, const std::vector<OpRef>& members) {
  PlanStep step;
  step.is_batch = true;
  for (const OpRef& ref : members) {
    CommItem item;
    item.op = ref;
    item.incoming = incoming_segments(schedule, members, ref);
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

RunBlocker gpu_can_run(const Schedule& schedule) {
  if (RunBlocker blocker = numeric_run_blocker(schedule); blocker.blocked()) return blocker;
  // The device kernels take dense block masks only; a document mask (AttnFwdBlockOp::doc) would be ignored.
  if (schedule.shape.packing.thd())
    return RunBlocker{"the GPU backend does not run packed sequences (qkv_format thd) yet",
                      "use the CPU oracle (hcpsim verify without --backend gpu)"};
  return {};
}

ExecutionPlan build_execution_plan(const Schedule& schedule) {
  if (const RunBlocker blocker = gpu_can_run(schedule); blocker.blocked()) {
    const std::string prefix = schedule.shape.packing.thd() ? "" : "the GPU backend executes attention schedules: ";
    throw schedule_error(prefix + blocker.problem, blocker.fix);
  }
  schedule.check_invariants();
#ifndef NDEBUG
  check_hazards(schedule);
#endif
  ExecutionPlan plan;
  // Cross-stream waits first: they reject layer-model ops before any rendezvous is formed.
  for (size_t r = 0; r < schedule.ranks.size(); ++r)
    plan.waits.push_back(hazard_waits(schedule, static_cast<int64_t>(r)));
  ProgramWalker walker(schedule);
  for (WalkStep ws; walker.next(ws);) {
    PlanStep step;
    if (ws.is_batch) {
      step = batch_step(schedule, ws.members);
      link_sources_and_readers(step, plan);
    } else {
      step.op = ws.op;
    }
    plan.steps.push_back(std::move(step));
  }
  plan.batches = walker.batches();
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

}  // namespace hcpsim::gpu
