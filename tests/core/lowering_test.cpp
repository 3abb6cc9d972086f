// The lowering of communication ops and CopyOp to copy segments (lowering.hpp): each op kind against a
// hand-computed segment list on a tiny schedule, the values the segments move, and the lowered byte counts the
// simulator uses against the sums over segments for every builder variant.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <variant>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/lowering.hpp"
#include "hcpsim/core/program_walker.hpp"
#include "hcpsim/core/schedule_builder.hpp"

using namespace hcpsim;

namespace {

/// (src_rank, src_offset, dst_offset, accumulate) of a segment, and its shared shape fields checked separately.
struct Expected {
  int64_t src_rank, src_offset, dst_offset;
  bool accumulate = false;
};

void require_segments(const std::vector<CopySegment>& segs, const std::vector<Expected>& want, int64_t rows,
                      int64_t run) {
  REQUIRE(segs.size() == want.size());
  for (size_t i = 0; i < segs.size(); ++i) {
    INFO("segment " << i);
    REQUIRE(segs[i].src_rank == want[i].src_rank);
    REQUIRE(segs[i].src_offset == want[i].src_offset);
    REQUIRE(segs[i].dst_offset == want[i].dst_offset);
    REQUIRE(segs[i].accumulate == want[i].accumulate);
    REQUIRE(segs[i].batch == 1);
    REQUIRE(segs[i].rows == rows);
    REQUIRE(segs[i].run_elements == run);
  }
}

/// `ranks` ranks, each with buffers `in` and `out` and the one collective op `payload(rank)`.
template <typename MakeOp>
Schedule collective_schedule(int64_t ranks, BufferDecl in, BufferDecl out, MakeOp&& payload) {
  Schedule s;
  for (int64_t r = 0; r < ranks; ++r) {
    RankProgram p;
    p.rank = p.cp_rank = r;
    p.buffers = {in, out};
    Op op;
    op.payload = payload(r);
    op.stream = Stream::comm;
    op.label = "collective";
    p.ops = {op};
    s.ranks.push_back(p);
  }
  return s;
}

/// The group of a collective op.
const std::vector<int64_t>& group_of(const Op& op) {
  if (const auto* a = std::get_if<AllToAllOp>(&op.payload)) return a->group;
  if (const auto* g = std::get_if<AllGatherOp>(&op.payload)) return g->group;
  return std::get<ReduceScatterOp>(op.payload).group;
}

std::vector<OpRef> first_ops(int64_t ranks) {
  std::vector<OpRef> batch;
  for (int64_t r = 0; r < ranks; ++r) batch.push_back(OpRef{r, 0});
  return batch;
}

}  // namespace

TEST_CASE("core lowering: A=2 all-to-all scatter_heads of a [1,4,2,1] buffer", "[core][lowering]") {
  const std::vector<int64_t> before = CpLayout::chunk_ids_before_attn(2);
  REQUIRE(before == std::vector<int64_t>{0, 2, 3, 1});
  const Schedule s = collective_schedule(2, BufferDecl{"in", 1, 4, 2, 1, Dtype::bf16},
                                         BufferDecl{"out", 1, 8, 1, 1, Dtype::bf16}, [&](int64_t) {
                                           return AllToAllOp{AllToAllOp::Direction::scatter_heads, {0, 1}, before, 0,
                                                             1, 5};
                                         });
  for (int64_t j = 0; j < 2; ++j) {
    INFO("member " << j);
    const std::vector<CopySegment> segs = incoming_segments(s, first_ops(2), OpRef{j, 0});
    // Output half-chunk k (c = 2 rows) = concatenated half-chunk before[k] = member before[k]/2's rows
    // [(before[k] % 2)·2, +2) at head j: element offset (row·2 + j); output rows [2k, 2k + 2).
    require_segments(segs, {{0, 0 + j, 0}, {1, 0 + j, 2}, {1, 4 + j, 4}, {0, 4 + j, 6}}, 2, 1);
    for (const CopySegment& seg : segs) {
      REQUIRE(seg.src_batch_stride == 8);
      REQUIRE(seg.src_row_stride == 2);
      REQUIRE(seg.dst_batch_stride == 8);
      REQUIRE(seg.dst_row_stride == 1);
      REQUIRE(seg.dst_rank == j);
      REQUIRE(seg.src == 0);
      REQUIRE(seg.dst == 1);
    }
    // Values: rank r's input (row, head) = 100r + 10row + head; zigzag rank 0 holds chunks 0, 3 and rank 1
    // chunks 1, 2, so head j comes out in natural order 0, 1, 2, 3 (two rows each).
    std::vector<std::vector<double>> in(2);
    for (int r = 0; r < 2; ++r)
      for (int row = 0; row < 4; ++row)
        for (int h = 0; h < 2; ++h) in[static_cast<size_t>(r)].push_back(100.0 * r + 10.0 * row + h);
    std::vector<double> out(8, -1);
    for (const CopySegment& seg : segs)
      apply_copy_segment(seg, in[static_cast<size_t>(seg.src_rank)].data(), out.data(), Dtype::fp64);
    const auto h = static_cast<double>(j);
    REQUIRE(out == std::vector<double>{0 + h, 10 + h, 100 + h, 110 + h, 120 + h, 130 + h, 20 + h, 30 + h});
  }
}

