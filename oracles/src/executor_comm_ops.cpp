// The CPU executor's communication ops: send/recv messages, all-to-all head scatter/gather, all-gather and
// reduce-scatter along the sequence.

#include "executor_comm_ops.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "executor_rendezvous.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/precision.hpp"

namespace hcpsim::cpu_exec {

namespace {

/// A collective has met and moved its data: count it and complete it on the other members.
void finish_collective(ExecutorState& state, const RankState& st, const std::vector<RankState*>& members) {
  ++state.stats.all_to_alls;
  complete_on_other_members(state, st, members);
}

/// scatter_heads: member a's output half-chunk k = concatenated half-chunk chunk_order[k], where concatenated
/// half-chunk 2j+half = member j's input rows [half·c, (half+1)·c) at heads [a·h/A, (a+1)·h/A).
void scatter_heads(const std::vector<RankState*>& members, const std::string& where) {
  const auto group_size = static_cast<int64_t>(members.size());
  const auto& op0 = std::get<AllToAllOp>(members[0]->current().payload);
  const HostTensor& in0 = live_buffer(*members[0], op0.input, "a2a input");
  const int64_t s = in0.rows();
  const int64_t h = in0.heads();
  HCPSIM_ASSERT(s % 2 == 0, where + ": a2a input rows must be even");
  HCPSIM_ASSERT(h % group_size == 0, where + ": a2a input heads not divisible by A");
  const int64_t c = s / 2;
  const int64_t hl = h / group_size;
  for (int64_t a = 0; a < group_size; ++a) {
    RankState& dst_rank = *members[static_cast<size_t>(a)];
    const auto& op = std::get<AllToAllOp>(dst_rank.current().payload);
    HCPSIM_ASSERT(op.input != op.output, where + ": a2a input and output are the same buffer");
    HostTensor& out = live_buffer(dst_rank, op.output, "a2a output");
    HCPSIM_ASSERT(out.batch() == in0.batch(), where + ": a2a output batch");
    HCPSIM_ASSERT(out.rows() == group_size * s, where + ": a2a scatter output rows != A·s");
    HCPSIM_ASSERT(out.heads() == hl, where + ": a2a scatter output heads != h/A");
    HCPSIM_ASSERT(out.width() == in0.width(), where + ": a2a output width");
    for (int64_t k = 0; k < 2 * group_size; ++k) {
      const int64_t src_chunk = op.chunk_order[static_cast<size_t>(k)];
      HCPSIM_ASSERT(src_chunk >= 0 && src_chunk < 2 * group_size, where + ": chunk_order entry out of range");
      RankState& src_rank = *members[static_cast<size_t>(src_chunk / 2)];
      const auto& src_op = std::get<AllToAllOp>(src_rank.current().payload);
      const HostTensor& in = live_buffer(src_rank, src_op.input, "a2a input");
      HCPSIM_ASSERT(in.same_shape(in0), where + ": a2a members' inputs differ in shape");
      const int64_t src_row0 = (src_chunk % 2) * c;
      for (int64_t b = 0; b < in.batch(); ++b) {
        for (int64_t r = 0; r < c; ++r) {
          const double* src = in.data() + in.index(b, src_row0 + r, a * hl, 0);
          std::copy(src, src + hl * in.width(), out.data() + out.index(b, k * c + r, 0, 0));
        }
      }
    }
  }
}

/// gather_heads: on sender a, slot m = input half-chunk chunk_order[m]; slots (2j, 2j+1) go to member j, which
/// stores them as its rows [0, c) and [c, 2c) at heads [a·h/A, (a+1)·h/A).
void gather_heads(const std::vector<RankState*>& members, const std::string& where) {
  const auto group_size = static_cast<int64_t>(members.size());
  const auto& op0 = std::get<AllToAllOp>(members[0]->current().payload);
  const HostTensor& in0 = live_buffer(*members[0], op0.input, "a2a input");
  const int64_t hl = in0.heads();
  HCPSIM_ASSERT(in0.rows() % (2 * group_size) == 0, where + ": a2a gather input rows not divisible by 2A");
  const int64_t c = in0.rows() / (2 * group_size);
  for (int64_t j = 0; j < group_size; ++j) {
    RankState& dst_rank = *members[static_cast<size_t>(j)];
    const auto& op = std::get<AllToAllOp>(dst_rank.current().payload);
    HCPSIM_ASSERT(op.input != op.output, where + ": a2a input and output are the same buffer");
    HostTensor& out = live_buffer(dst_rank, op.output, "a2a output");
    HCPSIM_ASSERT(out.batch() == in0.batch(), where + ": a2a output batch");
    HCPSIM_ASSERT(out.rows() == 2 * c, where + ": a2a gather output rows != s (= 2c)");
    HCPSIM_ASSERT(out.heads() == group_size * hl, where + ": a2a gather output heads != A·(h/A)");
    HCPSIM_ASSERT(out.width() == in0.width(), where + ": a2a output width");
    for (int64_t a = 0; a < group_size; ++a) {
      RankState& src_rank = *members[static_cast<size_t>(a)];
      const auto& src_op = std::get<AllToAllOp>(src_rank.current().payload);
      const HostTensor& in = live_buffer(src_rank, src_op.input, "a2a input");
      HCPSIM_ASSERT(in.same_shape(in0), where + ": a2a members' inputs differ in shape");
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t src_chunk = src_op.chunk_order[static_cast<size_t>(2 * j + half)];
        HCPSIM_ASSERT(src_chunk >= 0 && src_chunk < 2 * group_size, where + ": chunk_order entry out of range");
        for (int64_t b = 0; b < in.batch(); ++b) {
          for (int64_t r = 0; r < c; ++r) {
            const double* src = in.data() + in.index(b, src_chunk * c + r, 0, 0);
            std::copy(src, src + hl * in.width(), out.data() + out.index(b, half * c + r, a * hl, 0));
          }
        }
      }
    }
  }
}

/// The inputs of all members of an AllGatherOp / ReduceScatterOp, in group order, after checking chunk_order's
/// range; the outputs may alias none of them and every input must have the first one's shape.
template <typename OpT>
std::vector<const HostTensor*> collective_inputs(const OpT& op, const std::vector<RankState*>& members,
                                                 const std::string& where) {
  const auto n = static_cast<int64_t>(op.group.size());
  for (int64_t k = 0; k < 2 * n; ++k) {
    const int64_t id = op.chunk_order[static_cast<size_t>(k)];
    HCPSIM_ASSERT(id >= 0 && id < 2 * n, where + ": chunk_order entry out of range");
  }
  std::vector<const HostTensor*> in(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    RankState& m = *members[static_cast<size_t>(j)];
    const auto& mop = std::get<OpT>(m.current().payload);
    HCPSIM_ASSERT(mop.input != mop.output, where + ": input and output are the same buffer");
    in[static_cast<size_t>(j)] = &live_buffer(m, mop.input, "collective input");
    HCPSIM_ASSERT(in[static_cast<size_t>(j)]->same_shape(*in[0]), where + ": members' inputs differ in shape");
  }
  return in;
}

}  // namespace

