#include "hcpsim/oracles/cpu_executor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/block_attention.hpp"
#include "hcpsim/oracles/precision.hpp"

namespace hcpsim {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
/// Freed buffers kept for reuse: bounds the memory held beyond the schedule's own peak. A schedule frees few
/// distinct shapes (per-step KV, O/LSE and gradient buffers), so a small pool catches nearly every allocation.
constexpr size_t kMaxSpareBuffers = 16;

/// Per-rank execution state.
struct RankState {
  const RankProgram* program = nullptr;
  std::vector<HostTensor> buffers;  // indexed by BufferId
  std::vector<bool> live;
  size_t pc = 0;             // next op
  bool send_posted = false;  // the current SendRecvOp has posted its send
  bool a2a_arrived = false;  // the current AllToAllOp is waiting for its group

  [[nodiscard]] bool finished() const { return pc >= program->ops.size(); }
  [[nodiscard]] const Op& current() const { return program->ops[pc]; }
};

using MessageKey = std::tuple<int64_t, int64_t, int64_t>;  // (source cp rank, destination cp rank, tag)

std::string op_text(const RankState& st, size_t pc) {
  const Op& op = st.program->ops[pc];
  return fmt::format("cp_rank {} op #{} {} '{}'", st.program->cp_rank, pc, to_string(op.kind()), op.label);
}

bool has_shape(const HostTensor& t, int64_t batch, int64_t rows, int64_t heads, int64_t width) {
  return t.batch() == batch && t.rows() == rows && t.heads() == heads && t.width() == width;
}

std::string shape_text(const HostTensor& t) {
  return fmt::format("[{}, {}, {}, {}]", t.batch(), t.rows(), t.heads(), t.width());
}

/// The global tensor named by a binding, with its shape.
struct GlobalTensor {
  const char* name;
  HostTensor* tensor;
};

class Executor {
 public:
  Executor(const Schedule& schedule, const ExecutionOptions& options)
      : schedule_(schedule), threads_(options.threads), dtype_(options.dtype) {
    HCPSIM_ASSERT(threads_ >= 1, "execute_schedule: threads must be >= 1");
    // Accumulators: fp32 (or fp64 when the whole run is fp64) unless the schedule asks for TE's F16 behaviour.
    acc_dtype_ = dtype_ == Dtype::fp64 ? Dtype::fp64 : (schedule.grad_accumulation_in_dtype ? dtype_ : Dtype::fp32);
    scale_ = effective_softmax_scale(schedule.shape);
    ranks_.resize(schedule.ranks.size());
    for (size_t i = 0; i < schedule.ranks.size(); ++i) {
      const RankProgram& prog = schedule.ranks[i];
      HCPSIM_ASSERT(prog.cp_rank == static_cast<int64_t>(i), "execute_schedule: ranks must be indexed by cp_rank");
      RankState& st = ranks_[i];
      st.program = &prog;
      st.buffers.resize(prog.buffers.size());
      st.live.assign(prog.buffers.size(), false);
    }
  }

  void load_inputs(const AttentionInputs& in) {
    for (RankState& st : ranks_) {
      for (const IoBinding& bind : st.program->inputs) {
        const HostTensor* global = nullptr;
        if (bind.tensor == "q") global = &in.q;
        if (bind.tensor == "k") global = &in.k;
        if (bind.tensor == "v") global = &in.v;
        if (bind.tensor == "dout") global = &in.dout;
        HCPSIM_ASSERT(global != nullptr, fmt::format("cp_rank {}: unknown input tensor '{}'", st.program->cp_rank,
                                                     bind.tensor));
        HostTensor& buf = allocate(st, bind.buffer, "input binding");
        check_binding(st, bind, *global, buf);
        for (int64_t b = 0; b < buf.batch(); ++b) {
          for (int64_t r = 0; r < buf.rows(); ++r) {
            const int64_t token = bind.tokens[static_cast<size_t>(r)];
            for (int64_t hh = 0; hh < buf.heads(); ++hh) {
              const double* src = global->data() + global->index(b, token, bind.head_begin + hh, 0);
              std::copy(src, src + buf.width(), buf.data() + buf.index(b, r, hh, 0));
            }
          }
        }
        round_tensor(buf, dtype_);
      }
    }
  }