TEST_CASE("core lowering: A=2 all-to-all gather_heads back to [1,4,2,1]", "[core][lowering]") {
  const std::vector<int64_t> after = CpLayout::chunk_ids_after_attn(2);
  REQUIRE(after == std::vector<int64_t>{0, 3, 1, 2});
  const Schedule s = collective_schedule(2, BufferDecl{"in", 1, 8, 1, 1, Dtype::bf16},
                                         BufferDecl{"out", 1, 4, 2, 1, Dtype::bf16}, [&](int64_t) {
                                           return AllToAllOp{AllToAllOp::Direction::gather_heads, {0, 1}, after, 0, 1,
                                                             6};
                                         });
  // Member 0 takes slots (0, 1) = input chunks after[0] = 0, after[1] = 3 (c = 2 rows) of every member a into its
  // rows [0, 2) and [2, 4) at head a: destination offset row·2 + a.
  require_segments(incoming_segments(s, first_ops(2), OpRef{0, 0}), {{0, 0, 0}, {0, 6, 4}, {1, 0, 1}, {1, 6, 5}}, 2,
                   1);
  // Member 1: slots (2, 3) = chunks after[2] = 1, after[3] = 2.
  const std::vector<CopySegment> segs = incoming_segments(s, first_ops(2), OpRef{1, 0});
  require_segments(segs, {{0, 2, 0}, {0, 4, 4}, {1, 2, 1}, {1, 4, 5}}, 2, 1);
  REQUIRE(segs[0].src_row_stride == 1);
  REQUIRE(segs[0].dst_row_stride == 2);
}

TEST_CASE("core lowering: send/recv cuts the byte stream at every buffer boundary of either side", "[core][lowering]") {
  Schedule s;
  for (int64_t r = 0; r < 2; ++r) {
    RankProgram p;
    p.rank = p.cp_rank = r;
    p.buffers = {BufferDecl{"x", 1, 2, 1, 2, Dtype::bf16}, BufferDecl{"y", 1, 2, 1, 2, Dtype::bf16},
                 BufferDecl{"u", 1, 1, 1, 2, Dtype::bf16}, BufferDecl{"w", 1, 3, 1, 2, Dtype::bf16}};
    Op op;
    op.payload = r == 0 ? SendRecvOp{1, -1, {0, 1}, {}, 3, 0} : SendRecvOp{-1, 0, {}, {2, 3}, 0, 3};
    op.stream = Stream::comm;
    p.ops = {op};
    s.ranks.push_back(p);
  }
  // [x(4), y(4)] onto [u(2), w(6)]: x[0, 2) → u, x[2, 4) → w[0, 2), y → w[2, 6).
  const std::vector<CopySegment> segs = incoming_segments(s, first_ops(2), OpRef{1, 0});
  REQUIRE(segs.size() == 3);
  const std::vector<std::pair<BufferId, BufferId>> buffers{{0, 2}, {0, 3}, {1, 3}};
  const std::vector<Expected> want{{0, 0, 0}, {0, 2, 0}, {0, 0, 2}};
  const std::vector<int64_t> runs{2, 2, 4};
  for (size_t i = 0; i < segs.size(); ++i) {
    REQUIRE(segs[i].src == buffers[i].first);
    REQUIRE(segs[i].dst == buffers[i].second);
    REQUIRE(segs[i].src_offset == want[i].src_offset);
    REQUIRE(segs[i].dst_offset == want[i].dst_offset);
    REQUIRE(segs[i].run_elements == runs[i]);
    REQUIRE(segs[i].elements() == runs[i]);
    REQUIRE(segs[i].dst_rank == 1);
    REQUIRE(segment_bytes(s, segs[i]) == 2 * runs[i]);
  }
  REQUIRE(incoming_segments(s, first_ops(2), OpRef{0, 0}).empty());  // the send-only side receives nothing
  const auto& send = std::get<SendRecvOp>(s.ranks[0].ops[0].payload);
  const auto& recv = std::get<SendRecvOp>(s.ranks[1].ops[0].payload);
  REQUIRE(message_send_bytes(s.ranks[0], send) == 16);
  REQUIRE(message_recv_bytes(s.ranks[1], recv) == 16);
  REQUIRE(message_recv_bytes(s.ranks[0], send) == 0);
}

