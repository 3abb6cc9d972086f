// The program walker (program_walker.hpp): the step sequence on tiny hand-built schedules (round-robin until a
// communication op, rendezvous batches, a batch that leaves an unmatched rank waiting), the walk of the builders
// (every op exactly once, batches = walker count), and the deadlock report naming every waiting rank and op.
#include <string>
#include <utility>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/program_walker.hpp"
#include "hcpsim/core/schedule_builder.hpp"

using namespace hcpsim;

namespace {

/// The walk as text, one step per entry: "r.op" for a single op, "[r.op r.op]" for a batch.
std::vector<std::string> walk_text(const Schedule& s) {
  std::vector<std::string> out;
  auto ref = [](const OpRef& r) {
    std::string text = std::to_string(r.rank);
    text += '.';
    text += std::to_string(r.op);
    return text;
  };
  for (const WalkStep& step : walk_program(s)) {
    if (!step.is_batch) {
      out.push_back(ref(step.op));
      continue;
    }
    std::string text = "[";
    for (const OpRef& m : step.members) {
      if (text.size() > 1) text += ' ';
      text += ref(m);
    }
    out.push_back(text + "]");
  }
  return out;
}

}  // namespace

TEST_CASE("core walker: non-communication ops round-robin, then the exchange as one batch", "[core][walker]") {
  Schedule s;
  for (int64_t r = 0; r < 2; ++r) {
    RankProgram p;
    p.rank = p.cp_rank = r;
    p.buffers = {BufferDecl{"x", 1, 2, 1, 4, Dtype::bf16}, BufferDecl{"y", 1, 2, 1, 4, Dtype::bf16}};
    p.append(AllocOp{0}, Phase::forward, Stream::comm, {}, "alloc x");
    p.append(AllocOp{1}, Phase::forward, Stream::comm, {}, "alloc y");
    p.append(SendRecvOp{1 - r, 1 - r, {0}, {1}, 7, 7}, Phase::forward, Stream::comm, {}, "exchange");
    p.append(CopyOp{0, 1, RowRange{0, 2}, RowRange{0, 2}, false}, Phase::forward, Stream::compute, {2}, "copy");
    s.ranks.push_back(p);
  }
  REQUIRE(walk_text(s) == std::vector<std::string>{"0.0", "0.1", "1.0", "1.1", "[0.2 1.2]", "0.3", "1.3"});
  ProgramWalker walker(s);
  for (WalkStep step; walker.next(step);) {
  }
  REQUIRE(walker.batches() == 1);
}

TEST_CASE("core walker: a batch takes the matched ops and leaves the others waiting", "[core][walker]") {
  // Ranks 0 and 1 all-gather, then rank 0 receives from rank 2, whose only op is that send: the first batch is the
  // all-gather (rank 2's send cannot meet rank 0 yet), the second the message.
  Schedule s;
  for (int64_t r = 0; r < 3; ++r) {
    RankProgram p;
    p.rank = p.cp_rank = r;
    p.buffers = {BufferDecl{"in", 1, 2, 1, 1, Dtype::bf16}, BufferDecl{"out", 1, 4, 1, 1, Dtype::bf16}};
    if (r < 2) {
      p.append(AllGatherOp{{0, 1}, CpLayout::chunk_ids_before_attn(2), 0, 1, 4}, Phase::forward, Stream::comm, {},
               "gather");
      p.append(FreeOp{1}, Phase::forward, Stream::comm, {}, "free out");
    }
    if (r == 0) p.append(SendRecvOp{-1, 2, {}, {0}, 0, 9}, Phase::forward, Stream::comm, {}, "recv");
    if (r == 2) p.append(SendRecvOp{0, -1, {0}, {}, 9, 0}, Phase::forward, Stream::comm, {}, "send");
    s.ranks.push_back(p);
  }
  REQUIRE(walk_text(s) == std::vector<std::string>{"[0.0 1.0]", "0.1", "1.1", "[0.2 2.0]"});
}

TEST_CASE("core walker: every builder's walk steps through every op once", "[core][walker]") {
  for (auto [A, P] : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {2, 1}, {2, 2}, {4, 2}}) {
    INFO("A " << A << " P " << P);
    const int64_t S = 8 * A * P;
    const Schedule s = build_schedule(test::comm_type_for(A, P), CpLayout(A, P, S),
                                      test::attention_shape(2, S, 2 * A, A, 4, 4, true));
    std::vector<std::vector<int>> seen(s.ranks.size());
    for (size_t r = 0; r < s.ranks.size(); ++r) seen[r].assign(s.ranks[r].ops.size(), 0);
    int64_t batches = 0;
    for (const WalkStep& step : walk_program(s)) {
      const std::vector<OpRef> refs = step.is_batch ? step.members : std::vector<OpRef>{step.op};
      batches += step.is_batch ? 1 : 0;
      for (const OpRef& r : refs) {
        const Op& op = s.ranks[static_cast<size_t>(r.rank)].ops[static_cast<size_t>(r.op)];
        REQUIRE(is_communication(op.kind()) == step.is_batch);
        // List order within a rank: every earlier op of the rank was stepped past already.
        for (OpIndex i = 0; i < r.op; ++i) REQUIRE(seen[static_cast<size_t>(r.rank)][static_cast<size_t>(i)] == 1);
        ++seen[static_cast<size_t>(r.rank)][static_cast<size_t>(r.op)];
      }
    }
    for (const auto& rank : seen)
      for (int n : rank) REQUIRE(n == 1);
    REQUIRE(batches > 0);
  }
}

TEST_CASE("core walker: a deadlock under rendezvous semantics names every waiting rank and op", "[core][walker]") {
  Schedule s = test::exchange_deadlock_schedule();
  s.ranks.push_back(RankProgram{});  // a third rank without ops has finished and is not named
  s.ranks.back().rank = s.ranks.back().cp_rank = 2;
  ProgramWalker walker(s);
  WalkStep step;
  for (int i = 0; i < 4; ++i) REQUIRE(walker.next(step));  // the four allocs
  try {
    (void)walker.next(step);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "schedule");
    REQUIRE(e.problem() ==
            "deadlock under rendezvous semantics (NCCL grouped send/recv and collectives): every rank waits at a "
            "communication op and none can be matched:\n"
            "  cp_rank 0 op #2 send_recv 'send' waits for its receive on cp_rank 1 tag 7\n"
            "  cp_rank 1 op #2 send_recv 'send' waits for its receive on cp_rank 0 tag 7");
    REQUIRE(e.fix().find("a send must meet its receive") != std::string::npos);
  }
}