  void run() {
    for (;;) {
      ++stats_.rounds;
      bool progress = false;
      bool all_finished = true;
      for (RankState& st : ranks_) {
        progress = run_until_blocked(st) || progress;
        all_finished = all_finished && st.finished();
      }
      if (all_finished) break;
      HCPSIM_ASSERT(progress, deadlock_text());
    }
    for (const auto& [key, queue] : mailbox_) {
      HCPSIM_ASSERT(queue.empty(), fmt::format("execute_schedule: undelivered message from cp_rank {} to cp_rank {} "
                                               "tag {}", std::get<0>(key), std::get<1>(key), std::get<2>(key)));
    }
  }

  AttentionOutputs gather_outputs() {
    const AttentionShape& sh = schedule_.shape;
    AttentionOutputs r;
    r.out = HostTensor(sh.batch, sh.seq_length, sh.heads_q, sh.head_dim_v, kNaN);
    r.softmax_lse = HostTensor(sh.batch, sh.seq_length, sh.heads_q, 1, kNaN);
    r.dq = HostTensor(sh.batch, sh.seq_length, sh.heads_q, sh.head_dim_qk, kNaN);
    r.dk = HostTensor(sh.batch, sh.seq_length, sh.heads_kv, sh.head_dim_qk, kNaN);
    r.dv = HostTensor(sh.batch, sh.seq_length, sh.heads_kv, sh.head_dim_v, kNaN);
    const GlobalTensor globals[] = {
        {"out", &r.out}, {"softmax_lse", &r.softmax_lse}, {"dq", &r.dq}, {"dk", &r.dk}, {"dv", &r.dv}};
    // writes[t][(b·S + token)·heads + head]: how often that global row-vector was written
    std::vector<std::vector<uint8_t>> writes;
    for (const GlobalTensor& g : globals) {
      writes.emplace_back(static_cast<size_t>(g.tensor->batch() * g.tensor->rows() * g.tensor->heads()), 0);
    }
    for (RankState& st : ranks_) {
      for (const IoBinding& bind : st.program->outputs) {
        size_t t = 0;
        while (t < std::size(globals) && bind.tensor != globals[t].name) ++t;
        HCPSIM_ASSERT(t < std::size(globals), fmt::format("cp_rank {}: unknown output tensor '{}'",
                                                          st.program->cp_rank, bind.tensor));
        HostTensor& global = *globals[t].tensor;
        const HostTensor& buf = live_buffer(st, bind.buffer, "output binding");
        check_binding(st, bind, global, buf);
        for (int64_t b = 0; b < buf.batch(); ++b) {
          for (int64_t row = 0; row < buf.rows(); ++row) {
            const int64_t token = bind.tokens[static_cast<size_t>(row)];
            for (int64_t hh = 0; hh < buf.heads(); ++hh) {
              const int64_t head = bind.head_begin + hh;
              uint8_t& count = writes[t][static_cast<size_t>((b * global.rows() + token) * global.heads() + head)];
              HCPSIM_ASSERT(count == 0, fmt::format("execute_schedule: global {}[b={}, token={}, head={}] written "
                                                    "twice (second time by cp_rank {})",
                                                    bind.tensor, b, token, head, st.program->cp_rank));
              count = 1;
              const double* src = buf.data() + buf.index(b, row, hh, 0);
              std::copy(src, src + buf.width(), global.data() + global.index(b, token, head, 0));
            }
          }
        }
      }
    }
    for (size_t t = 0; t < std::size(globals); ++t) {
      // The returned tensors are in the run's dtype (softmax_lse fp32), whatever the accumulators were.
      round_tensor(*globals[t].tensor, t == 1 && dtype_ != Dtype::fp64 ? Dtype::fp32 : dtype_);
      const auto it = std::find(writes[t].begin(), writes[t].end(), uint8_t{0});
      if (it == writes[t].end()) continue;
      const auto flat = static_cast<int64_t>(it - writes[t].begin());
      const HostTensor& g = *globals[t].tensor;
      HCPSIM_ASSERT(false, fmt::format("execute_schedule: global {}[b={}, token={}, head={}] is written by no rank",
                                       globals[t].name, flat / (g.rows() * g.heads()), (flat / g.heads()) % g.rows(),
                                       flat % g.heads()));
    }
    return r;
  }

