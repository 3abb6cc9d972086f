#include "hcpsim/core/schedule_builder.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

double attn_fwd_flops_per_pair(int64_t head_dim_qk, int64_t head_dim_v) {
  return 2.0 * static_cast<double>(head_dim_qk + head_dim_v);
}

double attn_bwd_flops_per_pair(int64_t head_dim_qk, int64_t head_dim_v) {
  return 2.0 * static_cast<double>(3 * head_dim_qk + 2 * head_dim_v);
}

int64_t block_pairs(int64_t q_rows, int64_t kv_rows, BlockMask mask) {
  if (mask == BlockMask::none) return q_rows * kv_rows;
  if (mask == BlockMask::causal_bottom_right) {
    // Row r sees kv rows 0..r + (kv_rows − q_rows), clamped to [0, kv_rows].
    int64_t pairs = 0;
    for (int64_t r = 0; r < q_rows; ++r) pairs += std::clamp<int64_t>(r + kv_rows - q_rows + 1, 0, kv_rows);
    return pairs;
  }
  // Top-left causal: row r sees kv rows 0..min(r, kv_rows-1).
  int64_t pairs = 0;
  int64_t full_rows = std::min(q_rows, kv_rows);
  pairs += full_rows * (full_rows + 1) / 2;
  if (q_rows > kv_rows) pairs += (q_rows - kv_rows) * kv_rows;
  return pairs;
}

namespace {

// Message tags: identical on every member of a collective and on both ends of a message.
constexpr int64_t kTagFwdA2aQ = 1, kTagFwdA2aK = 2, kTagFwdA2aV = 3, kTagFwdA2aOut = 4;
constexpr int64_t kTagBwdA2aDout = 11, kTagBwdA2aDq = 12, kTagBwdA2aDk = 13, kTagBwdA2aDv = 14;
constexpr int64_t kTagFwdRing = 1000, kTagBwdRing = 2000;
constexpr int64_t kTagFwdAgK = 21, kTagBwdAgK = 31, kTagBwdRsDk = 33, kTagBwdRsDv = 34;  // all_gather (+1: v)

int64_t mod(int64_t x, int64_t m) { return ((x % m) + m) % m; }

/// Appends buffers and ops to one rank's program.
class RankBuilder {
 public:
  RankBuilder(RankProgram& prog, const AttentionShape& shape) : prog_(prog), shape_(shape) {}

  BufferId declare(const std::string& name, int64_t rows, int64_t heads, int64_t width, Dtype dtype) {
    prog_.buffers.push_back(BufferDecl{name, shape_.batch, rows, heads, width, dtype});
    return static_cast<BufferId>(prog_.buffers.size() - 1);
  }

  OpIndex add(OpPayload payload, Phase phase, Stream stream, std::vector<OpIndex> deps, std::string label,
              int64_t ring_step = -1, double flops = 0, int64_t bytes = 0) {
    Op op;
    op.payload = std::move(payload);
    op.phase = phase;
    op.stream = stream;
    op.deps = std::move(deps);
    op.label = std::move(label);
    op.ring_step = ring_step;
    op.flops = flops;
    op.bytes = bytes;
    prog_.ops.push_back(std::move(op));
    return static_cast<OpIndex>(prog_.ops.size() - 1);
  }

  /// Declares a buffer and emits its AllocOp on `stream`.
  BufferId alloc(const std::string& name, int64_t rows, int64_t heads, int64_t width, Dtype dtype, Phase phase,
                 Stream stream) {
    BufferId id = declare(name, rows, heads, width, dtype);
    add(AllocOp{id}, phase, stream, {}, "alloc " + name);
    return id;
  }

  OpIndex free(BufferId id, Phase phase, Stream stream, std::vector<OpIndex> deps = {}) {
    return add(FreeOp{id}, phase, stream, std::move(deps), "free " + prog_.buffers[static_cast<size_t>(id)].name);
  }

  int64_t bytes_of(BufferId id) const { return prog_.buffers[static_cast<size_t>(id)].size_bytes(); }
  int64_t row_bytes(BufferId id) const {
    const auto& b = prog_.buffers[static_cast<size_t>(id)];
    return b.batch * b.heads * b.width * dtype_size_bytes(b.dtype);
  }

  /// Elementwise copy/add of rows; bytes = read src (+ dst when adding) + write dst.
  OpIndex copy(BufferId dst, RowRange dst_rows, BufferId src, RowRange src_rows, bool accumulate, Phase phase,
               Stream stream, std::vector<OpIndex> deps, const std::string& label, int64_t ring_step = -1) {
    int64_t bytes = row_bytes(src) * src_rows.count * (accumulate ? 3 : 2);
    return add(CopyOp{dst, src, dst_rows, src_rows, accumulate}, phase, stream, std::move(deps), label, ring_step, 0,
               bytes);
  }

  RankProgram& prog() { return prog_; }

