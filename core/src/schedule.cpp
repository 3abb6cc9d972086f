#include "hcpsim/core/schedule.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/parallel_for.hpp"

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

std::string to_string(ScheduleKind k) { return k == ScheduleKind::layer ? "layer" : "attention"; }

bool section_matches(Section section, BlockMask mask, RowRange q_rows, RowRange kv_rows, int64_t q_buffer_rows,
                     int64_t kv_buffer_rows) {
  const RowRange all_q{0, q_buffer_rows}, all_kv{0, kv_buffer_rows};
  if (q_rows.count == 0 || kv_rows.count == 0) return true;
  switch (section) {
    case Section::diagonal: return mask != BlockMask::none;
    case Section::lower:
      return mask == BlockMask::none && q_rows == all_q && kv_buffer_rows % 2 == 0 &&
             kv_rows == RowRange{0, kv_buffer_rows / 2};
    case Section::upper:
      return mask == BlockMask::none && kv_rows == all_kv && q_buffer_rows % 2 == 0 &&
             q_rows == RowRange{q_buffer_rows / 2, q_buffer_rows / 2};
    case Section::full: return mask == BlockMask::none && kv_rows == all_kv;
  }
  return false;
}

RunBlocker numeric_run_blocker(const Schedule& schedule) {
  if (schedule.kind == ScheduleKind::attention) return {};
  return {"a layer schedule (whole transformer layer with timing-only GEMM and elementwise ops) cannot run numerically",
          "verify the attention schedule of the layer (build_schedule), or time it with simulate"};
}

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

OpIndex RankProgram::append(OpPayload payload, Phase phase, Stream stream, IndexList deps, Label label, int64_t ring_step, double flops, int64_t bytes) {
  Op op;
  op.payload = std::move(payload);
  op.phase = phase;
  op.stream = stream;
  op.deps = std::move(deps);
  op.label = std::move(label);
  HCPSIM_ASSERT(ring_step >= -1 && ring_step <= std::numeric_limits<int32_t>::max(), "ring step out of range");
  op.ring_step = static_cast<int32_t>(ring_step);
  op.flops = flops;
  op.bytes = bytes;
  ops.push_back(std::move(op));
  return static_cast<OpIndex>(ops.size() - 1);
}

BufferId RankProgram::buffer(const std::string& name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name) return static_cast<BufferId>(i);
  HCPSIM_ASSERT(false, "rank " + std::to_string(rank) + " has no buffer '" + name + "'");
}

double Schedule::total_flops(Phase phase) const {
  double total = 0;
  for (const auto& r : ranks)
    for (const auto& op : r.ops)
      if (op.phase == phase) total += op.flops;
  return total;
}

namespace {

/// (src, dst, tag) of a message.
using MessageKey = std::array<int64_t, 3>;

/// A set of message keys with open addressing (linear probing in a power-of-two table, kept at most half
/// full): the invariant check asks it once per message side whether the key came before, which a std::map
/// answered with a tree walk and a node allocation per key. Only membership is read, never the order.
class MessageKeySet {
 public:
  /// Adds `key`; false if it was already there.
  bool insert(const MessageKey& key) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const bool added = place(slots_, key);
    size_ += added ? 1 : 0;
    return added;
  }

 private:
  // Marks a free slot: no stored key starts with it (a send's src is its rank, a receive's src a checked peer ≥ 0).
  static constexpr int64_t kEmpty = std::numeric_limits<int64_t>::min();
  static size_t hash(const MessageKey& k) {
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int64_t v : k) {
      h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
      h *= 0xbf58476d1ce4e5b9ULL;  // splitmix64's multiplier (Steele, Lea, Flood, OOPSLA 2014)
      h ^= h >> 31;
    }
    return static_cast<size_t>(h);
  }
  static bool place(std::vector<MessageKey>& slots, const MessageKey& key) {
    const size_t mask = slots.size() - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      MessageKey& slot = slots[i];
      if (slot[0] == kEmpty) {
        slot = key;
        return true;
      }
      if (slot[0] == key[0] && slot[1] == key[1] && slot[2] == key[2]) return false;
    }
  }
  void grow() {
    std::vector<MessageKey> bigger(std::max<size_t>(64, 2 * slots_.size()), MessageKey{kEmpty, 0, 0});
    for (const MessageKey& k : slots_)
      if (k[0] != kEmpty) place(bigger, k);
    slots_ = std::move(bigger);
  }
  std::vector<MessageKey> slots_;
  size_t size_ = 0;
};