  [[nodiscard]] const ExecutionStats& stats() const { return stats_; }

 private:
  // ---- buffers ----
  HostTensor& allocate(RankState& st, BufferId id, const char* why) {
    HCPSIM_ASSERT(id >= 0 && static_cast<size_t>(id) < st.buffers.size(),
                  fmt::format("cp_rank {}: buffer id {} out of range ({})", st.program->cp_rank, id, why));
    HCPSIM_ASSERT(!st.live[static_cast<size_t>(id)],
                  fmt::format("cp_rank {}: buffer '{}' allocated while live ({})", st.program->cp_rank,
                              st.program->buffers[static_cast<size_t>(id)].name, why));
    const BufferDecl& d = st.program->buffers[static_cast<size_t>(id)];
    HostTensor& buf = st.buffers[static_cast<size_t>(id)];
    // Reuse the storage of a freed buffer of the same shape: a fresh multi-megabyte allocation costs a page fault
    // per 4 KiB on first touch, which dominated the executor's own time. Refilled with NaN either way, so a read of
    // an unwritten element still surfaces; which storage is reused changes no value.
    const std::array<int64_t, 4> dims{d.batch, d.rows, d.heads, d.width};
    const auto spare = std::find_if(spare_.begin(), spare_.end(), [&](const HostTensor& t) { return t.shape() == dims; });
    if (spare != spare_.end()) {
      buf = std::move(*spare);
      spare_.erase(spare);
      buf.fill(kNaN);
    } else {
      buf = HostTensor(d.batch, d.rows, d.heads, d.width, kNaN);
    }
    st.live[static_cast<size_t>(id)] = true;
    return st.buffers[static_cast<size_t>(id)];
  }

  HostTensor& live_buffer(RankState& st, BufferId id, const char* role) {
    HCPSIM_ASSERT(id >= 0 && static_cast<size_t>(id) < st.buffers.size(),
                  fmt::format("cp_rank {}: {} buffer id {} out of range", st.program->cp_rank, role, id));
    HCPSIM_ASSERT(st.live[static_cast<size_t>(id)],
                  fmt::format("cp_rank {}: {} buffer '{}' used while not live", st.program->cp_rank, role,
                              st.program->buffers[static_cast<size_t>(id)].name));
    return st.buffers[static_cast<size_t>(id)];
  }

  void check_binding(const RankState& st, const IoBinding& bind, const HostTensor& global, const HostTensor& buf) {
    const std::string where = fmt::format("cp_rank {} binding '{}' -> buffer '{}'", st.program->cp_rank, bind.tensor,
                                          st.program->buffers[static_cast<size_t>(bind.buffer)].name);
    HCPSIM_ASSERT(buf.batch() == global.batch(), where + ": batch differs from the global tensor");
    HCPSIM_ASSERT(buf.width() == global.width(), where + ": width differs from the global tensor");
    HCPSIM_ASSERT(static_cast<int64_t>(bind.tokens.size()) == buf.rows(), where + ": tokens.size() != buffer rows");
    HCPSIM_ASSERT(bind.head_begin >= 0, where + ": negative head_begin");
    HCPSIM_ASSERT(bind.head_begin + buf.heads() <= global.heads(), where + ": heads outside the global tensor");
    for (int64_t token : bind.tokens) {
      HCPSIM_ASSERT(token >= 0 && token < global.rows(), where + ": token outside the sequence");
    }
  }

  static void check_rows(const HostTensor& t, RowRange range, const std::string& where) {
    HCPSIM_ASSERT(range.begin >= 0, where + ": negative row begin");
    HCPSIM_ASSERT(range.count >= 0, where + ": negative row count");
    HCPSIM_ASSERT(range.end() <= t.rows(), where + ": row range outside buffer " + shape_text(t));
  }

  // ---- scheduling ----
  /// Runs rank `st` until it blocks or finishes; true if anything happened.
  bool run_until_blocked(RankState& st) {
    bool progress = false;
    while (!st.finished()) {
      bool touched = false;
      const bool done = execute(st, touched);
      progress = progress || touched;
      if (!done) break;
      ++st.pc;
      st.send_posted = false;
      st.a2a_arrived = false;
      ++stats_.ops_executed;
      progress = true;
    }
    return progress;
  }