 private:
  RankProgram& prog_;
  const AttentionShape& shape_;
};

struct RowsOfSection {
  RowRange q, kv;
  BlockMask mask;
};

RowsOfSection rows_of(Section s, int64_t C) {
  switch (s) {
    case Section::diagonal: return {{0, 2 * C}, {0, 2 * C}, BlockMask::causal};
    case Section::lower: return {{0, 2 * C}, {0, C}, BlockMask::none};
    case Section::upper: return {{C, C}, {0, 2 * C}, BlockMask::none};
    case Section::full: return {{0, 2 * C}, {0, 2 * C}, BlockMask::none};
  }
  HCPSIM_ASSERT(false, "unknown section");
}

/// Forward section of step i on p2p rank p (docs/algorithm.md §4.2).
Section fwd_section(bool causal, int64_t P, int64_t p, int64_t i) {
  if (!causal) return Section::full;
  if (P == 1 || i == 0) return Section::diagonal;
  return i <= p ? Section::lower : Section::upper;
}

/// Backward section of step i on p2p rank p (docs/algorithm.md §5.1).
Section bwd_section(bool causal, int64_t P, int64_t p, int64_t i) {
  if (!causal) return Section::full;
  if (i == P - 1) return Section::diagonal;
  return i >= P - p - 1 ? Section::lower : Section::upper;
}

void build_rank(Schedule& sched, const CpLayout& layout, int64_t g, const BuilderFaults& faults) {
  const AttentionShape& sh = sched.shape;
  const int64_t A = layout.a2a_size(), P = layout.p2p_size();
  const int64_t a = layout.a2a_rank(g), p = layout.p2p_rank(g);
  const int64_t s_f = 2 * layout.chunk_size();  // tokens per rank before the a2a, S/cp
  const int64_t C = layout.super_chunk_size();  // S/(2P)
  const int64_t s_l = 2 * C;                    // tokens per rank after the a2a, S/P
  const int64_t H = sh.heads_q, Hkv = sh.heads_kv, dk = sh.head_dim_qk, dv = sh.head_dim_v;
  const int64_t Hl = H / A, Hkvl = Hkv / A;
  const Dtype dt = sh.dtype;
  const bool causal = sh.causal;
  const double fwd_pair = attn_fwd_flops_per_pair(dk, dv) * static_cast<double>(sh.batch * Hl);
  const double bwd_pair = attn_bwd_flops_per_pair(dk, dv) * static_cast<double>(sh.batch * Hl);

  RankProgram& prog = sched.ranks[static_cast<size_t>(g)];
  prog.cp_rank = g;
  // Reserve about what the program below appends (~24 ops and ~9 buffers per ring step, fewer than 80 ops and 30
  // buffers outside the ring), so that growing the vectors does not move the ops already built (each holds a
  // label and a deps vector). Capacity only; the program is unchanged.
  prog.ops.reserve(static_cast<size_t>(25 * P + 80));
  prog.buffers.reserve(static_cast<size_t>(9 * P + 30));
  RankBuilder rb(prog, sh);
  const auto F = Phase::forward;
  const auto B = Phase::backward;
  const auto cs = Stream::compute;
  const auto comm = Stream::comm;

  // ---- inputs, zigzag-sharded with the flat CP rank (docs/algorithm.md §2.1) ----
  const auto flat_tokens = layout.tokens_before_a2a(g);
  BufferId q = rb.declare("q", s_f, H, dk, dt);        // [b, S/cp, H, dk]
  BufferId k = rb.declare("k", s_f, Hkv, dk, dt);      // [b, S/cp, Hkv, dk]
  BufferId v = rb.declare("v", s_f, Hkv, dv, dt);      // [b, S/cp, Hkv, dv]
  BufferId dout = rb.declare("dout", s_f, H, dv, dt);  // [b, S/cp, H, dv]
  prog.inputs = {{"q", q, flat_tokens, 0}, {"k", k, flat_tokens, 0}, {"v", v, flat_tokens, 0},
                 {"dout", dout, flat_tokens, 0}};

  const auto group = layout.a2a_group(p);
  const auto before = CpLayout::chunk_ids_before_attn(A);
  const auto after = CpLayout::chunk_ids_after_attn(A);
  auto a2a = [&](AllToAllOp::Direction dir, BufferId in, BufferId out, int64_t tag, Phase ph,
                 std::vector<OpIndex> deps, const std::string& label) {
    AllToAllOp op{dir, group, dir == AllToAllOp::Direction::scatter_heads ? before : after, in, out, tag};
    return rb.add(op, ph, comm, std::move(deps), label, -1, 0, rb.bytes_of(in));
  };

  // ---- forward a2a: scatter heads, gather sequence (TE flash_attn_a2a_communicate before_attn) ----
  BufferId qa = q, ka = k, va = v;
  std::vector<OpIndex> fwd_ready;  // ops the first attention kernel waits for
  if (A > 1) {
    qa = rb.alloc("q.a2a", s_l, Hl, dk, dt, F, comm);  // [b, S/P, H/A, dk]
    ka = rb.alloc("k.a2a", s_l, Hkvl, dk, dt, F, comm);
    va = rb.alloc("v.a2a", s_l, Hkvl, dv, dt, F, comm);
    fwd_ready.push_back(a2a(AllToAllOp::Direction::scatter_heads, q, qa, kTagFwdA2aQ, F, {}, "fwd a2a q"));
    fwd_ready.push_back(a2a(AllToAllOp::Direction::scatter_heads, k, ka, kTagFwdA2aK, F, {}, "fwd a2a k"));
    fwd_ready.push_back(a2a(AllToAllOp::Direction::scatter_heads, v, va, kTagFwdA2aV, F, {}, "fwd a2a v"));
  }

  // ---- forward ring (TE AttnFuncWithCPAndKVP2P.forward, docs/algorithm.md §4) ----
  const int64_t next = layout.cp_rank(mod(p + 1, P), a);
  const int64_t prev = layout.cp_rank(mod(p - 1, P), a);
  std::vector<BufferId> ring_k(static_cast<size_t>(P)), ring_v(static_cast<size_t>(P));
  // p2p_comm_buffers[0] = cat(k, v): a copy of the local KV.
  ring_k[0] = rb.alloc("kv_ring0.k", s_l, Hkvl, dk, dt, F, cs);
  ring_v[0] = rb.alloc("kv_ring0.v", s_l, Hkvl, dv, dt, F, cs);
  rb.copy(ring_k[0], {0, s_l}, ka, {0, s_l}, false, F, cs, fwd_ready, "fwd kv ring buffer 0 (k)");
  const OpIndex kv0_v = rb.copy(ring_v[0], {0, s_l}, va, {0, s_l}, false, F, cs, {}, "fwd kv ring buffer 0 (v)");

  std::vector<BufferId> out_step(static_cast<size_t>(P)), lse_step(static_cast<size_t>(P));
  std::vector<OpIndex> comm_op(static_cast<size_t>(P), -1);
  std::vector<Section> fsec(static_cast<size_t>(P));
  BufferId lse = -1;
  OpIndex last_merge = -1;
  for (int64_t i = 0; i < P; ++i) {
    const size_t iu = static_cast<size_t>(i);
    const Stream st = (i % 2 == 0) ? Stream::compute : Stream::cp;
    if (i < P - 1) {
      ring_k[iu + 1] = rb.alloc("kv_ring" + std::to_string(i + 1) + ".k", s_l, Hkvl, dk, dt, F, comm);
      ring_v[iu + 1] = rb.alloc("kv_ring" + std::to_string(i + 1) + ".v", s_l, Hkvl, dv, dt, F, comm);
      SendRecvOp m{next, prev, {ring_k[iu], ring_v[iu]}, {ring_k[iu + 1], ring_v[iu + 1]}, kTagFwdRing + i,
                   kTagFwdRing + i};
      std::vector<OpIndex> deps;
      if (i == 0) deps.push_back(kv0_v);
      comm_op[iu] = rb.add(m, F, comm, deps, "fwd step " + std::to_string(i) + " send/recv kv", i, 0,
                           rb.bytes_of(ring_k[iu]) + rb.bytes_of(ring_v[iu]));
    }
    Section sec = fwd_section(causal, P, p, i);
    if (faults.swapped_causal_sections && sec == Section::lower) {
      sec = Section::upper;
    } else if (faults.swapped_causal_sections && sec == Section::upper) {
      sec = Section::lower;
    }
    fsec[iu] = sec;
    const auto rows = rows_of(sec, C);
    out_step[iu] = rb.alloc("out_step" + std::to_string(i), rows.q.count, Hl, dv, dt, F, st);
    lse_step[iu] = rb.alloc("lse_step" + std::to_string(i), rows.q.count, Hl, 1, Dtype::fp32, F, st);
    std::vector<OpIndex> deps;
    if (i == 0) deps.push_back(kv0_v);
    if (i > 0) deps.push_back(comm_op[iu - 1]);  // KV of step i has arrived
    const double flops = fwd_pair * static_cast<double>(block_pairs(rows.q.count, rows.kv.count, rows.mask));
    OpIndex kernel = rb.add(
        AttnFwdBlockOp{qa, ring_k[iu], ring_v[iu], rows.q, rows.kv, rows.mask, sec, out_step[iu], lse_step[iu]}, F,
        st, deps, "fwd step " + std::to_string(i) + " " + to_string(sec), i, flops,
        rb.bytes_of(qa) + rb.bytes_of(ring_k[iu]) + rb.bytes_of(ring_v[iu]) + rb.bytes_of(out_step[iu]));
    // softmax_lse merge (TE flash_attn_fwd_softmax_lse_correction), chained across the two streams.
    if (i == 0) {
      lse = rb.alloc("softmax_lse", s_l, Hl, 1, Dtype::fp32, F, st);  // [b, S/P, H/A] fp32
      last_merge = rb.copy(lse, {0, s_l}, lse_step[0], {0, s_l}, false, F, st, {kernel}, "fwd lse init", 0);
    } else {
      RowRange dst = rows.q;
      std::vector<OpIndex> mdeps{kernel, last_merge};
      last_merge = rb.add(LseMergeOp{lse, lse_step[iu], dst, false}, F, st, mdeps,
                          "fwd step " + std::to_string(i) + " lse merge", i, 0, dst.count * sh.batch * Hl * 4 * 3);
    }
  }

  // ---- output correction, sequential on the current stream after the ring (TE L1980-2028) ----
  BufferId out_a = rb.alloc(A > 1 ? "out.a2a" : "out", s_l, Hl, dv, dt, F, cs);  // [b, S/P, H/A, dv]
  OpIndex last_corr = -1;
  for (int64_t i = 0; i < P; ++i) {
    const size_t iu = static_cast<size_t>(i);
    const auto rows = rows_of(fsec[iu], C);
    std::vector<OpIndex> deps{last_merge};
    last_corr = rb.add(OutCorrectionOp{out_a, out_step[iu], lse_step[iu], lse, rows.q, i > 0}, F, cs, deps,
                       "fwd out correction " + std::to_string(i), i, 0,
                       rows.q.count * rb.row_bytes(out_a) * (i > 0 ? 3 : 2));
    rb.free(out_step[iu], F, cs);
    rb.free(lse_step[iu], F, cs);
  }
  BufferId out = out_a;
  OpIndex fwd_done = last_corr;
  if (A > 1) {
    out = rb.alloc("out", s_f, H, dv, dt, F, comm);  // [b, S/cp, H, dv]
    fwd_done = a2a(AllToAllOp::Direction::gather_heads, out_a, out, kTagFwdA2aOut, F, {last_corr}, "fwd a2a out");
    rb.free(ka, F, comm);  // post-a2a k, v are not saved for backward
    rb.free(va, F, comm);
  }
  // Forward keeps only the last KV buffer for backward (TE saves kv = p2p_comm_buffers[P-1]).
  for (int64_t i = 0; i + 1 < P; ++i) {
    rb.free(ring_k[static_cast<size_t>(i)], F, comm, {fwd_done});
    rb.free(ring_v[static_cast<size_t>(i)], F, comm, {fwd_done});
  }

  // ---- backward (TE AttnFuncWithCPAndKVP2P.backward, docs/algorithm.md §5) ----
  BufferId douta = dout;
  std::vector<OpIndex> bwd_ready{fwd_done};
  if (A > 1) {
    douta = rb.alloc("dout.a2a", s_l, Hl, dv, dt, B, comm);
    bwd_ready.push_back(
        a2a(AllToAllOp::Direction::scatter_heads, dout, douta, kTagBwdA2aDout, B, {fwd_done}, "bwd a2a dout"));
  }
  BufferId dqa = rb.alloc(A > 1 ? "dq.a2a" : "dq", s_l, Hl, dk, dt, B, cs);  // [b, S/P, H/A, dk]
  // Two [KV | dKV] ring buffers. B0's KV is the saved last forward buffer (copied, as TE does).
  struct KvBuf { BufferId k, v, dk, dv; };
  KvBuf buf[2];
  const BufferId saved_k = ring_k[static_cast<size_t>(P - 1)], saved_v = ring_v[static_cast<size_t>(P - 1)];
  OpIndex b0_copy = -1;
  BufferId stale_k = -1, stale_v = -1;  // fault stale_kv_backward only
  if (P == 1) {
    buf[0] = {saved_k, saved_v, -1, -1};
    buf[0].dk = rb.alloc(A > 1 ? "dk.a2a" : "dk", s_l, Hkvl, dk, dt, B, cs);
    buf[0].dv = rb.alloc(A > 1 ? "dv.a2a" : "dv", s_l, Hkvl, dv, dt, B, cs);
  } else {
    for (int j = 0; j < 2; ++j) {
      const std::string n = "bwd_ring" + std::to_string(j);
      buf[j].k = rb.alloc(n + ".k", s_l, Hkvl, dk, dt, B, cs);
      buf[j].v = rb.alloc(n + ".v", s_l, Hkvl, dv, dt, B, cs);
      buf[j].dk = rb.alloc(n + ".dk", s_l, Hkvl, dk, dt, B, cs);
      buf[j].dv = rb.alloc(n + ".dv", s_l, Hkvl, dv, dt, B, cs);
    }
    rb.copy(buf[0].k, {0, s_l}, saved_k, {0, s_l}, false, B, cs, bwd_ready, "bwd ring buffer 0 (k)");
    b0_copy = rb.copy(buf[0].v, {0, s_l}, saved_v, {0, s_l}, false, B, cs, {}, "bwd ring buffer 0 (v)");
    if (faults.stale_kv_backward) {
      stale_k = rb.alloc("bwd_stale.k", s_l, Hkvl, dk, dt, B, cs);
      stale_v = rb.alloc("bwd_stale.v", s_l, Hkvl, dv, dt, B, cs);
      rb.copy(stale_k, {0, s_l}, saved_k, {0, s_l}, false, B, cs, {}, "bwd stale kv (k)");
      b0_copy = rb.copy(stale_v, {0, s_l}, saved_v, {0, s_l}, false, B, cs, {}, "bwd stale kv (v)");
    }
    rb.free(saved_k, B, cs);
    rb.free(saved_v, B, cs);
  }

  const int64_t bprev = prev, bnext = next;  // backward ring: send to p-1, receive from p+1
  OpIndex prev_comm = -1, prev_accum = b0_copy;
  std::vector<OpIndex> last_bwd_ops;
  for (int64_t i = 0; i < P; ++i) {
    const int cur = static_cast<int>(i % 2), nxt = static_cast<int>((i + 1) % 2);
    OpIndex comm_i = -1;
    if (P > 1) {
      SendRecvOp m{bprev, bnext, {}, {}, kTagBwdRing + i, kTagBwdRing + i};
      if (i == 0) {
        m.send = {buf[cur].k, buf[cur].v};
        m.recv = {buf[nxt].k, buf[nxt].v};
      } else if (i < P - 1) {
        m.send = {buf[cur].k, buf[cur].v, buf[cur].dk, buf[cur].dv};
        m.recv = {buf[nxt].k, buf[nxt].v, buf[nxt].dk, buf[nxt].dv};
      } else {
        m.send = {buf[cur].dk, buf[cur].dv};
        m.recv = {buf[nxt].dk, buf[nxt].dv};
      }
      int64_t bytes = 0;
      for (BufferId id : m.send) bytes += rb.bytes_of(id);
      std::vector<OpIndex> deps{prev_accum};
      for (OpIndex r : bwd_ready) deps.push_back(r);
      const char* what = i == 0 ? " send/recv kv" : (i < P - 1 ? " send/recv kv+dkv" : " send/recv dkv");
      comm_i = rb.add(m, B, comm, deps, "bwd step " + std::to_string(i) + what, i, 0, bytes);
    }
    const Section sec = bwd_section(causal, P, p, i);
    const auto rows = rows_of(sec, C);
    const std::string step = "bwd step " + std::to_string(i);
    BufferId dq_ = rb.alloc("dq_step" + std::to_string(i), rows.q.count, Hl, dk, dt, B, cs);
    BufferId dk_ = rb.alloc("dk_step" + std::to_string(i), rows.kv.count, Hkvl, dk, dt, B, cs);
    BufferId dv_ = rb.alloc("dv_step" + std::to_string(i), rows.kv.count, Hkvl, dv, dt, B, cs);
    std::vector<OpIndex> kdeps = bwd_ready;
    if (prev_comm >= 0) kdeps.push_back(prev_comm);
    if (b0_copy >= 0) kdeps.push_back(b0_copy);
    const double flops = bwd_pair * static_cast<double>(block_pairs(rows.q.count, rows.kv.count, rows.mask));
    const BufferId kern_k = stale_k >= 0 ? stale_k : buf[cur].k;
    const BufferId kern_v = stale_v >= 0 ? stale_v : buf[cur].v;
    OpIndex kernel = rb.add(AttnBwdBlockOp{qa, kern_k, kern_v, out_a, douta, lse, rows.q, rows.kv, rows.mask,
                                           sec, dq_, dk_, dv_},
                            B, cs, kdeps, step + " " + to_string(sec), i, flops,
                            2 * (rb.bytes_of(qa) + rb.bytes_of(buf[cur].k) + rb.bytes_of(buf[cur].v)) +
                                rb.bytes_of(out_a) + rb.bytes_of(douta));
    std::vector<OpIndex> adeps{kernel};
    if (comm_i >= 0) adeps.push_back(comm_i);
    const RowRange all{0, s_l}, h0{0, C}, h1{C, C}, half_src{0, C}, second_src{C, C};
    // dQ rules (docs/algorithm.md §5.3).
    auto acc = [&](BufferId dst, RowRange dr, BufferId src, RowRange sr, bool add, const std::string& what) {
      return rb.copy(dst, dr, src, sr, add, B, cs, adeps, step + " " + what + (add ? " +=" : " ="), i);
    };
    if (!causal || P == 1) {
      acc(dqa, all, dq_, all, i > 0, "dq");
    } else if (i > P - p - 1) {
      acc(dqa, all, dq_, all, true, "dq");
    } else if (i == P - p - 1) {
      if (p == P - 1) {
        acc(dqa, all, dq_, all, false, "dq");
      } else {
        acc(dqa, h0, dq_, half_src, false, "dq[h0]");
        acc(dqa, h1, dq_, second_src, true, "dq[h1]");
      }
    } else {
      acc(dqa, h1, dq_, {0, C}, i > 0, "dq[h1]");  // upper: dq_ holds the second half only
    }
    // dK/dV rules into the accumulator received from p+1 (docs/algorithm.md §5.3).
    const KvBuf& dst = (P == 1) ? buf[0] : buf[nxt];
    OpIndex last = -1;
    for (int which = 0; which < 2; ++which) {
      const BufferId d = which == 0 ? dst.dk : dst.dv;
      const BufferId s = which == 0 ? dk_ : dv_;
      const std::string nm = which == 0 ? "dk" : "dv";
      if (!causal || P == 1) {
        last = acc(d, all, s, all, P > 1 && i > 0, nm);
      } else if (i == P - 1) {
        if (p == 0) {
          acc(d, h0, s, half_src, true, nm + "[h0]");
          last = acc(d, h1, s, second_src, false, nm + "[h1]");
        } else {
          last = acc(d, all, s, all, true, nm);
        }
      } else if (i >= P - p - 1) {  // lower: dk_ covers the first half only
        last = acc(d, h0, s, {0, C}, !(i == 0 && p == P - 1), nm + "[h0]");
      } else {  // upper
        last = acc(d, all, s, all, i > 0, nm);
      }
    }
    rb.free(dq_, B, cs);
    rb.free(dk_, B, cs);
    rb.free(dv_, B, cs);
    prev_comm = comm_i;
    prev_accum = last;
  }
  const KvBuf fin = (P == 1) ? buf[0] : buf[P % 2];
  if (P > 1) {
    const KvBuf& spare = buf[(P + 1) % 2];
    for (BufferId id : {spare.k, spare.v, spare.dk, spare.dv}) rb.free(id, B, cs);
    rb.free(fin.k, B, cs);
    rb.free(fin.v, B, cs);
    if (stale_k >= 0) {
      rb.free(stale_k, B, cs);
      rb.free(stale_v, B, cs);
    }
  } else {
    rb.free(saved_k, B, cs);
    rb.free(saved_v, B, cs);
  }

  // ---- after-attn a2a of dq, dk, dv; outputs ----
  const auto post_tokens = layout.post_a2a_tokens(p);
  BufferId dq = dqa, dkf = fin.dk, dvf = fin.dv;
  if (A > 1) {
    dq = rb.alloc("dq", s_f, H, dk, dt, B, comm);
    dkf = rb.alloc("dk", s_f, Hkv, dk, dt, B, comm);
    dvf = rb.alloc("dv", s_f, Hkv, dv, dt, B, comm);
    a2a(AllToAllOp::Direction::gather_heads, dqa, dq, kTagBwdA2aDq, B, {prev_accum}, "bwd a2a dq");
    a2a(AllToAllOp::Direction::gather_heads, fin.dk, dkf, kTagBwdA2aDk, B, {prev_accum}, "bwd a2a dk");
    a2a(AllToAllOp::Direction::gather_heads, fin.dv, dvf, kTagBwdA2aDv, B, {prev_accum}, "bwd a2a dv");
    for (BufferId id : {dqa, fin.dk, fin.dv, douta, qa, out_a}) rb.free(id, B, comm);
  }
  // The backward of a layer starts after its forward: the first backward op of every stream waits for the
  // end of the forward (otherwise backward buffers would be allocated during the forward's last a2a).
  bool seen[3] = {false, false, false};
  for (auto& op : prog.ops) {
    if (op.phase != Phase::backward) continue;
    const auto st = static_cast<size_t>(op.stream);
    if (seen[st]) continue;
    seen[st] = true;
    op.deps.push_back(fwd_done);
  }
  prog.outputs = {{"out", out, flat_tokens, 0},
                  {"softmax_lse", lse, post_tokens, a * Hl},
                  {"dq", dq, flat_tokens, 0},
                  {"dk", dkf, flat_tokens, 0},
                  {"dv", dvf, flat_tokens, 0}};
}

/// TE AttnFuncWithCPAndKVAllGather (docs/algorithm.md §9.5) for flat CP rank g: all-gather K and V along the
/// sequence into natural order (before(cp)), one forward kernel per local chunk (g and 2cp−1−g) against the KV
/// prefix it may see (bottom-right causal), backward per chunk into full-length zeroed dK/dV accumulators that are
/// reduce-scattered (after(cp)) back to the zigzag shards. K and V are gathered again in the backward, as TE does.
void build_rank_all_gather(Schedule& sched, const CpLayout& layout, int64_t g) {
  const AttentionShape& sh = sched.shape;
  const int64_t cp = layout.cp_size();
  const int64_t c = layout.chunk_size();  // S/(2cp)
  const int64_t S = sh.seq_length, s_f = 2 * c;
  const int64_t H = sh.heads_q, Hkv = sh.heads_kv, dk = sh.head_dim_qk, dv = sh.head_dim_v;
  const Dtype dt = sh.dtype;
  const bool causal = sh.causal;
  const double fwd_pair = attn_fwd_flops_per_pair(dk, dv) * static_cast<double>(sh.batch * H);
  const double bwd_pair = attn_bwd_flops_per_pair(dk, dv) * static_cast<double>(sh.batch * H);
  RankProgram& prog = sched.ranks[static_cast<size_t>(g)];
  prog.cp_rank = g;
  RankBuilder rb(prog, sh);
  const auto F = Phase::forward;
  const auto B = Phase::backward;
  const auto comm = Stream::comm;
  const auto tokens = layout.tokens_before_a2a(g);
  BufferId q = rb.declare("q", s_f, H, dk, dt);        // [b, S/cp, H, dk]
  BufferId k = rb.declare("k", s_f, Hkv, dk, dt);      // [b, S/cp, Hkv, dk]
  BufferId v = rb.declare("v", s_f, Hkv, dv, dt);      // [b, S/cp, Hkv, dv]
  BufferId dout = rb.declare("dout", s_f, H, dv, dt);  // [b, S/cp, H, dv]
  prog.inputs = {{"q", q, tokens, 0}, {"k", k, tokens, 0}, {"v", v, tokens, 0}, {"dout", dout, tokens, 0}};
  std::vector<int64_t> group(static_cast<size_t>(cp));
  for (int64_t r = 0; r < cp; ++r) group[static_cast<size_t>(r)] = r;
  const auto before = CpLayout::chunk_ids_before_attn(cp);
  const auto after = CpLayout::chunk_ids_after_attn(cp);
  auto gather_kv = [&](Phase ph, const std::string& what, std::vector<OpIndex> deps) {
    const BufferId kf = rb.alloc("k.ag" + what, S, Hkv, dk, dt, ph, comm);  // [b, S, Hkv, dk], natural order
    const BufferId vf = rb.alloc("v.ag" + what, S, Hkv, dv, dt, ph, comm);  // [b, S, Hkv, dv]
    const int64_t tag0 = ph == F ? kTagFwdAgK : kTagBwdAgK;
    const OpIndex a = rb.add(AllGatherOp{group, before, k, kf, tag0}, ph, comm, deps, std::string(ph == F ? "fwd" : "bwd") +
                             " all_gather k", -1, 0, rb.bytes_of(k));
    const OpIndex b = rb.add(AllGatherOp{group, before, v, vf, tag0 + 1}, ph, comm, deps, std::string(ph == F ? "fwd" : "bwd") +
                             " all_gather v", -1, 0, rb.bytes_of(v));
    return std::tuple{kf, vf, std::vector<OpIndex>{a, b}};
  };
  // Visible KV prefix of local chunk `half` (global chunk g or 2cp−1−g).
  auto kv_len = [&](int64_t half) { return causal ? ((half == 0 ? g : 2 * cp - 1 - g) + 1) * c : S; };
  const BlockMask mask = causal ? BlockMask::causal_bottom_right : BlockMask::none;
  const Section sec = causal ? Section::diagonal : Section::full;

  // ---- forward ----
  auto [kf, vf, ready] = gather_kv(F, "", {});
  const BufferId out = rb.alloc("out", s_f, H, dv, dt, F, Stream::compute);             // [b, S/cp, H, dv]
  const BufferId lse = rb.alloc("softmax_lse", s_f, H, 1, Dtype::fp32, F, Stream::compute);  // [b, S/cp, H] fp32
  std::vector<OpIndex> fwd_tail;
  for (int64_t half = 0; half < 2; ++half) {
    const Stream st = half == 0 ? Stream::compute : Stream::cp;
    const std::string n = std::to_string(half);
    const BufferId o = rb.alloc("out_chunk" + n, c, H, dv, dt, F, st);
    const BufferId l = rb.alloc("lse_chunk" + n, c, H, 1, Dtype::fp32, F, st);
    const RowRange qr{half * c, c}, kr{0, kv_len(half)};
    const OpIndex kern = rb.add(AttnFwdBlockOp{q, kf, vf, qr, kr, mask, sec, o, l}, F, st, ready,
                                "fwd chunk " + n, half, fwd_pair * static_cast<double>(block_pairs(c, kr.count, mask)),
                                rb.bytes_of(q) / 2 + rb.bytes_of(kf) + rb.bytes_of(vf) + rb.bytes_of(o));
    rb.copy(out, qr, o, {0, c}, false, F, st, {kern}, "fwd out chunk " + n, half);
    fwd_tail.push_back(rb.copy(lse, qr, l, {0, c}, false, F, st, {kern}, "fwd lse chunk " + n, half));
    rb.free(o, F, st);
    rb.free(l, F, st);
  }
  rb.free(kf, F, comm, fwd_tail);
  const OpIndex fwd_done = rb.free(vf, F, comm, fwd_tail);

  // ---- backward ----
  auto [kb, vb, bready] = gather_kv(B, ".bwd", {fwd_done});
  const BufferId dq = rb.alloc("dq", s_f, H, dk, dt, B, Stream::compute);
  const BufferId dkf = rb.declare("dk.ag", S, Hkv, dk, dt);  // [b, S, Hkv, dk], zeroed (TE torch.zeros)
  const BufferId dvf = rb.declare("dv.ag", S, Hkv, dv, dt);
  rb.add(AllocOp{dkf, true}, B, Stream::compute, {}, "alloc dk.ag (zeros)");
  rb.add(AllocOp{dvf, true}, B, Stream::compute, {}, "alloc dv.ag (zeros)");
  std::vector<OpIndex> bwd_tail;
  for (int64_t half = 0; half < 2; ++half) {
    // Both chunks accumulate into dk.ag/dv.ag: one stream keeps the adds ordered.
    const Stream st = Stream::compute;
    const std::string n = std::to_string(half);
    const RowRange qr{half * c, c}, kr{0, kv_len(half)};
    const BufferId dq_ = rb.alloc("dq_chunk" + n, c, H, dk, dt, B, st);
    const BufferId dk_ = rb.alloc("dk_chunk" + n, kr.count, Hkv, dk, dt, B, st);
    const BufferId dv_ = rb.alloc("dv_chunk" + n, kr.count, Hkv, dv, dt, B, st);
    const OpIndex kern = rb.add(AttnBwdBlockOp{q, kb, vb, out, dout, lse, qr, kr, mask, sec, dq_, dk_, dv_}, B, st,
                                bready, "bwd chunk " + n, half,
                                bwd_pair * static_cast<double>(block_pairs(c, kr.count, mask)),
                                2 * (rb.bytes_of(q) / 2 + rb.bytes_of(kb) + rb.bytes_of(vb)));
    rb.copy(dq, qr, dq_, {0, c}, false, B, st, {kern}, "bwd dq chunk " + n, half);
    rb.copy(dkf, kr, dk_, {0, kr.count}, true, B, st, {kern}, "bwd dk chunk " + n + " +=", half);
    bwd_tail.push_back(rb.copy(dvf, kr, dv_, {0, kr.count}, true, B, st, {kern}, "bwd dv chunk " + n + " +=", half));
    rb.free(dq_, B, st);
    rb.free(dk_, B, st);
    rb.free(dv_, B, st);
  }
  const BufferId dks = rb.alloc("dk", s_f, Hkv, dk, dt, B, comm);
  const BufferId dvs = rb.alloc("dv", s_f, Hkv, dv, dt, B, comm);
  rb.add(ReduceScatterOp{group, after, dkf, dks, kTagBwdRsDk}, B, comm, bwd_tail, "bwd reduce_scatter dk", -1, 0,
         rb.bytes_of(dkf));
  rb.add(ReduceScatterOp{group, after, dvf, dvs, kTagBwdRsDv}, B, comm, bwd_tail, "bwd reduce_scatter dv", -1, 0,
         rb.bytes_of(dvf));
  for (BufferId id : {kb, vb, dkf, dvf}) rb.free(id, B, comm);
  prog.outputs = {{"out", out, tokens, 0}, {"softmax_lse", lse, tokens, 0}, {"dq", dq, tokens, 0},
                  {"dk", dks, tokens, 0}, {"dv", dvs, tokens, 0}};
}

}  // namespace