/// Walks a schedule's rank programs op by op and checks the invariants listed at Schedule::check_invariants,
/// one family per method, in the order they were always checked (the first violation aborts, so the order decides
/// which message a broken schedule reports).
struct Checker {
  explicit Checker(const Schedule& sched) : s(sched) {}

  /// Adds the messages and collective issues `other` (the checker of a later rank) collected, for the checks
  /// across ranks (check_messages_matched, check_collectives_complete), and frees them in `other`.
  void absorb(Checker& other) {
    sends.insert(sends.end(), other.sends.begin(), other.sends.end());
    recvs.insert(recvs.end(), other.recvs.begin(), other.recvs.end());
    for (const auto& [group, tag] : other.collectives) a2a_members[{*group, tag}] += 1;
    std::vector<std::pair<MessageKey, int64_t>>().swap(other.sends);
    std::vector<std::pair<MessageKey, int64_t>>().swap(other.recvs);
    std::vector<std::pair<const std::vector<int64_t>*, int64_t>>().swap(other.collectives);
  }
  /// Frees what only the rank's own checks read (after end_rank): the live flags and the message key sets.
  void end_rank_checks() {
    std::vector<int>().swap(live);
    send_keys = MessageKeySet{};
    recv_keys = MessageKeySet{};
  }

  const Schedule& s;
  const RankProgram* r = nullptr;
  std::vector<int> live;  // 0 = never allocated / freed, 1 = live
  size_t op_index = 0;
  // (src, dst, tag) and bytes of every send and receive, for matching them (sorted by key at the end), and the
  // keys seen so far, for rejecting a duplicate at the op that repeats it: a send's key names its own rank as
  // the source and a receive's as the destination, so a rank's checker sees every key that could repeat its own.
  std::vector<std::pair<MessageKey, int64_t>> sends, recvs;
  MessageKeySet send_keys, recv_keys;
  // tag -> (group, count of members that issued it)
  std::map<std::pair<std::vector<int64_t>, int64_t>, int64_t> a2a_members;
  // A rank's collective issues as (group, tag), the group in the schedule (which outlives the check): counted into
  // a2a_members when the ranks' findings are gathered, so no rank holds a copy of each group it is in.
  std::vector<std::pair<const std::vector<int64_t>*, int64_t>> collectives;

  std::string where() const {
    return "rank " + std::to_string(r->rank) + " op " + std::to_string(op_index) + " '" +
           r->ops[op_index].label + "'";
  }
  const Op& op() const { return r->ops[op_index]; }
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
  void member_of(const std::vector<int64_t>& group, const std::string& what) const {
    bool member = false;
    for (int64_t m : group) member = member || m == r->rank;
    HCPSIM_ASSERT(member, where() + ": rank is not a member of its " + what + " group");
  }

  /// A binding's tokens: one per buffer row in an attention schedule, none in a (timing-only) layer schedule.
  bool tokens_ok(const IoBinding& b, const BufferDecl& buffer) const {
    return s.kind == ScheduleKind::layer ? b.tokens.empty() : static_cast<int64_t>(b.tokens.size()) == buffer.rows;
  }

  /// Rank order and input bindings: each input's token count matches its buffer, which starts live.
  void begin_rank(const RankProgram& rank) {
    r = &rank;
    live.assign(rank.buffers.size(), 0);
    HCPSIM_ASSERT(rank.rank == static_cast<int64_t>(&rank - s.ranks.data()),
                  "rank programs must be in rank order (RankProgram::rank = index in Schedule::ranks)");
    HCPSIM_ASSERT(rank.tp_rank >= 0 && rank.tp_rank < s.tp_size, "tp_rank outside [0, tp_size)");
    HCPSIM_ASSERT(rank.rank == rank.cp_rank * s.tp_size + rank.tp_rank,
                  "rank != cp_rank * tp_size + tp_rank (an attention schedule has rank = cp_rank)");
    for (const auto& b : rank.inputs) {
      op_index = 0;
      HCPSIM_ASSERT(tokens_ok(b, rank.buffers.at(static_cast<size_t>(b.buffer))),
                    "input binding '" + b.tensor + "' token count != buffer rows (none in a layer schedule)");
      live[static_cast<size_t>(b.buffer)] = 1;
    }
  }

  /// Streams: communication only on Stream::comm, compute ops never on it (alloc/free may run anywhere).
  void check_stream() const {
    const bool is_comm = is_communication(op().kind());
    const bool is_memory = op().kind() == OpKind::alloc || op().kind() == OpKind::free;
    HCPSIM_ASSERT(!is_comm || op().stream == Stream::comm, where() + ": communication must run on the comm stream");
    HCPSIM_ASSERT(is_comm || is_memory || op().stream != Stream::comm, where() + ": compute op on the comm stream");
  }