bool run_send_recv(ExecutorState& state, RankState& st, const SendRecvOp& op, const std::string& where,
                   bool& touched) {
  const int64_t me = st.program->cp_rank;
  const auto nranks = static_cast<int64_t>(state.ranks.size());
  if (!st.send_posted && op.send_peer >= 0) {
    HCPSIM_ASSERT(op.send_peer < nranks, where + ": send_peer out of range");
    HCPSIM_ASSERT(!op.send.empty(), where + ": send_peer set but no send buffers");
    std::vector<double> message = state.mailbox.blank_message();
    for (BufferId id : op.send) {
      const HostTensor& buf = live_buffer(st, id, "send");
      message.insert(message.end(), buf.values().begin(), buf.values().end());
    }
    state.mailbox.post(Mailbox::Key{me, op.send_peer, op.send_tag}, std::move(message));
    touched = true;
  }
  st.send_posted = true;
  if (op.recv_peer < 0) {
    HCPSIM_ASSERT(op.recv.empty(), where + ": recv buffers without recv_peer");
    return true;
  }
  HCPSIM_ASSERT(op.recv_peer < nranks, where + ": recv_peer out of range");
  const Mailbox::Key key{op.recv_peer, me, op.recv_tag};
  const std::vector<double>* message = state.mailbox.oldest(key);
  if (message == nullptr) return false;
  int64_t expected = 0;
  for (BufferId id : op.recv) expected += live_buffer(st, id, "recv").elements();
  HCPSIM_ASSERT(static_cast<int64_t>(message->size()) == expected,
                fmt::format("{}: message from cp_rank {} tag {} has {} elements, receive buffers {}", where,
                            op.recv_peer, op.recv_tag, message->size(), expected));
  auto pos = message->begin();
  for (BufferId id : op.recv) {
    HostTensor& buf = live_buffer(st, id, "recv");
    std::copy(pos, pos + buf.elements(), buf.data());
    pos += buf.elements();
  }
  ++state.stats.messages;
  state.stats.message_elements += expected;
  state.mailbox.pop_oldest(key);
  return true;
}