TEST_CASE("core lowering: all-gather and reduce-scatter over two members", "[core][lowering]") {
  const std::vector<int64_t> before = CpLayout::chunk_ids_before_attn(2);
  const std::vector<int64_t> after = CpLayout::chunk_ids_after_attn(2);
  const Schedule ag = collective_schedule(2, BufferDecl{"in", 1, 2, 1, 1, Dtype::bf16},
                                          BufferDecl{"out", 1, 4, 1, 1, Dtype::bf16},
                                          [&](int64_t) { return AllGatherOp{{0, 1}, before, 0, 1, 7}; });
  // Output half-chunk k (c = 1 row) = member before[k]/2's row before[k] % 2.
  for (int64_t j = 0; j < 2; ++j)
    require_segments(incoming_segments(ag, first_ops(2), OpRef{j, 0}), {{0, 0, 0}, {1, 0, 1}, {1, 1, 2}, {0, 1, 3}}, 1,
                     1);
  REQUIRE(collective_peer_bytes(ag.ranks[0], ag.ranks[0].ops[0]) == 4);  // the whole bf16 input

  const Schedule rs = collective_schedule(2, BufferDecl{"in", 1, 4, 1, 1, Dtype::fp32},
                                          BufferDecl{"out", 1, 2, 1, 1, Dtype::fp32},
                                          [&](int64_t) { return ReduceScatterOp{{0, 1}, after, 0, 1, 8}; });
  // Member j's half h = Σ over members (member order, the first assigning) of input chunk after[2j + h] (c = 1).
  require_segments(incoming_segments(rs, first_ops(2), OpRef{0, 0}),
                   {{0, 0, 0, false}, {1, 0, 0, true}, {0, 3, 1, false}, {1, 3, 1, true}}, 1, 1);
  const std::vector<CopySegment> segs = incoming_segments(rs, first_ops(2), OpRef{1, 0});
  require_segments(segs, {{0, 1, 0, false}, {1, 1, 0, true}, {0, 2, 1, false}, {1, 2, 1, true}}, 1, 1);
  REQUIRE(collective_peer_bytes(rs.ranks[1], rs.ranks[1].ops[0]) == 8);  // half of [1, 4, 1, 1] fp32
  // The sums round to the accumulator format: 1 + 2⁻⁹ is below bf16's spacing at 1 and is lost.
  const std::vector<std::vector<double>> in{{0, 1, 2, 3}, {0, 0x1p-9, 5, 7}};
  std::vector<double> out(2, -1);
  for (const CopySegment& seg : segs)
    apply_copy_segment(seg, in[static_cast<size_t>(seg.src_rank)].data(), out.data(), Dtype::bf16);
  REQUIRE(out == std::vector<double>{1, 7});
  for (const CopySegment& seg : segs)
    apply_copy_segment(seg, in[static_cast<size_t>(seg.src_rank)].data(), out.data(), Dtype::fp64);
  REQUIRE(out == std::vector<double>{1 + 0x1p-9, 7});
}

