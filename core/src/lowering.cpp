// Lowering of communication ops and CopyOp to copy segments (lowering.hpp), and their byte counts.

#include "hcpsim/core/lowering.hpp"

#include <algorithm>
#include <variant>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

namespace {

const RankProgram& program_of(const Schedule& s, int64_t rank) {
  HCPSIM_ASSERT(rank >= 0 && static_cast<size_t>(rank) < s.ranks.size(), "lowering: rank out of range");
  return s.ranks[static_cast<size_t>(rank)];
}

const BufferDecl& decl_of(const RankProgram& prog, BufferId id) {
  HCPSIM_ASSERT(id >= 0 && static_cast<size_t>(id) < prog.buffers.size(),
                "lowering: cp_rank " + std::to_string(prog.cp_rank) + " buffer id " + std::to_string(id) +
                    " out of range");
  return prog.buffers[static_cast<size_t>(id)];
}

const BufferDecl& decl_of(const Schedule& s, int64_t rank, BufferId id) { return decl_of(program_of(s, rank), id); }

const Op& op_at(const Schedule& s, const OpRef& r) {
  const RankProgram& prog = program_of(s, r.rank);
  HCPSIM_ASSERT(r.op >= 0 && static_cast<size_t>(r.op) < prog.ops.size(), "lowering: op index out of range");
  return prog.ops[static_cast<size_t>(r.op)];
}

/// A whole buffer as one contiguous run (for send/recv byte streams).
struct Span {
  BufferId buffer;
  int64_t elements;
};

/// Rows [row0, +rows) at heads [head0, +heads) of a [b, R, H, w] buffer as one side of a segment.
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

/// The collective op of `OpT` of member `rank` in `batch`, checked against `mine` (same group, tag, chunk order).
template <typename OpT>
const OpT& member_op(const Schedule& s, const std::vector<OpRef>& batch, int64_t rank, const OpT& mine,
                     const std::string& where) {
  const auto it = std::find_if(batch.begin(), batch.end(), [rank](const OpRef& r) { return r.rank == rank; });
  HCPSIM_ASSERT(it != batch.end(), where + ": member cp_rank " + std::to_string(rank) + " is not in the batch");
  const std::string pair = where + " vs " + op_ref_text(s, *it);
  const auto* theirs = std::get_if<OpT>(&op_at(s, *it).payload);
  HCPSIM_ASSERT(theirs != nullptr, pair + ": members disagree on the collective");
  HCPSIM_ASSERT(theirs->group == mine.group, pair + ": members disagree on the group");
  HCPSIM_ASSERT(theirs->chunk_order == mine.chunk_order, pair + ": members disagree on chunk_order");
  HCPSIM_ASSERT(theirs->tag == mine.tag, pair + ": members disagree on the tag");
  HCPSIM_ASSERT(theirs->seq_half_rows == mine.seq_half_rows, pair + ": members disagree on seq_half_rows");
  return *theirs;
}

/// My index in `group` after checking the group and chunk_order (2n entries, each in [0, 2n)).
int64_t checked_index(const std::vector<int64_t>& group, const std::vector<int64_t>& chunk_order, int64_t me,
                      const std::string& where) {
  const auto n = static_cast<int64_t>(group.size());
  HCPSIM_ASSERT(n >= 1, where + ": empty group");
  HCPSIM_ASSERT(std::count(group.begin(), group.end(), me) == 1, where + ": rank not once in its group");
  HCPSIM_ASSERT(static_cast<int64_t>(chunk_order.size()) == 2 * n, where + ": chunk_order must have 2n entries");
  for (int64_t id : chunk_order) HCPSIM_ASSERT(id >= 0 && id < 2 * n, where + ": chunk_order entry out of range");
  return std::find(group.begin(), group.end(), me) - group.begin();
}

/// What lowering a collective reads: my rank and index j in the group of n members, every member's input buffer
/// (group order; all of one shape, in) and my output.
struct MemberView {
  int64_t me = 0, j = 0, n = 0;
  const std::vector<int64_t>* group = nullptr;
  std::vector<BufferId> inputs;
  BufferId output = -1;
  const BufferDecl* in = nullptr;
  const BufferDecl* out = nullptr;