  /// Dependencies point to earlier ops of the same rank.
  void check_deps() const {
    for (OpIndex d : op().deps) {
      HCPSIM_ASSERT(d >= 0, where() + ": negative dependency");
      HCPSIM_ASSERT(static_cast<size_t>(d) < op_index, where() + ": dependency must point to an earlier op");
    }
  }

  // ---- payloads: one overload per op kind ----

  /// Buffer lifetimes: alloc of a buffer that is not live, free of a live one.
  void payload(const AllocOp& p) {
    buf(p.buffer);
    HCPSIM_ASSERT(live[static_cast<size_t>(p.buffer)] == 0, where() + ": alloc of a live buffer");
    live[static_cast<size_t>(p.buffer)] = 1;
  }
  void payload(const FreeOp& p) {
    use(p.buffer);
    live[static_cast<size_t>(p.buffer)] = 0;
  }

  /// All-to-all: shapes of a head scatter / gather over the group, chunk order, membership (counted per tag).
  void payload(const AllToAllOp& p) {
    use(p.input);
    use(p.output);
    const int64_t A = static_cast<int64_t>(p.group.size());
    HCPSIM_ASSERT(static_cast<int64_t>(p.chunk_order.size()) == 2 * A, where() + ": chunk_order size != 2A");
    const auto& in = buf(p.input);
    const auto& out = buf(p.output);
    if (p.direction == AllToAllOp::Direction::scatter_heads) {
      HCPSIM_ASSERT(out.rows == A * in.rows, where() + ": scatter output rows != A * input rows");
      HCPSIM_ASSERT(in.heads == A * out.heads, where() + ": scatter heads not divisible");
    } else {
      HCPSIM_ASSERT(in.rows == A * out.rows, where() + ": gather input rows != A * output rows");
      HCPSIM_ASSERT(out.heads == A * in.heads, where() + ": gather heads not divisible");
    }
    HCPSIM_ASSERT(in.width == out.width, where() + ": a2a width mismatch");
    HCPSIM_ASSERT(p.input != p.output, where() + ": a2a input and output alias");
    member_of(p.group, "a2a");
    collectives.emplace_back(&p.group, p.tag);
  }

  /// All-gather / reduce-scatter along the sequence: shapes, chunk order, membership (counted per tag).
  template <class T>
  void sequence_collective(const T& p, bool gather) {
    use(p.input);
    use(p.output);
    HCPSIM_ASSERT(p.input != p.output, where() + ": collective input and output alias");
    const int64_t n = static_cast<int64_t>(p.group.size());
    HCPSIM_ASSERT(static_cast<int64_t>(p.chunk_order.size()) == 2 * n, where() + ": chunk_order size != 2n");
    const auto& in = buf(p.input);
    const auto& out = buf(p.output);
    HCPSIM_ASSERT((gather ? out.rows == n * in.rows : in.rows == n * out.rows),
                  where() + ": collective rows != group size × member rows");
    HCPSIM_ASSERT(in.heads == out.heads, where() + ": collective heads mismatch");
    HCPSIM_ASSERT(in.width == out.width, where() + ": collective width mismatch");
    member_of(p.group, "collective");
    collectives.emplace_back(&p.group, p.tag);
  }
  void payload(const AllGatherOp& p) { sequence_collective(p, true); }
  void payload(const ReduceScatterOp& p) { sequence_collective(p, false); }

  /// Messages and peers: buffers live, peers set exactly when buffers are, no duplicate (src, dst, tag).
  void payload(const SendRecvOp& p) {
    int64_t sb = 0, rbytes = 0;
    for (BufferId id : p.send) { use(id); sb += buf(id).size_bytes(); }
    for (BufferId id : p.recv) { use(id); rbytes += buf(id).size_bytes(); }
    HCPSIM_ASSERT(p.send.empty() == (p.send_peer < 0), where() + ": send peer and buffers disagree");
    HCPSIM_ASSERT(p.recv.empty() == (p.recv_peer < 0), where() + ": recv peer and buffers disagree");
    if (!p.send.empty()) {
      const MessageKey key{r->rank, p.send_peer, p.send_tag};
      HCPSIM_ASSERT(send_keys.insert(key), where() + ": duplicate message");
      sends.emplace_back(key, sb);
    }
    if (!p.recv.empty()) {
      const MessageKey key{p.recv_peer, r->rank, p.recv_tag};
      HCPSIM_ASSERT(recv_keys.insert(key), where() + ": duplicate receive");
      recvs.emplace_back(key, rbytes);
    }
  }