  /// Group rendezvous shared by all-to-all, all-gather and reduce-scatter: marks this rank as arrived and
  /// returns true with every member (in group order) once all of them wait at an op of type OpT with this tag.
  /// HCPSIM_ASSERT when members disagree on the group or chunk_order.
  template <typename OpT>
  bool wait_for_group(RankState& st, const OpT& op, const std::string& where, bool& touched,
                      std::vector<RankState*>& members) {
    const int64_t me = st.program->cp_rank;
    const auto n = static_cast<int64_t>(op.group.size());
    HCPSIM_ASSERT(n >= 1, where + ": empty group");
    HCPSIM_ASSERT(std::count(op.group.begin(), op.group.end(), me) == 1, where + ": rank not in its group");
    HCPSIM_ASSERT(static_cast<int64_t>(op.chunk_order.size()) == 2 * n, where + ": chunk_order must have 2n entries");
    if (!st.a2a_arrived) touched = true;
    st.a2a_arrived = true;
    members.clear();
    for (int64_t cp : op.group) {
      HCPSIM_ASSERT(cp >= 0 && cp < static_cast<int64_t>(ranks_.size()), where + ": group member out of range");
      RankState& m = ranks_[static_cast<size_t>(cp)];
      if (m.finished() || !m.a2a_arrived) return false;
      const auto* other = std::get_if<OpT>(&m.current().payload);
      if (other == nullptr || other->tag != op.tag) return false;
      const std::string pair = where + " vs " + op_text(m, m.pc);
      HCPSIM_ASSERT(other->group == op.group, pair + ": members disagree on the group");
      HCPSIM_ASSERT(other->chunk_order == op.chunk_order, pair + ": members disagree on chunk_order");
      members.push_back(&m);
    }
    return true;
  }