  /// `rows` rows of member a's input from (src_row, src_head) into my output at (dst_row, dst_head), every batch.
  [[nodiscard]] CopySegment from(int64_t a, int64_t src_row, int64_t src_head, int64_t dst_row, int64_t dst_head,
                                 int64_t rows, int64_t run, bool accumulate) const {
    return make_segment((*group)[static_cast<size_t>(a)], inputs[static_cast<size_t>(a)],
                        side_of(*in, src_row, src_head), me, output, side_of(*out, dst_row, dst_head), in->batch, rows,
                        run, accumulate);
  }
};

template <typename OpT>
MemberView member_view(const Schedule& s, const std::vector<OpRef>& batch, const OpRef& me, const OpT& mine,
                       const std::string& where) {
  MemberView v;
  v.me = me.rank;
  v.j = checked_index(mine.group, mine.chunk_order, me.rank, where);
  v.n = static_cast<int64_t>(mine.group.size());
  v.group = &mine.group;
  for (int64_t rank : mine.group) {
    const OpT& theirs = member_op(s, batch, rank, mine, where);
    HCPSIM_ASSERT(theirs.input != theirs.output, where + ": input and output are the same buffer");
    const BufferDecl& in = decl_of(s, rank, theirs.input);
    if (v.in == nullptr) v.in = &in;
    HCPSIM_ASSERT(in.batch == v.in->batch && in.rows == v.in->rows && in.heads == v.in->heads &&
                      in.width == v.in->width,
                  where + ": members' inputs differ in shape");
    v.inputs.push_back(theirs.input);
  }
  v.output = mine.output;
  v.out = &decl_of(s, me.rank, mine.output);
  HCPSIM_ASSERT(v.out->batch == v.in->batch && v.out->width == v.in->width, where + ": output batch or width");
  return v;
}

/// op.seq_half_rows of a sequence-gathering collective whose member buffer has `member_rows` rows, or one
/// sequence of member_rows / 2 rows (bshd).
std::vector<int64_t> gathered_seq_half_rows(const std::vector<int64_t>& seq_half_rows, int64_t member_rows,
                                            const std::string& where) {
  if (seq_half_rows.empty()) return {member_rows / 2};
  int64_t sum = 0;
  for (int64_t h : seq_half_rows) {
    HCPSIM_ASSERT(h >= 0, where + ": negative seq_half_rows entry");
    sum += h;
  }
  HCPSIM_ASSERT(2 * sum == member_rows, where + ": seq_half_rows do not add up to half the member's rows");
  return seq_half_rows;
}

std::vector<CopySegment> all_to_all_segments(const MemberView& v, const AllToAllOp& op, const std::string& where) {
  const BufferDecl& in = *v.in;
  const BufferDecl& out = *v.out;
  const int64_t A = v.n;
  std::vector<CopySegment> segs;
  if (op.direction == AllToAllOp::Direction::scatter_heads) {
    HCPSIM_ASSERT(in.rows % 2 == 0, where + ": a2a input rows must be even");
    HCPSIM_ASSERT(in.heads % A == 0, where + ": a2a input heads not divisible by A");
    const int64_t c = in.rows / 2;
    const int64_t hl = in.heads / A;
    HCPSIM_ASSERT(out.rows == A * in.rows && out.heads == hl, where + ": a2a scatter output is not [b, A·s, h/A, w]");
    const std::vector<int64_t> halves = gathered_seq_half_rows(op.seq_half_rows, in.rows, where);
    for (int64_t k = 0; k < 2 * A; ++k) {
      const int64_t chunk = op.chunk_order[static_cast<size_t>(k)];
      int64_t off = 0;  // Σ h of the earlier sequences
      for (int64_t h : halves) {
        segs.push_back(v.from(chunk / 2, (chunk % 2) * c + off, v.j * hl, (k / A) * A * c + A * off + (k % A) * h, 0,
                              h, hl * in.width, false));
        off += h;
      }
    }
    return segs;
  }
  HCPSIM_ASSERT(in.rows % (2 * A) == 0, where + ": a2a gather input rows not divisible by 2A");
  const int64_t c = in.rows / (2 * A);
  HCPSIM_ASSERT(out.rows == 2 * c && out.heads == A * in.heads, where + ": a2a gather output is not [b, s, h, w]");
  const std::vector<int64_t> halves = gathered_seq_half_rows(op.seq_half_rows, out.rows, where);
  // From member a: its slots (2j, 2j+1), slot m = its input half-chunk chunk_order[m] of every sequence, into my
  // rows of that half and sequence at heads [a·hl, (a+1)·hl).
  for (int64_t a = 0; a < A; ++a) {
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t chunk = op.chunk_order[static_cast<size_t>(2 * v.j + half)];
      int64_t off = 0;
      for (int64_t h : halves) {
        segs.push_back(v.from(a, (chunk / A) * A * c + A * off + (chunk % A) * h, 0, half * c + off, a * in.heads, h,
                              in.heads * in.width, false));
        off += h;
      }
    }
  }
  return segs;
}

