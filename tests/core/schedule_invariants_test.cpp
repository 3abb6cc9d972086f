#include "catch_compat.hpp"
#include "death_test.hpp"
#include "test_util.hpp"
#include "hcpsim/core/schedule_builder.hpp"

using namespace hcpsim;

namespace {

Schedule good_schedule() {
  AttentionShape sh;
  sh.batch = 1;
  sh.seq_length = 16;
  sh.heads_q = 4;
  sh.heads_kv = 2;
  sh.head_dim_qk = 4;
  sh.head_dim_v = 4;
  sh.causal = true;
  sh.softmax_scale = 0.5;
  return build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, 16), sh);
}

/// Applies `corrupt` to a correct schedule and expects check_invariants() to abort with `needle`, on one thread
/// and with the rank programs checked three at a time (each corruption breaks one rank's program, or a match
/// across ranks, which is checked after the per-rank checks in rank order: the same report either way).
template <class Corrupt>
void require_rejected(Corrupt corrupt, const std::string& needle) {
  Schedule s = good_schedule();
  corrupt(s);
  for (int threads : {1, 3}) {
    const auto end = test::run_in_child([&] { s.check_invariants(threads); });
    INFO("threads " << threads << ", stderr: " << end.stderr_text);
    REQUIRE(end.aborted);
    REQUIRE(end.stderr_text.find(needle) != std::string::npos);
  }
}

/// The send_recv ops of `rank` that send (`sending`) or receive, in op order.
std::vector<SendRecvOp*> message_sides(Schedule& s, int64_t rank, bool sending) {
  std::vector<SendRecvOp*> out;
  for (auto& op : s.ranks[static_cast<size_t>(rank)].ops)
    if (auto* p = std::get_if<SendRecvOp>(&op.payload); p && (sending ? p->send_peer : p->recv_peer) >= 0)
      out.push_back(p);
  return out;
}

template <class T>
T* first_op(Schedule& s, int64_t rank, Phase phase) {
  for (auto& op : s.ranks[static_cast<size_t>(rank)].ops)
    if (auto* p = std::get_if<T>(&op.payload); p && op.phase == phase) return p;
  return nullptr;
}

}  // namespace

TEST_CASE("core: check_invariants accepts the built schedule and rejects broken ones", "[core][schedule]") {
  const auto ok = test::run_in_child([] { test::check_schedule(good_schedule()); });
  REQUIRE_FALSE(ok.aborted);
  const auto ok_threads = test::run_in_child([] { good_schedule().check_invariants(3); });
  REQUIRE_FALSE(ok_threads.aborted);
  require_rejected([](Schedule& s) { first_op<SendRecvOp>(s, 0, Phase::forward)->send_tag = 99; },
                   "has no receive");
  require_rejected([](Schedule& s) { first_op<SendRecvOp>(s, 0, Phase::forward)->send.pop_back(); },
                   "message size differs between send and receive");
  require_rejected([](Schedule& s) { first_op<AllToAllOp>(s, 1, Phase::forward)->tag = 77; },
                   "is not issued by every group member");
  require_rejected([](Schedule& s) { first_op<AttnFwdBlockOp>(s, 0, Phase::forward)->q_rows.count = 100; },
                   "rows beyond buffer");
  require_rejected([](Schedule& s) { s.ranks[0].ops[5].deps.push_back(7); },
                   "dependency must point to an earlier op");
  require_rejected(
      [](Schedule& s) {
        for (auto& op : s.ranks[0].ops)
          if (op.kind() == OpKind::attn_fwd_block) op.stream = Stream::comm;
      },
      "compute op on the comm stream");
  require_rejected(
      [](Schedule& s) {
        for (auto& op : s.ranks[0].ops)
          if (op.kind() == OpKind::send_recv) op.stream = Stream::compute;
      },
      "communication must run on the comm stream");
  require_rejected(
      [](Schedule& s) {
        // Free the forward's softmax_lse right after it is created: later ops use a dead buffer.
        auto& r = s.ranks[0];
        const BufferId lse = r.buffer("softmax_lse");
        for (size_t i = 0; i < r.ops.size(); ++i)
          if (auto* a = std::get_if<AllocOp>(&r.ops[i].payload); a && a->buffer == lse) {
            Op f;
            f.payload = FreeOp{lse};
            r.ops.insert(r.ops.begin() + static_cast<std::ptrdiff_t>(i) + 1, f);
            break;
          }
      },
      "while not live");
  // A section label its rows and mask contradict (the swapped-sections bug of a builder that swaps labels only).
  require_rejected(
      [](Schedule& s) {
        for (auto& op : s.ranks[0].ops)
          if (auto* a = std::get_if<AttnFwdBlockOp>(&op.payload); a && a->section == Section::upper) {
            a->section = Section::lower;
            break;
          }
      },
      "section lower does not match the block's rows and mask");
  // Token lists: one per buffer row in an attention schedule; a layer schedule (timing only) has none.
  require_rejected([](Schedule& s) { s.ranks[1].inputs.front().tokens.pop_back(); },
                   "input binding 'q' token count != buffer rows (none in a layer schedule)");
  require_rejected([](Schedule& s) { s.ranks[0].outputs.back().tokens.clear(); },
                   "token count != buffer rows (none in a layer schedule)");
  require_rejected(
      [](Schedule& s) {
        s.kind = ScheduleKind::layer;  // kept its attention bindings, tokens included
      },
      "input binding 'q' token count != buffer rows (none in a layer schedule)");
}