TEST_CASE("core lowering: a CopyOp is one strided segment within its rank", "[core][lowering]") {
  RankProgram p;
  p.rank = p.cp_rank = 3;
  p.buffers = {BufferDecl{"dst", 2, 4, 1, 3, Dtype::fp32}, BufferDecl{"src", 2, 6, 1, 3, Dtype::fp32}};
  const CopySegment seg = copy_op_segment(p, 3, CopyOp{0, 1, RowRange{1, 2}, RowRange{2, 2}, true});
  // (src_rank, src, dst_rank, dst), offsets and strides (src then dst), (batch, rows, run), accumulate.
  const std::vector<int64_t> fields{seg.src_rank,         seg.src,        seg.dst_rank,           seg.dst,
                                    seg.src_offset,       seg.src_batch_stride, seg.src_row_stride, seg.dst_offset,
                                    seg.dst_batch_stride, seg.dst_row_stride,   seg.batch,          seg.rows,
                                    seg.run_elements,     seg.accumulate ? 1 : 0};
  REQUIRE(fields == std::vector<int64_t>{3, 1, 3, 0, 6, 18, 3, 3, 12, 3, 2, 2, 3, 1});
}

TEST_CASE("core lowering: the lowered byte counts equal the sums over segments for every builder", "[core][lowering]") {
  struct Case {
    CpCommType type;
    int64_t A, P;
  };
  const std::vector<Case> cases{{CpCommType::p2p, 1, 2},     {CpCommType::p2p, 1, 3},     {CpCommType::a2a, 2, 1},
                                {CpCommType::a2a, 4, 1},     {CpCommType::a2a_p2p, 2, 2}, {CpCommType::a2a_p2p, 2, 3},
                                {CpCommType::all_gather, 1, 2}, {CpCommType::all_gather, 1, 4}};
  for (const Case& c : cases) {
    INFO("cp_comm_type " << to_string(c.type) << " A " << c.A << " P " << c.P);
    const int64_t S = 8 * c.A * c.P;
    const Schedule s =
        build_schedule(c.type, CpLayout(c.A, c.P, S), test::attention_shape(1, S, 2 * c.A, c.A, 4, 2, true));
    int64_t messages = 0, collectives = 0;
    for (const WalkStep& step : walk_program(s)) {
      if (!step.is_batch) continue;
      for (const OpRef& me : step.members) {
        const std::vector<CopySegment> segs = incoming_segments(s, step.members, me);
        const Op& op = s.ranks[static_cast<size_t>(me.rank)].ops[static_cast<size_t>(me.op)];
        if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
          int64_t bytes = 0;
          for (const CopySegment& seg : segs) bytes += segment_bytes(s, seg);
          REQUIRE(bytes == message_recv_bytes(s.ranks[static_cast<size_t>(me.rank)], *sr));
          if (sr->recv_peer < 0) continue;
          ++messages;
          const auto sender = std::find_if(step.members.begin(), step.members.end(),
                                           [&](const OpRef& r) { return r.rank == sr->recv_peer; });
          const RankProgram& sp = s.ranks[static_cast<size_t>(sender->rank)];
          const auto& send = std::get<SendRecvOp>(sp.ops[static_cast<size_t>(sender->op)].payload);
          REQUIRE(bytes == message_send_bytes(sp, send));
          continue;
        }
        ++collectives;
        const std::vector<int64_t>& group = group_of(op);
        for (const OpRef& from : step.members) {  // what each member of my group sends me (itself included)
          if (std::find(group.begin(), group.end(), from.rank) == group.end()) continue;  // another group
          int64_t bytes = 0;
          for (const CopySegment& seg : segs)
            if (seg.src_rank == from.rank) bytes += segment_bytes(s, seg);
          const RankProgram& fp = s.ranks[static_cast<size_t>(from.rank)];
          REQUIRE(bytes == collective_peer_bytes(fp, fp.ops[static_cast<size_t>(from.op)]));
        }
      }
    }
    REQUIRE(messages + collectives > 0);
  }
}