std::vector<CopySegment> all_gather_segments(const MemberView& v, const AllGatherOp& op, const std::string& where) {
  const BufferDecl& in = *v.in;
  HCPSIM_ASSERT(in.rows % 2 == 0, where + ": all_gather input rows must be even");
  HCPSIM_ASSERT(v.out->rows == v.n * in.rows && v.out->heads == in.heads,
                where + ": all_gather output is not [b, n·s, h, w]");
  const int64_t c = in.rows / 2;
  const std::vector<int64_t> halves = gathered_seq_half_rows(op.seq_half_rows, in.rows, where);
  std::vector<CopySegment> segs;
  for (int64_t k = 0; k < 2 * v.n; ++k) {
    const int64_t chunk = op.chunk_order[static_cast<size_t>(k)];
    int64_t off = 0;
    for (int64_t h : halves) {
      segs.push_back(v.from(chunk / 2, (chunk % 2) * c + off, 0, 2 * v.n * off + k * h, 0, h, in.heads * in.width,
                            false));
      off += h;
    }
  }
  return segs;
}

std::vector<CopySegment> reduce_scatter_segments(const MemberView& v, const ReduceScatterOp& op,
                                                 const std::string& where) {
  const BufferDecl& in = *v.in;
  HCPSIM_ASSERT(in.rows % (2 * v.n) == 0, where + ": reduce_scatter input rows not divisible by 2n");
  const int64_t c = in.rows / (2 * v.n);
  HCPSIM_ASSERT(v.out->rows == 2 * c && v.out->heads == in.heads,
                where + ": reduce_scatter output is not [b, s, h, w]");
  const std::vector<int64_t> halves = gathered_seq_half_rows(op.seq_half_rows, v.out->rows, where);
  std::vector<CopySegment> segs;
  for (int64_t half = 0; half < 2; ++half) {
    const int64_t chunk = op.chunk_order[static_cast<size_t>(2 * v.j + half)];
    int64_t off = 0;
    for (int64_t h : halves) {
      for (int64_t a = 0; a < v.n; ++a)  // member order: deterministic sums, the first assigns
        segs.push_back(v.from(a, 2 * v.n * off + chunk * h, 0, half * c + off, 0, h, in.heads * in.width, a > 0));
      off += h;
    }
  }
  return segs;
}

int64_t buffers_bytes(const RankProgram& program, const IndexList& ids) {
  int64_t bytes = 0;
  for (BufferId id : ids) bytes += decl_of(program, id).size_bytes();
  return bytes;
}

}  // namespace

std::string op_ref_text(const Schedule& schedule, const OpRef& ref) {
  const Op& op = op_at(schedule, ref);
  return "cp_rank " + std::to_string(program_of(schedule, ref.rank).cp_rank) + " op #" + std::to_string(ref.op) +
         " " + to_string(op.kind()) + " '" + op.label + "'";
}

std::vector<CopySegment> message_segments(const Schedule& s, const OpRef& sender, const OpRef& receiver) {
  const auto* send = std::get_if<SendRecvOp>(&op_at(s, sender).payload);
  const auto* recv = std::get_if<SendRecvOp>(&op_at(s, receiver).payload);
  HCPSIM_ASSERT(send != nullptr && recv != nullptr, "message_segments: both ends must be send_recv ops");
  for (BufferId id : recv->recv)
    HCPSIM_ASSERT(std::find(recv->send.begin(), recv->send.end(), id) == recv->send.end(),
                  op_ref_text(s, receiver) + ": receives into a buffer it also sends");
  std::vector<Span> from, to;
  int64_t total_from = 0, total_to = 0;
  for (BufferId id : send->send) {
    from.push_back({id, decl_of(s, sender.rank, id).elements()});
    total_from += from.back().elements;
  }
  for (BufferId id : recv->recv) {
    to.push_back({id, decl_of(s, receiver.rank, id).elements()});
    total_to += to.back().elements;
  }
  if (total_from != total_to)
    throw InputError(SourceLoc{}, "schedule",
                     "message from " + op_ref_text(s, sender) + " to " + op_ref_text(s, receiver) + " carries " +
                         std::to_string(total_from) + " elements but the receive buffers hold " +
                         std::to_string(total_to),
                     "the schedule is inconsistent; rebuild it with build_schedule");
  std::vector<CopySegment> segs;
  size_t i = 0, j = 0;
  int64_t off_i = 0, off_j = 0;
  while (i < from.size() && j < to.size()) {
    const int64_t n = std::min(from[i].elements - off_i, to[j].elements - off_j);
    if (n > 0)
      segs.push_back(make_segment(sender.rank, from[i].buffer, Side{off_i, 0, 0}, receiver.rank, to[j].buffer,
                                  Side{off_j, 0, 0}, 1, 1, n, false));
    off_i += n;
    off_j += n;
    if (off_i == from[i].elements) { ++i; off_i = 0; }
    if (off_j == to[j].elements) { ++j; off_j = 0; }
  }
  return segs;
}

