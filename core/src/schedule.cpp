#include "hcpsim/core/schedule.hpp"

#include <map>
#include <tuple>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

std::string to_string(Section s) {
  switch (s) {
    case Section::diagonal: return "diagonal";
    case Section::lower: return "lower";
    case Section::upper: return "upper";
    case Section::full: return "full";
  }
  return "?";
}

std::string to_string(Phase p) { return p == Phase::forward ? "forward" : "backward"; }

std::string to_string(Stream s) {
  switch (s) {
    case Stream::compute: return "compute";
    case Stream::cp: return "cp_stream";
    case Stream::comm: return "comm";
  }
  return "?";
}

std::string to_string(OpKind k) {
  switch (k) {
    case OpKind::alloc: return "alloc";
    case OpKind::free: return "free";
    case OpKind::all_to_all: return "all_to_all";
    case OpKind::send_recv: return "send_recv";
    case OpKind::attn_fwd_block: return "attn_fwd_block";
    case OpKind::attn_bwd_block: return "attn_bwd_block";
    case OpKind::lse_merge: return "lse_merge";
    case OpKind::out_correction: return "out_correction";
    case OpKind::copy: return "copy";
    case OpKind::all_gather: return "all_gather";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::gemm: return "gemm";
    case OpKind::elementwise: return "elementwise";
  }
  return "?";
}

bool is_communication(OpKind k) {
  return k == OpKind::all_to_all || k == OpKind::send_recv || k == OpKind::all_gather ||
         k == OpKind::reduce_scatter;
}

BufferId RankProgram::buffer(const std::string& name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name) return static_cast<BufferId>(i);
  HCPSIM_ASSERT(false, "rank " + std::to_string(cp_rank) + " has no buffer '" + name + "'");
}

double Schedule::total_flops(Phase phase) const {
  double total = 0;
  for (const auto& r : ranks)
    for (const auto& op : r.ops)
      if (op.phase == phase) total += op.flops;
  return total;
}

namespace {

struct Checker {
  const Schedule& s;
  const RankProgram* r = nullptr;
  std::vector<int> live;  // 0 = never allocated / freed, 1 = live
  size_t op_index = 0;

  std::string where() const {
    return "rank " + std::to_string(r->cp_rank) + " op " + std::to_string(op_index) + " '" +
           r->ops[op_index].label + "'";
  }
  const BufferDecl& buf(BufferId id) const {
    HCPSIM_ASSERT(id >= 0 && static_cast<size_t>(id) < r->buffers.size(), where() + ": buffer id out of range");
    return r->buffers[static_cast<size_t>(id)];
  }
  void use(BufferId id) const {
    buf(id);
    HCPSIM_ASSERT(live[static_cast<size_t>(id)] == 1, where() + ": uses buffer '" + buf(id).name + "' while not live");
  }
  void rows(BufferId id, RowRange rr) const {
    use(id);
    HCPSIM_ASSERT(rr.begin >= 0, where() + ": negative row begin");
    HCPSIM_ASSERT(rr.count >= 0, where() + ": negative row count");
    HCPSIM_ASSERT(rr.end() <= buf(id).rows, where() + ": rows beyond buffer '" + buf(id).name + "'");
  }
  void same_row_shape(BufferId a, BufferId b) const {
    HCPSIM_ASSERT(buf(a).batch == buf(b).batch, where() + ": batch mismatch");
    HCPSIM_ASSERT(buf(a).heads == buf(b).heads, where() + ": heads mismatch");
    HCPSIM_ASSERT(buf(a).width == buf(b).width, where() + ": width mismatch");
  }
};

}  // namespace