Schedule build_schedule(CpCommType cp_comm_type, const CpLayout& layout, const AttentionShape& shape) {
  return build_schedule(cp_comm_type, layout, shape, BuilderFaults{});
}

namespace {

/// The checks and header fields shared by build_schedule and build_schedule_ranks.
Schedule schedule_header(CpCommType cp_comm_type, const CpLayout& layout, const AttentionShape& shape) {
  HCPSIM_ASSERT(cp_comm_type != CpCommType::p2p || layout.a2a_size() == 1, "p2p needs A == 1");
  HCPSIM_ASSERT(cp_comm_type != CpCommType::a2a || layout.p2p_size() == 1, "a2a needs P == 1");
  HCPSIM_ASSERT(shape.heads_q % layout.a2a_size() == 0, "heads_q must be divisible by A");
  HCPSIM_ASSERT(shape.heads_kv % layout.a2a_size() == 0, "heads_kv must be divisible by A");
  HCPSIM_ASSERT(shape.heads_q % shape.heads_kv == 0, "heads_q must be divisible by heads_kv");
  HCPSIM_ASSERT(shape.seq_length == layout.seq_length(), "shape and layout disagree on seq_length");
  Schedule sched;
  sched.cp_comm_type = cp_comm_type;
  sched.a2a_size = layout.a2a_size();
  sched.p2p_size = layout.p2p_size();
  sched.shape = shape;
  sched.ranks.resize(static_cast<size_t>(layout.cp_size()));
  return sched;
}

}  // namespace