std::vector<CopySegment> collective_segments(const Schedule& s, const std::vector<OpRef>& batch, const OpRef& me) {
  const Op& op = op_at(s, me);
  const std::string where = op_ref_text(s, me);
  if (const auto* a2a = std::get_if<AllToAllOp>(&op.payload)) {
    for (int64_t rank : a2a->group)
      HCPSIM_ASSERT(member_op(s, batch, rank, *a2a, where).direction == a2a->direction,
                    where + ": members disagree on the direction");
    return all_to_all_segments(member_view(s, batch, me, *a2a, where), *a2a, where);
  }
  if (const auto* ag = std::get_if<AllGatherOp>(&op.payload))
    return all_gather_segments(member_view(s, batch, me, *ag, where), *ag, where);
  const auto* rs = std::get_if<ReduceScatterOp>(&op.payload);
  HCPSIM_ASSERT(rs != nullptr, where + ": not a collective");
  return reduce_scatter_segments(member_view(s, batch, me, *rs, where), *rs, where);
}

std::vector<CopySegment> incoming_segments(const Schedule& s, const std::vector<OpRef>& batch, const OpRef& me) {
  const Op& op = op_at(s, me);
  const auto* sr = std::get_if<SendRecvOp>(&op.payload);
  if (sr == nullptr) return collective_segments(s, batch, me);
  if (sr->recv_peer < 0) return {};
  const auto it = std::find_if(batch.begin(), batch.end(), [&](const OpRef& r) { return r.rank == sr->recv_peer; });
  HCPSIM_ASSERT(it != batch.end(), op_ref_text(s, me) + ": its sender is not in the batch");
  return message_segments(s, *it, me);
}

CopySegment copy_op_segment(const RankProgram& program, int64_t rank, const CopyOp& op) {
  const BufferDecl& dd = decl_of(program, op.dst);
  const BufferDecl& sd = decl_of(program, op.src);
  return make_segment(rank, op.src, side_of(sd, op.src_rows.begin, 0), rank, op.dst, side_of(dd, op.dst_rows.begin, 0),
                      dd.batch, op.dst_rows.count, dd.heads * dd.width, op.accumulate);
}

int64_t segment_bytes(const Schedule& schedule, const CopySegment& segment) {
  return segment.elements() * dtype_size_bytes(decl_of(schedule, segment.src_rank, segment.src).dtype);
}

int64_t message_send_bytes(const RankProgram& program, const SendRecvOp& op) {
  return op.send_peer < 0 ? 0 : buffers_bytes(program, op.send);
}

int64_t message_recv_bytes(const RankProgram& program, const SendRecvOp& op) {
  return op.recv_peer < 0 ? 0 : buffers_bytes(program, op.recv);
}

int64_t collective_peer_bytes(const RankProgram& program, const Op& op) {
  BufferId input = -1;
  int64_t parts = 1;
  if (const auto* a = std::get_if<AllToAllOp>(&op.payload)) {
    input = a->input;
    parts = static_cast<int64_t>(a->group.size());
  } else if (const auto* g = std::get_if<AllGatherOp>(&op.payload)) {
    input = g->input;  // every other member receives the whole input
  } else if (const auto* r = std::get_if<ReduceScatterOp>(&op.payload)) {
    input = r->input;
    parts = static_cast<int64_t>(r->group.size());
  }
  HCPSIM_ASSERT(input >= 0, "collective_peer_bytes: '" + op.label + "' is not a collective with an input");
  const int64_t bytes = decl_of(program, input).size_bytes();
  HCPSIM_ASSERT(parts >= 1 && bytes % parts == 0,
                "cp rank " + std::to_string(program.cp_rank) + " " + to_string(op.kind()) + " '" + op.label +
                    "': input of " + std::to_string(bytes) + " B does not split into " + std::to_string(parts) +
                    " equal parts");
  return bytes / parts;
}

}  // namespace hcpsim
