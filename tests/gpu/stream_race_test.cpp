// The GPU executor's stream and event protocol, tested without a GPU: a replay of its synchronisation with
// vector clocks over the execution plan, for the single-device and the NCCL backend, must order every
// conflicting buffer access.

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/gpu/execution_plan.hpp"

using namespace hcpsim;
using namespace hcpsim::gpu;

namespace {

AttentionShape make_shape(int64_t b, int64_t s, int64_t h, int64_t hkv, int64_t dk, int64_t dv, bool causal) {
  return test::attention_shape(b, s, h, hkv, dk, dv, causal);
}

Schedule schedule_for(int64_t A, int64_t P, const AttentionShape& shape, CpCommType type = CpCommType::a2a_p2p) {
  return build_schedule(type, CpLayout(A, P, shape.seq_length), shape);
}

/// Vector clock over the streams of a run ((rank, stream) → count).
using Clock = std::map<std::pair<int64_t, int>, int64_t>;

void join_clock(Clock& into, const Clock& from) {
  for (const auto& [k, v] : from) into[k] = std::max(into[k], v);
}

/// One access to a buffer instance: the stream that made it and that stream's clock at the time.
struct Access {
  std::pair<int64_t, int> stream;
  int64_t tick = 0;
  bool write = false;
};

/// Replays the single-device executor's synchronisation (device_op_launch.cpp: begin() = the plan's waits + start
/// event; device_comm_batch.cpp batch(): phase 1 begin on every member's comm stream, phase 2 each destination
/// waits for its sources' start events, copies, records `moved`, phase 3 each member waits for its readers' `moved`
/// and records its end) with vector clocks, and checks that every access to a buffer happens after every earlier
/// conflicting access in enqueue order (read-after-write, write-after-read, write-after-write). Returns the number
/// of violations and fills `first` with a description of the first.
/// nccl = true replays the NCCL backend's protocol instead (device_comm_nccl.cpp nccl_batch): each sender packs
/// the segments a destination reads from it on its own comm stream (reading its buffers there), the grouped
/// send/recv orders the destination's comm stream after the sender's packs, the destination unpacks in order (its
/// own segments read its own buffers), and no member waits for its readers.
int64_t race_check(const Schedule& s, const ExecutionPlan& plan, std::string& first, bool nccl = false) {
  std::map<std::pair<int64_t, int>, Clock> stream_clock;
  std::map<OpRef, Clock> end_event, start_event, moved_event;
  std::map<std::pair<int64_t, BufferId>, std::vector<Access>> history;  // since the last alloc
  int64_t violations = 0;
  auto access = [&](int64_t rank, BufferId b, std::pair<int64_t, int> st, bool write) {
    Clock& c = stream_clock[st];
    const int64_t tick = ++c[st];
    auto& h = history[{rank, b}];
    for (const Access& a : h) {
      if (!write && !a.write) continue;
      if (c[a.stream] < a.tick) {
        ++violations;
        if (first.empty())
          first = "cp_rank " + std::to_string(rank) + " buffer '" +
                  s.ranks[static_cast<size_t>(rank)].buffers[static_cast<size_t>(b)].name + "' accessed on stream " +
                  std::to_string(st.second) + " of rank " + std::to_string(st.first) +
                  " without ordering after an earlier access on stream " + std::to_string(a.stream.second) +
                  " of rank " + std::to_string(a.stream.first);
      }
    }
    h.push_back(Access{st, tick, write});
  };
  auto begin = [&](const OpRef& ref, std::pair<int64_t, int> st) {
    for (OpIndex w : plan.waits[static_cast<size_t>(ref.rank)][static_cast<size_t>(ref.op)])
      join_clock(stream_clock[st], end_event.at(OpRef{ref.rank, w}));
  };
  for (const PlanStep& step : plan.steps) {
    if (!step.is_batch) {
      const Op& op = s.ranks[static_cast<size_t>(step.op.rank)].ops[static_cast<size_t>(step.op.op)];
      const std::pair<int64_t, int> st{step.op.rank, static_cast<int>(op.stream)};
      begin(step.op, st);
      const BufferUses u = op_buffer_uses(op);
      if (std::holds_alternative<AllocOp>(op.payload)) history[{step.op.rank, u.writes[0]}].clear();
      for (BufferId b : u.reads) access(step.op.rank, b, st, false);
      for (BufferId b : u.writes) access(step.op.rank, b, st, true);
      end_event[step.op] = stream_clock[st];
      continue;
    }
    auto comm = [](int64_t rank) { return std::pair<int64_t, int>{rank, static_cast<int>(Stream::comm)}; };
    for (const CommItem& item : step.items) {
      begin(item.op, comm(item.op.rank));
      ++stream_clock[comm(item.op.rank)][comm(item.op.rank)];
      start_event[item.op] = stream_clock[comm(item.op.rank)];
    }
    auto member = [&](int64_t rank) {
      for (const CommItem& it : step.items)
        if (it.op.rank == rank) return it.op;
      return OpRef{-1, -1};
    };
    if (nccl) {
      std::map<std::pair<int64_t, int64_t>, Clock> sent;  // (src, dst) → the sender's clock after its packs
      for (const CommItem& dst : step.items) {
        for (int64_t src : dst.sources) {
          for (const CopySegment& seg : dst.incoming)
            if (seg.src_rank == src) access(seg.src_rank, seg.src, comm(src), false);
        }
      }
      for (const CommItem& dst : step.items)
        for (int64_t src : dst.sources) sent[{src, dst.op.rank}] = stream_clock[comm(src)];
      for (const CommItem& dst : step.items) {
        const auto st = comm(dst.op.rank);
        for (int64_t src : dst.sources) join_clock(stream_clock[st], sent.at({src, dst.op.rank}));
        for (const CopySegment& seg : dst.incoming) {
          if (seg.src_rank == dst.op.rank) access(seg.src_rank, seg.src, st, false);
          access(seg.dst_rank, seg.dst, st, true);
        }
      }
      for (const CommItem& item : step.items) {
        ++stream_clock[comm(item.op.rank)][comm(item.op.rank)];
        end_event[item.op] = stream_clock[comm(item.op.rank)];
      }
      continue;
    }
    for (const CommItem& item : step.items) {
      const auto st = comm(item.op.rank);
      for (int64_t src : item.sources) join_clock(stream_clock[st], start_event.at(member(src)));
      for (const CopySegment& seg : item.incoming) {
        access(seg.src_rank, seg.src, st, false);
        access(seg.dst_rank, seg.dst, st, true);
      }
      moved_event[item.op] = stream_clock[st];
    }
    for (const CommItem& item : step.items) {
      const auto st = comm(item.op.rank);
      for (int64_t reader : item.readers) join_clock(stream_clock[st], moved_event.at(member(reader)));
      ++stream_clock[st][st];
      end_event[item.op] = stream_clock[st];
    }
  }
  return violations;
}

}  // namespace