TEST_CASE("core: section_matches checks a block's section against its rows and mask", "[core][schedule]") {
  // Chunk C = 4: the q and kv buffers of a ring step hold 2C = 8 rows (docs/algorithm.md §4.2).
  const RowRange all{0, 8}, first_half{0, 4}, second_half{4, 4};
  CHECK(section_matches(Section::diagonal, BlockMask::causal, all, all, 8, 8));
  CHECK_FALSE(section_matches(Section::diagonal, BlockMask::none, all, all, 8, 8));
  CHECK(section_matches(Section::lower, BlockMask::none, all, first_half, 8, 8));
  CHECK_FALSE(section_matches(Section::lower, BlockMask::none, all, second_half, 8, 8));
  CHECK_FALSE(section_matches(Section::lower, BlockMask::causal, all, first_half, 8, 8));
  CHECK(section_matches(Section::upper, BlockMask::none, second_half, all, 8, 8));
  CHECK_FALSE(section_matches(Section::upper, BlockMask::none, first_half, all, 8, 8));
  CHECK(section_matches(Section::full, BlockMask::none, first_half, all, 8, 8));  // all_gather: one q chunk
  CHECK_FALSE(section_matches(Section::full, BlockMask::none, all, first_half, 8, 8));
  CHECK(section_matches(Section::full, BlockMask::none, all, RowRange{4, 0}, 8, 8));  // an empty block
  CHECK(section_matches(Section::diagonal, BlockMask::causal_bottom_right, first_half, RowRange{0, 6}, 8, 16));
}

TEST_CASE("core: check_invariants rejects a repeated receive, and a schedule broken in two ranks on any thread count",
          "[core][schedule]") {
  // Rank 0's first two receives come from its ring predecessor: giving the second the first's tag repeats the
  // (src, dst, tag) of a receive.
  require_rejected(
      [](Schedule& s) {
        const std::vector<SendRecvOp*> recvs = message_sides(s, 0, false);
        REQUIRE(recvs.size() >= 2);
        REQUIRE(recvs[0]->recv_peer == recvs[1]->recv_peer);
        recvs[1]->recv_tag = recvs[0]->recv_tag;
      },
      ": duplicate receive");
  // Two ranks broken in their own programs: one thread reports the first in rank order (rank 0's); three
  // threads report one of the two, whichever a thread reaches first.
  Schedule s = good_schedule();
  first_op<AttnFwdBlockOp>(s, 0, Phase::forward)->q_rows.count = 100;
  s.ranks[2].ops[5].deps.push_back(7);
  const auto one = test::run_in_child([&] { s.check_invariants(1); });
  REQUIRE(one.aborted);
  REQUIRE(one.stderr_text.find("rank 0 op") != std::string::npos);
  REQUIRE(one.stderr_text.find("rows beyond buffer") != std::string::npos);
  const auto three = test::run_in_child([&] { s.check_invariants(3); });
  INFO("stderr: " << three.stderr_text);
  REQUIRE(three.aborted);
  REQUIRE((three.stderr_text.find("rows beyond buffer") != std::string::npos ||
           three.stderr_text.find("dependency must point to an earlier op") != std::string::npos));
}

TEST_CASE("core: check_invariants names a repeated message at its op and the smallest unmatched send",
          "[core][schedule]") {
  // Rank 0's first two forward sends go to its ring successor: giving the second the first's tag repeats the
  // (src, dst, tag) of a message.
  require_rejected(
      [](Schedule& s) {
        const std::vector<SendRecvOp*> sends = message_sides(s, 0, true);
        REQUIRE(sends.size() >= 2);
        REQUIRE(sends[0]->send_peer == sends[1]->send_peer);
        sends[1]->send_tag = sends[0]->send_tag;
      },
      ": duplicate message");
  // Two sends without a receive (ranks 1 and 0, same new tag): the report names the smaller key, rank 0's.
  Schedule probe = good_schedule();
  const int64_t peer0 = first_op<SendRecvOp>(probe, 0, Phase::forward)->send_peer;
  require_rejected(
      [](Schedule& s) {
        first_op<SendRecvOp>(s, 1, Phase::forward)->send_tag = 99;
        first_op<SendRecvOp>(s, 0, Phase::forward)->send_tag = 99;
      },
      "message 0->" + std::to_string(peer0) + " tag 99 has no receive");
}