  void payload(const GemmOp& p) const {
    HCPSIM_ASSERT(s.kind == ScheduleKind::layer, where() + ": a GEMM op in an attention schedule (layer schedules only)");
    HCPSIM_ASSERT(p.m >= 0 && p.n >= 0 && p.k >= 0, where() + ": negative GEMM dimension");
  }
  void payload(const ElementwiseOp&) const {
    HCPSIM_ASSERT(s.kind == ScheduleKind::layer,
                  where() + ": an elementwise op in an attention schedule (layer schedules only)");
    HCPSIM_ASSERT(op().bytes >= 0, where() + ": negative elementwise bytes");
  }

  /// Attention blocks: row ranges inside live buffers, output shapes match the query rows, GQA divisibility.
  void payload(const AttnFwdBlockOp& p) const {
    rows(p.q, p.q_rows);
    rows(p.k, p.kv_rows);
    rows(p.v, p.kv_rows);
    use(p.out);
    use(p.lse);
    HCPSIM_ASSERT(buf(p.out).rows == p.q_rows.count, where() + ": out rows != q rows");
    HCPSIM_ASSERT(buf(p.lse).rows == p.q_rows.count, where() + ": lse rows != q rows");
    HCPSIM_ASSERT(buf(p.q).heads % buf(p.k).heads == 0, where() + ": GQA heads not divisible");
    HCPSIM_ASSERT(buf(p.lse).width == 1, where() + ": lse width must be 1");
    HCPSIM_ASSERT(buf(p.out).heads == buf(p.q).heads, where() + ": out heads != q heads");
    HCPSIM_ASSERT(buf(p.out).width == buf(p.v).width, where() + ": out width != v width");
    section(p);
  }
  void payload(const AttnBwdBlockOp& p) const {
    rows(p.q, p.q_rows);
    rows(p.out, p.q_rows);
    rows(p.dout, p.q_rows);
    rows(p.lse, p.q_rows);
    rows(p.k, p.kv_rows);
    rows(p.v, p.kv_rows);
    use(p.dq);
    use(p.dk);
    use(p.dv);
    HCPSIM_ASSERT(buf(p.dq).rows == p.q_rows.count, where() + ": dq rows != q rows");
    HCPSIM_ASSERT(buf(p.dk).rows == p.kv_rows.count, where() + ": dk rows != kv rows");
    HCPSIM_ASSERT(buf(p.dv).rows == p.kv_rows.count, where() + ": dv rows != kv rows");
    section(p);
  }
  /// The block's Section label agrees with its rows and mask (section_matches).
  template <typename BlockOp>
  void section(const BlockOp& p) const {
    HCPSIM_ASSERT(section_matches(p.section, p.mask, p.q_rows, p.kv_rows, buf(p.q).rows, buf(p.k).rows),
                  where() + ": section " + to_string(p.section) + " does not match the block's rows and mask");
    if (p.doc.empty()) return;  // THD: the document mask's runs cover the block's rows exactly
    HCPSIM_ASSERT(runs_rows(p.doc.get().q) == p.q_rows.count, where() + ": document mask q runs != q rows");
    HCPSIM_ASSERT(runs_rows(p.doc.get().kv) == p.kv_rows.count, where() + ": document mask kv runs != kv rows");
  }

  /// Merges and corrections: row ranges, LSE width 1, no merge into its own source.
  void payload(const LseMergeOp& p) const {
    rows(p.dst, p.dst_rows);
    rows(p.src, {0, p.dst_rows.count});
    HCPSIM_ASSERT(buf(p.dst).width == 1, where() + ": lse width must be 1");
    HCPSIM_ASSERT(buf(p.src).width == 1, where() + ": lse width must be 1");
    HCPSIM_ASSERT(p.dst != p.src, where() + ": lse merge into its own source");
  }
  void payload(const OutCorrectionOp& p) const {
    rows(p.dst, p.dst_rows);
    rows(p.lse, p.dst_rows);
    rows(p.src, {0, p.dst_rows.count});
    rows(p.src_lse, {0, p.dst_rows.count});
    same_row_shape(p.dst, p.src);
    HCPSIM_ASSERT(buf(p.lse).width == 1, where() + ": lse width must be 1");
    HCPSIM_ASSERT(buf(p.src_lse).width == 1, where() + ": lse width must be 1");
    HCPSIM_ASSERT(buf(p.lse).heads == buf(p.dst).heads, where() + ": lse heads != out heads");
    HCPSIM_ASSERT(p.dst != p.src, where() + ": out correction into its own source");
  }