bool run_all_to_all(ExecutorState& state, RankState& st, const AllToAllOp& op, const std::string& where,
                    bool& touched) {
  std::vector<RankState*> members;
  if (!wait_for_group(state, st, where, touched, members)) return false;
  for (RankState* m : members)
    HCPSIM_ASSERT(std::get<AllToAllOp>(m->current().payload).direction == op.direction,
                  where + " vs " + op_text(*m, m->pc) + ": members disagree on the direction");
  if (op.direction == AllToAllOp::Direction::scatter_heads) {
    scatter_heads(members, where);
  } else {
    gather_heads(members, where);
  }
  finish_collective(state, st, members);
  return true;
}

bool run_all_gather(ExecutorState& state, RankState& st, const AllGatherOp& op, const std::string& where,
                    bool& touched) {
  std::vector<RankState*> members;
  if (!wait_for_group(state, st, where, touched, members)) return false;
  const std::vector<const HostTensor*> in = collective_inputs(op, members, where);
  const auto n = static_cast<int64_t>(op.group.size());
  const HostTensor& in0 = *in[0];
  const int64_t row_elems = in0.heads() * in0.width();
  HCPSIM_ASSERT(in0.rows() % 2 == 0, where + ": all_gather input rows must be even");
  const int64_t c = in0.rows() / 2;
  for (int64_t j = 0; j < n; ++j) {
    RankState& m = *members[static_cast<size_t>(j)];
    HostTensor& out = live_buffer(m, std::get<AllGatherOp>(m.current().payload).output, "all_gather output");
    HCPSIM_ASSERT(out.batch() == in0.batch() && out.rows() == 2 * n * c && out.heads() == in0.heads() &&
                      out.width() == in0.width(),
                  where + ": all_gather output is not [b, n·s, h, w]");
    for (int64_t k = 0; k < 2 * n; ++k) {
      const int64_t src = op.chunk_order[static_cast<size_t>(k)];
      const HostTensor& from = *in[static_cast<size_t>(src / 2)];
      for (int64_t b = 0; b < in0.batch(); ++b) {
        const double* p = from.data() + from.index(b, (src % 2) * c, 0, 0);
        std::copy(p, p + c * row_elems, out.data() + out.index(b, k * c, 0, 0));
      }
    }
  }
  finish_collective(state, st, members);
  return true;
}

bool run_reduce_scatter(ExecutorState& state, RankState& st, const ReduceScatterOp& op, const std::string& where,
                        bool& touched) {
  std::vector<RankState*> members;
  if (!wait_for_group(state, st, where, touched, members)) return false;
  const std::vector<const HostTensor*> in = collective_inputs(op, members, where);
  const auto n = static_cast<int64_t>(op.group.size());
  const HostTensor& in0 = *in[0];
  const int64_t row_elems = in0.heads() * in0.width();
  HCPSIM_ASSERT(in0.rows() % (2 * n) == 0, where + ": reduce_scatter input rows not divisible by 2n");
  const int64_t c = in0.rows() / (2 * n);
  for (int64_t j = 0; j < n; ++j) {
    RankState& m = *members[static_cast<size_t>(j)];
    HostTensor& out = live_buffer(m, std::get<ReduceScatterOp>(m.current().payload).output, "reduce_scatter output");
    HCPSIM_ASSERT(out.batch() == in0.batch() && out.rows() == 2 * c && out.heads() == in0.heads() &&
                      out.width() == in0.width(),
                  where + ": reduce_scatter output is not [b, s, h, w]");
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t src = op.chunk_order[static_cast<size_t>(2 * j + half)];
      for (int64_t b = 0; b < in0.batch(); ++b) {
        double* d = out.data() + out.index(b, half * c, 0, 0);
        for (int64_t a = 0; a < n; ++a) {  // member order: deterministic
          const HostTensor& from = *in[static_cast<size_t>(a)];
          const double* p = from.data() + from.index(b, src * c, 0, 0);
          for (int64_t e = 0; e < c * row_elems; ++e)
            d[e] = a == 0 ? p[e] : round_to_dtype(d[e] + p[e], state.acc_dtype);
        }
      }
    }
  }
  finish_collective(state, st, members);
  return true;
}

}  // namespace hcpsim::cpu_exec