  /// AllGatherOp / ReduceScatterOp: waits until every member is at the op with the same tag, then moves the data
  /// of all members at once and completes the op on the others (as all_to_all does).
  template <typename OpT>
  bool collective(RankState& st, const OpT& op, const std::string& where, bool& touched) {
    const auto n = static_cast<int64_t>(op.group.size());
    std::vector<RankState*> members;
    if (!wait_for_group(st, op, where, touched, members)) return false;
    for (int64_t k = 0; k < 2 * n; ++k) {
      const int64_t id = op.chunk_order[static_cast<size_t>(k)];
      HCPSIM_ASSERT(id >= 0 && id < 2 * n, where + ": chunk_order entry out of range");
    }
    // Inputs of all members (the outputs may alias none of them).
    std::vector<const HostTensor*> in(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      RankState& m = *members[static_cast<size_t>(j)];
      const auto& mop = std::get<OpT>(m.current().payload);
      HCPSIM_ASSERT(mop.input != mop.output, where + ": input and output are the same buffer");
      in[static_cast<size_t>(j)] = &live_buffer(m, mop.input, "collective input");
      HCPSIM_ASSERT(in[static_cast<size_t>(j)]->same_shape(*in[0]), where + ": members' inputs differ in shape");
    }
    const HostTensor& in0 = *in[0];
    const int64_t row_elems = in0.heads() * in0.width();
    if constexpr (std::is_same_v<OpT, AllGatherOp>) {
      HCPSIM_ASSERT(in0.rows() % 2 == 0, where + ": all_gather input rows must be even");
      const int64_t c = in0.rows() / 2;
      for (int64_t j = 0; j < n; ++j) {
        RankState& m = *members[static_cast<size_t>(j)];
        HostTensor& out = live_buffer(m, std::get<OpT>(m.current().payload).output, "all_gather output");
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
    } else {
      HCPSIM_ASSERT(in0.rows() % (2 * n) == 0, where + ": reduce_scatter input rows not divisible by 2n");
      const int64_t c = in0.rows() / (2 * n);
      for (int64_t j = 0; j < n; ++j) {
        RankState& m = *members[static_cast<size_t>(j)];
        HostTensor& out = live_buffer(m, std::get<OpT>(m.current().payload).output, "reduce_scatter output");
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
              for (int64_t e = 0; e < c * row_elems; ++e) d[e] = a == 0 ? p[e] : round_to_dtype(d[e] + p[e], acc_dtype_);
            }
          }
        }
      }
    }
    ++stats_.all_to_alls;
    for (RankState* m : members) {
      if (m == &st) continue;
      ++m->pc;
      m->send_posted = false;
      m->a2a_arrived = false;
      ++stats_.ops_executed;
    }
    return true;
  }

  /// Executes the current op of `st`; false if it blocks. `touched`: state changed although the op blocks.
  bool execute(RankState& st, bool& touched) {
    const Op& op = st.current();
    const std::string where = op_text(st, st.pc);
    return std::visit(
        [&](const auto& payload) -> bool {
          using T = std::decay_t<decltype(payload)>;
          if constexpr (std::is_same_v<T, AllocOp>) {
            HostTensor& t = allocate(st, payload.buffer, "AllocOp");
            if (payload.zero) t.fill(0.0);
          } else if constexpr (std::is_same_v<T, FreeOp>) {
            HostTensor& freed = live_buffer(st, payload.buffer, "FreeOp");
            if (spare_.size() < kMaxSpareBuffers) spare_.push_back(std::move(freed));
            st.buffers[static_cast<size_t>(payload.buffer)] = HostTensor();
            st.live[static_cast<size_t>(payload.buffer)] = false;
          } else if constexpr (std::is_same_v<T, SendRecvOp>) {
            return send_recv(st, payload, where, touched);
          } else if constexpr (std::is_same_v<T, AllToAllOp>) {
            return all_to_all(st, payload, where, touched);
          } else if constexpr (std::is_same_v<T, AttnFwdBlockOp>) {
            attn_fwd(st, payload, where);
          } else if constexpr (std::is_same_v<T, AttnBwdBlockOp>) {
            attn_bwd(st, payload, where);
          } else if constexpr (std::is_same_v<T, LseMergeOp>) {
            lse_merge_op(st, payload, where);
          } else if constexpr (std::is_same_v<T, OutCorrectionOp>) {
            out_correction(st, payload, where);
          } else if constexpr (std::is_same_v<T, CopyOp>) {
            copy(st, payload, where);
          } else if constexpr (std::is_same_v<T, AllGatherOp> || std::is_same_v<T, ReduceScatterOp>) {
            return collective(st, payload, where, touched);
          } else if constexpr (std::is_same_v<T, GemmOp> || std::is_same_v<T, ElementwiseOp>) {
            // Layer-model ops time the whole training step; the oracle executes attention schedules only.
            HCPSIM_ASSERT(false, where + ": the CPU executor runs attention schedules, not layer-model ops");
          } else {
            static_assert(std::is_same_v<T, AllocOp>, "every op kind needs an implementation");
          }
          return true;
        },
        op.payload);
  }

  bool send_recv(RankState& st, const SendRecvOp& op, const std::string& where, bool& touched) {
    const int64_t me = st.program->cp_rank;
    const auto nranks = static_cast<int64_t>(ranks_.size());
    if (!st.send_posted && op.send_peer >= 0) {
      HCPSIM_ASSERT(op.send_peer < nranks, where + ": send_peer out of range");
      HCPSIM_ASSERT(!op.send.empty(), where + ": send_peer set but no send buffers");
      std::vector<double> message;
      if (!spare_messages_.empty()) {  // reuse a delivered message's storage (no fresh pages, see allocate())
        message = std::move(spare_messages_.back());
        spare_messages_.pop_back();
        message.clear();
      }
      for (BufferId id : op.send) {
        const HostTensor& buf = live_buffer(st, id, "send");
        message.insert(message.end(), buf.values().begin(), buf.values().end());
      }
      mailbox_[MessageKey{me, op.send_peer, op.send_tag}].push_back(std::move(message));
      touched = true;
    }
    st.send_posted = true;
    if (op.recv_peer < 0) {
      HCPSIM_ASSERT(op.recv.empty(), where + ": recv buffers without recv_peer");
      return true;
    }
    HCPSIM_ASSERT(op.recv_peer < nranks, where + ": recv_peer out of range");
    auto it = mailbox_.find(MessageKey{op.recv_peer, me, op.recv_tag});
    if (it == mailbox_.end() || it->second.empty()) return false;
    const std::vector<double>& message = it->second.front();
    int64_t expected = 0;
    for (BufferId id : op.recv) expected += live_buffer(st, id, "recv").elements();
    HCPSIM_ASSERT(static_cast<int64_t>(message.size()) == expected,
                  fmt::format("{}: message from cp_rank {} tag {} has {} elements, receive buffers {}", where,
                              op.recv_peer, op.recv_tag, message.size(), expected));
    auto pos = message.begin();
    for (BufferId id : op.recv) {
      HostTensor& buf = live_buffer(st, id, "recv");
      std::copy(pos, pos + buf.elements(), buf.data());
      pos += buf.elements();
    }
    ++stats_.messages;
    stats_.message_elements += expected;
    if (spare_messages_.size() < kMaxSpareBuffers) spare_messages_.push_back(std::move(it->second.front()));
    it->second.pop_front();
    if (it->second.empty()) mailbox_.erase(it);
    return true;
  }

  bool all_to_all(RankState& st, const AllToAllOp& op, const std::string& where, bool& touched) {
    std::vector<RankState*> members;
    if (!wait_for_group(st, op, where, touched, members)) return false;
    for (RankState* m : members)
      HCPSIM_ASSERT(std::get<AllToAllOp>(m->current().payload).direction == op.direction,
                    where + " vs " + op_text(*m, m->pc) + ": members disagree on the direction");
    if (op.direction == AllToAllOp::Direction::scatter_heads) {
      scatter_heads(members, where);
    } else {
      gather_heads(members, where);
    }
    ++stats_.all_to_alls;
    // Complete the op on every other member; the caller completes it on `st`.
    for (RankState* m : members) {
      if (m == &st) continue;
      ++m->pc;
      m->send_posted = false;
      m->a2a_arrived = false;
      ++stats_.ops_executed;
    }
    return true;
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


  void attn_fwd(RankState& st, const AttnFwdBlockOp& op, const std::string& where) {
    HCPSIM_ASSERT(op.out != op.q && op.out != op.k && op.out != op.v, where + ": out aliases an input");
    HCPSIM_ASSERT(op.lse != op.q && op.lse != op.k && op.lse != op.v && op.lse != op.out,
                  where + ": lse aliases another operand");
    const HostTensor& q = live_buffer(st, op.q, "q");
    const HostTensor& k = live_buffer(st, op.k, "k");
    const HostTensor& v = live_buffer(st, op.v, "v");
    HostTensor& out = live_buffer(st, op.out, "out");
    HostTensor& lse = live_buffer(st, op.lse, "lse");
    check_rows(q, op.q_rows, where + " q_rows");
    check_rows(k, op.kv_rows, where + " kv_rows");
    attention_block_forward(q, op.q_rows, k, v, op.kv_rows, op.mask, scale_, out, lse, threads_, dtype_);
  }

  void attn_bwd(RankState& st, const AttnBwdBlockOp& op, const std::string& where) {
    for (BufferId w : {op.dq, op.dk, op.dv}) {
      for (BufferId r : {op.q, op.k, op.v, op.out, op.dout, op.lse}) {
        HCPSIM_ASSERT(w != r, where + ": a gradient output aliases an input");
      }
    }
    HCPSIM_ASSERT(op.dq != op.dk && op.dq != op.dv && op.dk != op.dv, where + ": gradient outputs alias");
    const HostTensor& q = live_buffer(st, op.q, "q");
    const HostTensor& k = live_buffer(st, op.k, "k");
    const HostTensor& v = live_buffer(st, op.v, "v");
    const HostTensor& out = live_buffer(st, op.out, "out");
    const HostTensor& dout = live_buffer(st, op.dout, "dout");
    const HostTensor& lse = live_buffer(st, op.lse, "lse");
    HostTensor& dq = live_buffer(st, op.dq, "dq");
    HostTensor& dk = live_buffer(st, op.dk, "dk");
    HostTensor& dv = live_buffer(st, op.dv, "dv");
    check_rows(q, op.q_rows, where + " q_rows");
    check_rows(k, op.kv_rows, where + " kv_rows");
    attention_block_backward(q, k, v, out, dout, lse, op.q_rows, op.kv_rows, op.mask, scale_, dq, dk, dv, threads_,
                             dtype_);
  }

  void lse_merge_op(RankState& st, const LseMergeOp& op, const std::string& where) {
    HCPSIM_ASSERT(op.dst != op.src, where + ": lse_merge dst == src");
    HostTensor& dst = live_buffer(st, op.dst, "lse_merge dst");
    const HostTensor& src = live_buffer(st, op.src, "lse_merge src");
    check_rows(dst, op.dst_rows, where + " dst_rows");
    check_rows(src, RowRange{0, op.dst_rows.count}, where + " src rows");
    HCPSIM_ASSERT(dst.batch() == src.batch(), where + ": batch differs");
    HCPSIM_ASSERT(dst.heads() == src.heads(), where + ": heads differ");
    HCPSIM_ASSERT(dst.width() == 1, where + ": dst width != 1");
    HCPSIM_ASSERT(src.width() == 1, where + ": src width != 1");
    for (int64_t b = 0; b < dst.batch(); ++b) {
      for (int64_t r = 0; r < op.dst_rows.count; ++r) {
        for (int64_t h = 0; h < dst.heads(); ++h) {
          double& l = dst(b, op.dst_rows.begin + r, h, 0);
          const double li = src(b, r, h, 0);
          if (op.naive) {
            l = lse_merge_naive_fp32(static_cast<float>(l), static_cast<float>(li));
          } else if (dtype_ == Dtype::fp64) {
            l = lse_merge(l, li);
          } else {
            l = lse_merge_fp32(static_cast<float>(l), static_cast<float>(li));
          }
        }
      }
    }
  }

  void out_correction(RankState& st, const OutCorrectionOp& op, const std::string& where) {
    HCPSIM_ASSERT(op.dst != op.src && op.dst != op.src_lse && op.dst != op.lse, where + ": dst aliases an input");
    HostTensor& dst = live_buffer(st, op.dst, "out_correction dst");
    const HostTensor& src = live_buffer(st, op.src, "out_correction src");
    const HostTensor& src_lse = live_buffer(st, op.src_lse, "out_correction src_lse");
    const HostTensor& lse = live_buffer(st, op.lse, "out_correction lse");
    const int64_t count = op.dst_rows.count;
    check_rows(dst, op.dst_rows, where + " dst_rows");
    check_rows(lse, op.dst_rows, where + " lse rows");
    check_rows(src, RowRange{0, count}, where + " src rows");
    check_rows(src_lse, RowRange{0, count}, where + " src_lse rows");
    for (const HostTensor* t : {&src, &src_lse, &lse}) {
      HCPSIM_ASSERT(t->batch() == dst.batch(), where + ": batch differs");
      HCPSIM_ASSERT(t->heads() == dst.heads(), where + ": heads differ");
    }
    HCPSIM_ASSERT(src.width() == dst.width(), where + ": src width != dst width");
    HCPSIM_ASSERT(src_lse.width() == 1, where + ": src_lse width != 1");
    HCPSIM_ASSERT(lse.width() == 1, where + ": lse width != 1");
    const int64_t width = dst.width();
    for (int64_t b = 0; b < dst.batch(); ++b) {
      for (int64_t r = 0; r < count; ++r) {
        const int64_t row = op.dst_rows.begin + r;
        for (int64_t h = 0; h < dst.heads(); ++h) {
          const double step_lse = src_lse(b, r, h, 0);
          double* d = dst.data() + dst.index(b, row, h, 0);
          const double* s = src.data() + src.index(b, r, h, 0);
          if (step_lse == kNegInf) {  // the step saw no key for this row: contributes 0 (docstring)
            if (!op.accumulate) std::fill(d, d + width, 0.0);
            continue;
          }
          if (dtype_ == Dtype::fp64) {
            const double weight = std::exp(step_lse - lse(b, row, h, 0));
            for (int64_t w = 0; w < width; ++w) {
              if (op.accumulate) {
                d[w] += s[w] * weight;
              } else {
                d[w] = s[w] * weight;
              }
            }
            continue;
          }
          // fp32 weight and product (bf16 O_i times an fp32 tensor promotes to fp32), stored in dtype.
          const float weight = std::exp(static_cast<float>(step_lse) - static_cast<float>(lse(b, row, h, 0)));
          for (int64_t w = 0; w < width; ++w) {
            const float term = static_cast<float>(s[w]) * weight;
            const float sum = op.accumulate ? static_cast<float>(d[w]) + term : term;
            d[w] = round_to_dtype(static_cast<double>(sum), dtype_);
          }
        }
      }
    }
  }

  void copy(RankState& st, const CopyOp& op, const std::string& where) {
    HostTensor& dst = live_buffer(st, op.dst, "copy dst");
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
    const int64_t row_elements = dst.heads() * dst.width();
    for (int64_t b = 0; b < dst.batch(); ++b) {
      for (int64_t r = 0; r < op.dst_rows.count; ++r) {
        const double* s = src.data() + src.index(b, op.src_rows.begin + r, 0, 0);
        double* d = dst.data() + dst.index(b, op.dst_rows.begin + r, 0, 0);
        for (int64_t e = 0; e < row_elements; ++e) {
          if (op.accumulate) {
            d[e] = round_to_dtype(d[e] + s[e], acc_dtype_);
          } else {
            d[e] = s[e];
          }
        }
      }
    }
  }

  std::string deadlock_text() const {
    std::string text = "execute_schedule: deadlock, no rank can progress:";
    for (const RankState& st : ranks_) {
      if (st.finished()) continue;
      text += "\n  " + op_text(st, st.pc);
      if (const auto* sr = std::get_if<SendRecvOp>(&st.current().payload)) {
        text += fmt::format(" waits for a message from cp_rank {} tag {}", sr->recv_peer, sr->recv_tag);
      } else if (const auto* a2a = std::get_if<AllToAllOp>(&st.current().payload)) {
        text += fmt::format(" waits for all-to-all tag {} of group [{}]", a2a->tag, fmt::join(a2a->group, ", "));
      }
    }
    return text;
  }

  const Schedule& schedule_;
  int threads_;
  Dtype dtype_ = Dtype::fp64;
  Dtype acc_dtype_ = Dtype::fp64;
  double scale_ = 0;
  std::vector<RankState> ranks_;
  std::map<MessageKey, std::deque<std::vector<double>>> mailbox_;
  std::vector<HostTensor> spare_;  // storage of freed buffers, reused by allocate() for the same shape
  std::vector<std::vector<double>> spare_messages_;  // storage of delivered messages, reused by send_recv()
  ExecutionStats stats_;
};

}  // namespace