  /// Copies: equal row counts, no overlap within one buffer, same row shape.
  void payload(const CopyOp& p) const {
    rows(p.dst, p.dst_rows);
    rows(p.src, p.src_rows);
    HCPSIM_ASSERT(p.dst_rows.count == p.src_rows.count, where() + ": copy row counts differ");
    HCPSIM_ASSERT(p.dst != p.src || p.dst_rows.end() <= p.src_rows.begin || p.src_rows.end() <= p.dst_rows.begin,
                  where() + ": copy between overlapping rows of one buffer");
    same_row_shape(p.dst, p.src);
  }

  /// Output bindings: buffer in range, live at the end, token count matches.
  void end_rank() const {
    for (const auto& b : r->outputs) {
      HCPSIM_ASSERT(b.buffer >= 0 && static_cast<size_t>(b.buffer) < r->buffers.size(),
                    "output buffer id out of range");
      HCPSIM_ASSERT(live[static_cast<size_t>(b.buffer)] == 1,
                    "rank " + std::to_string(r->rank) + ": output '" + b.tensor + "' is not live at the end");
      HCPSIM_ASSERT(tokens_ok(b, r->buffers[static_cast<size_t>(b.buffer)]),
                    "output binding '" + b.tensor + "' token count != buffer rows (none in a layer schedule)");
    }
  }

  /// Messages across ranks: every send has exactly one receive of the same size. Sends are visited in key
  /// order, so a schedule with several unmatched sends reports the smallest key.
  void check_messages_matched() {
    HCPSIM_ASSERT(sends.size() == recvs.size(), "every send needs exactly one matching receive");
    std::sort(sends.begin(), sends.end());  // keys are unique (the duplicate checks), so bytes never decide
    std::sort(recvs.begin(), recvs.end());
    for (const auto& [key, bytes] : sends) {
      const auto it = std::lower_bound(recvs.begin(), recvs.end(), key,
                                       [](const std::pair<MessageKey, int64_t>& e, const MessageKey& k) {
                                         return e.first < k;
                                       });
      HCPSIM_ASSERT(it != recvs.end() && it->first == key,
                    "message " + std::to_string(key[0]) + "->" + std::to_string(key[1]) + " tag " +
                        std::to_string(key[2]) + " has no receive");
      HCPSIM_ASSERT(it->second == bytes, "message size differs between send and receive");
    }
  }

  /// Collectives across ranks: every (group, tag) is issued by every member of the group.
  void check_collectives_complete() const {
    for (const auto& [key, count] : a2a_members)
      HCPSIM_ASSERT(count == static_cast<int64_t>(key.first.size()),
                    "all-to-all tag " + std::to_string(key.second) + " is not issued by every group member");
  }
};

}  // namespace

void Schedule::check_invariants(int threads) const {
  HCPSIM_ASSERT(static_cast<int64_t>(ranks.size()) == tp_size * a2a_size * p2p_size,
                "one program per CP rank (per TP x CP rank in a layer schedule)");
  // Each rank's program is checked on its own (one work item per rank); what the checks across ranks need is
  // gathered in rank order afterwards, so a valid schedule passes, and the checks across ranks report the same,
  // for any thread count (a violation inside one rank's program: see the header).
  std::vector<Checker> per_rank(ranks.size(), Checker(*this));
  parallel_for(static_cast<int64_t>(ranks.size()), threads, [&](int64_t index) {
    Checker& c = per_rank[static_cast<size_t>(index)];
    const RankProgram& r = ranks[static_cast<size_t>(index)];
    c.begin_rank(r);
    for (size_t i = 0; i < r.ops.size(); ++i) {
      c.op_index = i;
      c.check_stream();
      c.check_deps();
      std::visit([&](const auto& p) { c.payload(p); }, r.ops[i].payload);
    }
    c.end_rank();
    c.end_rank_checks();
  });
  Checker all(*this);
  size_t sends = 0, recvs = 0;
  for (const Checker& c : per_rank) {
    sends += c.sends.size();
    recvs += c.recvs.size();
  }
  all.sends.reserve(sends);
  all.recvs.reserve(recvs);
  for (Checker& c : per_rank) all.absorb(c);
  per_rank.clear();
  all.check_messages_matched();
  all.check_collectives_complete();
}

}  // namespace hcpsim