TEST_CASE("gpu plan: the executor's stream and event protocol orders every conflicting buffer access", "[gpu_plan]") {
  // Every builder, causal and not, with several [A, P]: no access may race with an earlier conflicting one.
  struct Case {
    CpCommType type;
    int64_t A, P;
    bool causal;
  };
  const Case cases[] = {{CpCommType::a2a_p2p, 2, 2, true}, {CpCommType::a2a_p2p, 2, 3, true},
                        {CpCommType::a2a_p2p, 4, 2, false}, {CpCommType::p2p, 1, 4, true},
                        {CpCommType::a2a, 4, 1, true},      {CpCommType::all_gather, 1, 4, true}};
  for (const Case& c : cases) {
    const AttentionShape shape = make_shape(1, 96, 4, 4, 8, 8, c.causal);
    const Schedule s = build_schedule(c.type, CpLayout(c.A, c.P, 96), shape);
    const ExecutionPlan plan = build_execution_plan(s);
    for (bool nccl : {false, true}) {
      std::string first;
      const int64_t races = race_check(s, plan, first, nccl);
      INFO(to_string(c.type) << " A=" << c.A << " P=" << c.P << (nccl ? " NCCL" : " single-device") << ": " << first);
      REQUIRE(races == 0);
    }
  }
  // The check has teeth: without the plan's cross-stream waits the same protocol races.
  const Schedule s = schedule_for(2, 2, make_shape(1, 32, 4, 2, 16, 16, true));
  ExecutionPlan bare = build_execution_plan(s);
  for (auto& rank : bare.waits)
    for (auto& w : rank) w.clear();
  for (bool nccl : {false, true}) {
    std::string first;
    REQUIRE(race_check(s, bare, first, nccl) > 0);
    REQUIRE(first.find("without ordering") != std::string::npos);
  }
}