ExecutionResult execute_schedule(const Schedule& schedule, const AttentionInputs& inputs, int threads) {
  return execute_schedule(schedule, inputs, ExecutionOptions{threads, Dtype::fp64});
}

ExecutionResult execute_schedule(const Schedule& schedule, const AttentionInputs& inputs,
                                 const ExecutionOptions& options) {
  schedule.check_invariants();
  const AttentionShape& sh = schedule.shape;
  HCPSIM_ASSERT(has_shape(inputs.q, sh.batch, sh.seq_length, sh.heads_q, sh.head_dim_qk),
                "execute_schedule: q is not [B, S, H, dk] of schedule.shape");
  HCPSIM_ASSERT(has_shape(inputs.k, sh.batch, sh.seq_length, sh.heads_kv, sh.head_dim_qk),
                "execute_schedule: k is not [B, S, Hkv, dk] of schedule.shape");
  HCPSIM_ASSERT(has_shape(inputs.v, sh.batch, sh.seq_length, sh.heads_kv, sh.head_dim_v),
                "execute_schedule: v is not [B, S, Hkv, dv] of schedule.shape");
  HCPSIM_ASSERT(has_shape(inputs.dout, sh.batch, sh.seq_length, sh.heads_q, sh.head_dim_v),
                "execute_schedule: dout is not [B, S, H, dv] of schedule.shape");
  Executor executor(schedule, options);
  executor.load_inputs(inputs);
  executor.run();
  ExecutionResult result;
  result.outputs = executor.gather_outputs();
  result.stats = executor.stats();
  return result;
}

}  // namespace hcpsim