Schedule build_schedule_ranks(CpCommType cp_comm_type, const CpLayout& layout, const AttentionShape& shape,
                              const std::vector<int64_t>& cp_ranks) {
  HCPSIM_ASSERT(cp_comm_type != CpCommType::all_gather, "build_schedule_ranks: all_gather is not supported");
  Schedule sched = schedule_header(cp_comm_type, layout, shape);
  for (size_t g = 0; g < sched.ranks.size(); ++g) sched.ranks[g].cp_rank = static_cast<int64_t>(g);
  std::vector<char> built(sched.ranks.size(), 0);
  for (int64_t g : cp_ranks) {
    HCPSIM_ASSERT(g >= 0 && g < layout.cp_size(), "build_schedule_ranks: cp rank out of range");
    HCPSIM_ASSERT(!built[static_cast<size_t>(g)], "build_schedule_ranks: cp rank listed twice");
    built[static_cast<size_t>(g)] = 1;
    build_rank(sched, layout, g, BuilderFaults{});
  }
  return sched;
}

Schedule build_schedule(CpCommType cp_comm_type, const CpLayout& layout, const AttentionShape& shape,
                        const BuilderFaults& faults) {
  Schedule sched = schedule_header(cp_comm_type, layout, shape);
  if (cp_comm_type == CpCommType::all_gather) {
    HCPSIM_ASSERT(layout.a2a_size() == 1, "all_gather needs A == 1 (a flat CP group)");
    HCPSIM_ASSERT(!faults.swapped_causal_sections && !faults.stale_kv_backward, "no builder faults for all_gather");
    for (int64_t g = 0; g < layout.cp_size(); ++g) build_rank_all_gather(sched, layout, g);
  } else {
    for (int64_t g = 0; g < layout.cp_size(); ++g) build_rank(sched, layout, g, faults);
  }
  sched.check_invariants();
  return sched;
}

}  // namespace hcpsim