void Schedule::check_invariants() const {
  HCPSIM_ASSERT(static_cast<int64_t>(ranks.size()) == tp_size * a2a_size * p2p_size,
                "one program per CP rank (per TP x CP rank in a layer schedule)");
  // (src, dst, tag) -> bytes, for matching sends with receives.
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> sends, recvs;
  // tag -> (group, count of members that issued it)
  std::map<std::pair<std::vector<int64_t>, int64_t>, int64_t> a2a_members;
  Checker c{*this, nullptr, {}, 0};
  for (const auto& r : ranks) {
    c.r = &r;
    c.live.assign(r.buffers.size(), 0);
    HCPSIM_ASSERT(r.cp_rank == static_cast<int64_t>(&r - ranks.data()), "rank programs must be in cp_rank order");
    for (const auto& b : r.inputs) {
      c.op_index = 0;
      HCPSIM_ASSERT(static_cast<int64_t>(b.tokens.size()) == r.buffers.at(static_cast<size_t>(b.buffer)).rows,
                    "input binding '" + b.tensor + "' token count != buffer rows");
      c.live[static_cast<size_t>(b.buffer)] = 1;
    }
    for (size_t i = 0; i < r.ops.size(); ++i) {
      c.op_index = i;
      const Op& op = r.ops[i];
      const bool is_comm = is_communication(op.kind());
      const bool is_memory = op.kind() == OpKind::alloc || op.kind() == OpKind::free;
      HCPSIM_ASSERT(!is_comm || op.stream == Stream::comm, c.where() + ": communication must run on the comm stream");
      HCPSIM_ASSERT(is_comm || is_memory || op.stream != Stream::comm, c.where() + ": compute op on the comm stream");
      for (OpIndex d : op.deps) {
        HCPSIM_ASSERT(d >= 0, c.where() + ": negative dependency");
        HCPSIM_ASSERT(static_cast<size_t>(d) < i, c.where() + ": dependency must point to an earlier op");
      }
      std::visit(
          [&](const auto& p) {
            using T = std::decay_t<decltype(p)>;
            if constexpr (std::is_same_v<T, AllocOp>) {
              c.buf(p.buffer);
              HCPSIM_ASSERT(c.live[static_cast<size_t>(p.buffer)] == 0, c.where() + ": alloc of a live buffer");
              c.live[static_cast<size_t>(p.buffer)] = 1;
            } else if constexpr (std::is_same_v<T, FreeOp>) {
              c.use(p.buffer);
              c.live[static_cast<size_t>(p.buffer)] = 0;
            } else if constexpr (std::is_same_v<T, AllToAllOp>) {
              c.use(p.input);
              c.use(p.output);
              const int64_t A = static_cast<int64_t>(p.group.size());
              HCPSIM_ASSERT(static_cast<int64_t>(p.chunk_order.size()) == 2 * A, c.where() + ": chunk_order size != 2A");
              const auto& in = c.buf(p.input);
              const auto& out = c.buf(p.output);
              if (p.direction == AllToAllOp::Direction::scatter_heads) {
                HCPSIM_ASSERT(out.rows == A * in.rows, c.where() + ": scatter output rows != A * input rows");
                HCPSIM_ASSERT(in.heads == A * out.heads, c.where() + ": scatter heads not divisible");
              } else {
                HCPSIM_ASSERT(in.rows == A * out.rows, c.where() + ": gather input rows != A * output rows");
                HCPSIM_ASSERT(out.heads == A * in.heads, c.where() + ": gather heads not divisible");
              }
              HCPSIM_ASSERT(in.width == out.width, c.where() + ": a2a width mismatch");
              HCPSIM_ASSERT(p.input != p.output, c.where() + ": a2a input and output alias");
              bool member = false;
              for (int64_t m : p.group) member = member || m == r.cp_rank;
              HCPSIM_ASSERT(member, c.where() + ": rank is not a member of its a2a group");
              a2a_members[{p.group, p.tag}] += 1;
            } else if constexpr (std::is_same_v<T, AllGatherOp> || std::is_same_v<T, ReduceScatterOp>) {
              c.use(p.input);
              c.use(p.output);
              HCPSIM_ASSERT(p.input != p.output, c.where() + ": collective input and output alias");
              const int64_t n = static_cast<int64_t>(p.group.size());
              HCPSIM_ASSERT(static_cast<int64_t>(p.chunk_order.size()) == 2 * n, c.where() + ": chunk_order size != 2n");
              const auto& in = c.buf(p.input);
              const auto& out = c.buf(p.output);
              const bool gather = std::is_same_v<T, AllGatherOp>;
              HCPSIM_ASSERT((gather ? out.rows == n * in.rows : in.rows == n * out.rows),
                            c.where() + ": collective rows != group size × member rows");
              HCPSIM_ASSERT(in.heads == out.heads, c.where() + ": collective heads mismatch");
              HCPSIM_ASSERT(in.width == out.width, c.where() + ": collective width mismatch");
              bool member = false;
              for (int64_t m : p.group) member = member || m == r.cp_rank;
              HCPSIM_ASSERT(member, c.where() + ": rank is not a member of its collective group");
              a2a_members[{p.group, p.tag}] += 1;
            } else if constexpr (std::is_same_v<T, SendRecvOp>) {
              int64_t sb = 0, rbytes = 0;
              for (BufferId id : p.send) { c.use(id); sb += c.buf(id).size_bytes(); }
              for (BufferId id : p.recv) { c.use(id); rbytes += c.buf(id).size_bytes(); }
              HCPSIM_ASSERT(p.send.empty() == (p.send_peer < 0), c.where() + ": send peer and buffers disagree");
              HCPSIM_ASSERT(p.recv.empty() == (p.recv_peer < 0), c.where() + ": recv peer and buffers disagree");
              if (!p.send.empty()) {
                auto key = std::make_tuple(r.cp_rank, p.send_peer, p.send_tag);
                HCPSIM_ASSERT(sends.count(key) == 0, c.where() + ": duplicate message");
                sends[key] = sb;
              }
              if (!p.recv.empty()) {
                auto key = std::make_tuple(p.recv_peer, r.cp_rank, p.recv_tag);
                HCPSIM_ASSERT(recvs.count(key) == 0, c.where() + ": duplicate receive");
                recvs[key] = rbytes;
              }
            } else if constexpr (std::is_same_v<T, GemmOp>) {
              HCPSIM_ASSERT(p.m >= 0 && p.n >= 0 && p.k >= 0, c.where() + ": negative GEMM dimension");
            } else if constexpr (std::is_same_v<T, ElementwiseOp>) {
              HCPSIM_ASSERT(op.bytes >= 0, c.where() + ": negative elementwise bytes");
            } else if constexpr (std::is_same_v<T, AttnFwdBlockOp>) {
              c.rows(p.q, p.q_rows);
              c.rows(p.k, p.kv_rows);
              c.rows(p.v, p.kv_rows);
              c.use(p.out);
              c.use(p.lse);
              HCPSIM_ASSERT(c.buf(p.out).rows == p.q_rows.count, c.where() + ": out rows != q rows");
              HCPSIM_ASSERT(c.buf(p.lse).rows == p.q_rows.count, c.where() + ": lse rows != q rows");
              HCPSIM_ASSERT(c.buf(p.q).heads % c.buf(p.k).heads == 0, c.where() + ": GQA heads not divisible");
              HCPSIM_ASSERT(c.buf(p.lse).width == 1, c.where() + ": lse width must be 1");
              HCPSIM_ASSERT(c.buf(p.out).heads == c.buf(p.q).heads, c.where() + ": out heads != q heads");
              HCPSIM_ASSERT(c.buf(p.out).width == c.buf(p.v).width, c.where() + ": out width != v width");
            } else if constexpr (std::is_same_v<T, AttnBwdBlockOp>) {
              c.rows(p.q, p.q_rows);
              c.rows(p.out, p.q_rows);
              c.rows(p.dout, p.q_rows);
              c.rows(p.lse, p.q_rows);
              c.rows(p.k, p.kv_rows);
              c.rows(p.v, p.kv_rows);
              c.use(p.dq);
              c.use(p.dk);
              c.use(p.dv);
              HCPSIM_ASSERT(c.buf(p.dq).rows == p.q_rows.count, c.where() + ": dq rows != q rows");
              HCPSIM_ASSERT(c.buf(p.dk).rows == p.kv_rows.count, c.where() + ": dk rows != kv rows");
              HCPSIM_ASSERT(c.buf(p.dv).rows == p.kv_rows.count, c.where() + ": dv rows != kv rows");
            } else if constexpr (std::is_same_v<T, LseMergeOp>) {
              c.rows(p.dst, p.dst_rows);
              c.rows(p.src, {0, p.dst_rows.count});
              HCPSIM_ASSERT(c.buf(p.dst).width == 1, c.where() + ": lse width must be 1");
              HCPSIM_ASSERT(c.buf(p.src).width == 1, c.where() + ": lse width must be 1");
              HCPSIM_ASSERT(p.dst != p.src, c.where() + ": lse merge into its own source");
            } else if constexpr (std::is_same_v<T, OutCorrectionOp>) {
              c.rows(p.dst, p.dst_rows);
              c.rows(p.lse, p.dst_rows);
              c.rows(p.src, {0, p.dst_rows.count});
              c.rows(p.src_lse, {0, p.dst_rows.count});
              c.same_row_shape(p.dst, p.src);
              HCPSIM_ASSERT(c.buf(p.lse).width == 1, c.where() + ": lse width must be 1");
              HCPSIM_ASSERT(c.buf(p.src_lse).width == 1, c.where() + ": lse width must be 1");
              HCPSIM_ASSERT(c.buf(p.lse).heads == c.buf(p.dst).heads, c.where() + ": lse heads != out heads");
              HCPSIM_ASSERT(p.dst != p.src, c.where() + ": out correction into its own source");
            } else if constexpr (std::is_same_v<T, CopyOp>) {
              c.rows(p.dst, p.dst_rows);
              c.rows(p.src, p.src_rows);
              HCPSIM_ASSERT(p.dst_rows.count == p.src_rows.count, c.where() + ": copy row counts differ");
              HCPSIM_ASSERT(p.dst != p.src || p.dst_rows.end() <= p.src_rows.begin || p.src_rows.end() <= p.dst_rows.begin,
                            c.where() + ": copy between overlapping rows of one buffer");
              c.same_row_shape(p.dst, p.src);
            }
          },
          op.payload);
    }
    for (const auto& b : r.outputs) {
      HCPSIM_ASSERT(b.buffer >= 0 && static_cast<size_t>(b.buffer) < r.buffers.size(), "output buffer id out of range");
      HCPSIM_ASSERT(c.live[static_cast<size_t>(b.buffer)] == 1,
                    "rank " + std::to_string(r.cp_rank) + ": output '" + b.tensor + "' is not live at the end");
      HCPSIM_ASSERT(static_cast<int64_t>(b.tokens.size()) == r.buffers[static_cast<size_t>(b.buffer)].rows,
                    "output binding '" + b.tensor + "' token count != buffer rows");
    }
  }
  HCPSIM_ASSERT(sends.size() == recvs.size(), "every send needs exactly one matching receive");
  for (const auto& [key, bytes] : sends) {
    auto it = recvs.find(key);
    HCPSIM_ASSERT(it != recvs.end(), "message " + std::to_string(std::get<0>(key)) + "->" +
                                         std::to_string(std::get<1>(key)) + " tag " +
                                         std::to_string(std::get<2>(key)) + " has no receive");
    HCPSIM_ASSERT(it->second == bytes, "message size differs between send and receive");
  }
  for (const auto& [key, count] : a2a_members)
    HCPSIM_ASSERT(count == static_cast<int64_t>(key.first.size()),
                  "all-to-all tag " + std::to_string(key.second) + " is not issued by every group member");
}

}  // namespace hcpsim
