#include "hcpsim/core/schedule_builder.hpp"

#include <cmath>
#include <string>
#include <tuple>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/semantics.hpp"
#include "hcpsim/core/schedule_hazards.hpp"
#include "schedule_builder_parts.hpp"

namespace hcpsim {

double attn_fwd_flops_per_pair(int64_t head_dim_qk, int64_t head_dim_v) {
  return 2.0 * static_cast<double>(head_dim_qk + head_dim_v);
}

double attn_bwd_flops_per_pair(int64_t head_dim_qk, int64_t head_dim_v) {
  return 2.0 * static_cast<double>(3 * head_dim_qk + 2 * head_dim_v);
}

namespace {

using builder_parts::kTagBwdAgK;
using builder_parts::kTagBwdRsDk;
using builder_parts::kTagBwdRsDv;
using builder_parts::kTagFwdAgK;
using builder_parts::RankBuilder;
using semantics::block_pairs;

int64_t mod(int64_t x, int64_t m) { return ((x % m) + m) % m; }

/// The builder state of flat CP rank g: its dimensions in the layout and shape, its a2a group and TE's chunk
/// orders. `prog` and `sh` must outlive the state.
builder_parts::RankState make_rank_state(RankProgram& prog, const AttentionShape& sh, const CpLayout& layout,
                                         int64_t g, const BuilderFaults& faults) {
  builder_parts::RankDims d;
  d.A = layout.a2a_size();
  d.P = layout.p2p_size();
  d.a = layout.a2a_rank(g);
  d.p = layout.p2p_rank(g);
  d.s_f = 2 * layout.chunk_size();  // tokens per rank before the a2a, S/cp
  d.C = layout.super_chunk_size();  // S/(2P)
  d.s_l = 2 * d.C;                  // tokens per rank after the a2a, S/P
  d.batch = sh.batch;
  d.H = sh.heads_q;
  d.Hkv = sh.heads_kv;
  d.dk = sh.head_dim_qk;
  d.dv = sh.head_dim_v;
  d.Hl = d.H / d.A;
  d.Hkvl = d.Hkv / d.A;
  d.dt = sh.dtype;
  d.causal = sh.causal;
  d.fwd_pair = attn_fwd_flops_per_pair(d.dk, d.dv) * static_cast<double>(sh.batch * d.Hl);
  d.bwd_pair = attn_bwd_flops_per_pair(d.dk, d.dv) * static_cast<double>(sh.batch * d.Hl);
  d.next = layout.cp_rank(mod(d.p + 1, d.P), d.a);
  d.prev = layout.cp_rank(mod(d.p - 1, d.P), d.a);
  return builder_parts::RankState{RankBuilder(prog, sh), d, layout.a2a_group(d.p),
                                  CpLayout::chunk_ids_before_attn(d.A), CpLayout::chunk_ids_after_attn(d.A), faults};
}

/// The backward of a layer starts after its forward: the first backward op of every stream waits for the end of
/// the forward (otherwise backward buffers would be allocated during the forward's last a2a).
void order_backward_after_forward(RankProgram& prog, OpIndex fwd_done) {
  bool seen[3] = {false, false, false};
  for (auto& op : prog.ops) {
    if (op.phase != Phase::backward) continue;
    const auto st = static_cast<size_t>(op.stream);
    if (seen[st]) continue;
    seen[st] = true;
    op.deps.push_back(fwd_done);
  }
}

/// TE's a2a+p2p attention (AttnFuncWithCPAndKVP2P with flash_attn_a2a_communicate) for flat CP rank g, forward and
/// backward: a2a of q/k/v, the forward ring, the a2a of out; a2a of dout, the [KV | dKV] ring, a2a of dq/dk/dv
/// (docs/algorithm.md §3–§5; the pieces are in schedule_builder_parts.hpp).
void build_rank(Schedule& sched, const CpLayout& layout, int64_t g, const BuilderFaults& faults) {
  namespace bp = builder_parts;
  RankProgram& prog = sched.ranks[static_cast<size_t>(g)];
  prog.rank = g;
  prog.cp_rank = g;
  // Reserve about what the program below appends (~24 ops and ~9 buffers per ring step, fewer than 80 ops and 30
  // buffers outside the ring), so that growing the vectors does not move the ops already built (each holds a
  // label and a deps vector). Capacity only; the program is unchanged.
  const int64_t P = layout.p2p_size();
  prog.ops.reserve(static_cast<size_t>(25 * P + 80));
  prog.buffers.reserve(static_cast<size_t>(9 * P + 30));
  bp::RankState s = make_rank_state(prog, sched.shape, layout, g, faults);
  const bp::RankDims& d = s.d;

  // ---- inputs, zigzag-sharded with the flat CP rank (docs/algorithm.md §2.1) ----
  const auto flat_tokens = layout.tokens_before_a2a(g);
  bp::RankInputs in;
  in.q = s.rb.declare("q", d.s_f, d.H, d.dk, d.dt);        // [b, S/cp, H, dk]
  in.k = s.rb.declare("k", d.s_f, d.Hkv, d.dk, d.dt);      // [b, S/cp, Hkv, dk]
  in.v = s.rb.declare("v", d.s_f, d.Hkv, d.dv, d.dt);      // [b, S/cp, Hkv, dv]
  in.dout = s.rb.declare("dout", d.s_f, d.H, d.dv, d.dt);  // [b, S/cp, H, dv]
  prog.inputs = {{"q", in.q, flat_tokens, 0}, {"k", in.k, flat_tokens, 0}, {"v", in.v, flat_tokens, 0},
                 {"dout", in.dout, flat_tokens, 0}};

  // ---- forward (TE AttnFuncWithCPAndKVP2P.forward, docs/algorithm.md §4) ----
  const bp::AttnLayoutTensors qkv = bp::a2a_qkv_before_attn(s, in);
  const bp::ForwardRing ring = bp::fwd_ring(s, qkv);
  const auto [out_a, last_corr] = bp::fwd_out_correction(s, ring);
  const bp::ForwardOutput fwd = bp::a2a_out_after_attn(s, qkv, out_a, last_corr);
  bp::free_fwd_ring_buffers(s, ring, fwd.done);

  // ---- backward (TE AttnFuncWithCPAndKVP2P.backward, docs/algorithm.md §5) ----
  const bp::AttnLayoutDout dout = bp::a2a_dout_before_attn(s, in.dout, fwd.done);
  const bp::BackwardInputs bwd_in{qkv.q, fwd.out_a, dout.dout, ring.lse, dout.ready};
  const bp::BackwardRingBuffers bufs = bp::alloc_bwd_ring_buffers(s, bwd_in, ring);
  const OpIndex last_accum = bp::bwd_ring(s, bufs, bwd_in);
  const bp::KvBuf fin = bp::free_bwd_ring_buffers(s, bufs);
  const bp::Grads grads = bp::a2a_grads_after_attn(s, {bufs.dq, fin.dk, fin.dv}, last_accum);
  if (d.A > 1) {  // the attention-layout dout, q and out, kept through the backward
    for (BufferId id : {dout.dout, qkv.q, fwd.out_a}) s.rb.free(id, Phase::backward, Stream::comm);
  }
  order_backward_after_forward(prog, fwd.done);
  const auto post_tokens = layout.post_a2a_tokens(d.p);
  prog.outputs = {{"out", fwd.out, flat_tokens, 0},
                  {"softmax_lse", ring.lse, post_tokens, d.a * d.Hl},
                  {"dq", grads.dq, flat_tokens, 0},
                  {"dk", grads.dk, flat_tokens, 0},
                  {"dv", grads.dv, flat_tokens, 0}};
}

/// The all_gather builder's gathers of K and V (inputs k, v) over `group` in phase `ph` after `deps`: fresh
/// [b, S, Hkv, dk] and [b, S, Hkv, dv] buffers "k.ag<what>", "v.ag<what>" on the comm stream in natural order
/// (before(cp)). Returns them with the two gather ops.
std::tuple<BufferId, BufferId, std::vector<OpIndex>> gather_kv(RankBuilder& rb, const std::vector<int64_t>& group,
                                                               Phase ph, BufferId k, BufferId v,
                                                               const std::string& what, std::vector<OpIndex> deps) {
  const RankProgram& prog = rb.prog();
  const BufferDecl kd = prog.buffers[static_cast<size_t>(k)];  // copies: alloc grows the buffer list
  const BufferDecl vd = prog.buffers[static_cast<size_t>(v)];
  const auto cp = static_cast<int64_t>(group.size());
  const auto before = CpLayout::chunk_ids_before_attn(cp);
  const auto comm = Stream::comm;
  const std::string p = ph == Phase::forward ? "fwd" : "bwd";
  const BufferId kf = rb.alloc("k.ag" + what, cp * kd.rows, kd.heads, kd.width, kd.dtype, ph, comm);
  const BufferId vf = rb.alloc("v.ag" + what, cp * vd.rows, vd.heads, vd.width, vd.dtype, ph, comm);
  const int64_t tag0 = ph == Phase::forward ? kTagFwdAgK : kTagBwdAgK;
  const OpIndex a = rb.add(AllGatherOp{group, before, k, kf, tag0}, ph, comm, deps, p + " all_gather k", -1, 0,
                           rb.bytes_of(k));
  const OpIndex b = rb.add(AllGatherOp{group, before, v, vf, tag0 + 1}, ph, comm, deps, p + " all_gather v", -1, 0,
                           rb.bytes_of(v));
  return std::tuple{kf, vf, std::vector<OpIndex>{a, b}};
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
  prog.rank = g;
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
  const auto after = CpLayout::chunk_ids_after_attn(cp);
  // Visible KV prefix of local chunk `half` (global chunk g or 2cp−1−g).
  auto kv_len = [&](int64_t half) { return causal ? ((half == 0 ? g : 2 * cp - 1 - g) + 1) * c : S; };
  const BlockMask mask = causal ? BlockMask::causal_bottom_right : BlockMask::none;
  const Section sec = causal ? Section::diagonal : Section::full;

  // ---- forward ----
  auto [kf, vf, ready] = gather_kv(rb, group, F, k, v, "", {});
  const BufferId out = rb.alloc("out", s_f, H, dv, dt, F, Stream::compute);             // [b, S/cp, H, dv]
  const BufferId lse = rb.alloc("softmax_lse", s_f, H, 1, Dtype::fp32, F, Stream::compute);  // [b, S/cp, H] fp32
  // Chunk 1's copies into out and softmax_lse run on cp_stream and wait for these allocs on the compute stream
  // (nothing else orders the two streams here; the ordering contract, schedule.hpp).
  const auto lse_alloc = static_cast<OpIndex>(prog.ops.size() - 1), out_alloc = lse_alloc - 1;
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
    std::vector<OpIndex> out_deps{kern}, lse_deps{kern};
    if (st != Stream::compute) out_deps.push_back(out_alloc), lse_deps.push_back(lse_alloc);
    rb.copy(out, qr, o, {0, c}, false, F, st, out_deps, "fwd out chunk " + n, half);
    fwd_tail.push_back(rb.copy(lse, qr, l, {0, c}, false, F, st, lse_deps, "fwd lse chunk " + n, half));
    rb.free(o, F, st);
    rb.free(l, F, st);
  }
  rb.free(kf, F, comm, fwd_tail);
  const OpIndex fwd_done = rb.free(vf, F, comm, fwd_tail);

  // ---- backward ----
  auto [kb, vb, bready] = gather_kv(rb, group, B, k, v, ".bwd", {fwd_done});
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
  for (size_t g = 0; g < sched.ranks.size(); ++g) {
    sched.ranks[g].rank = static_cast<int64_t>(g);
    sched.ranks[g].cp_rank = static_cast<int64_t>(g);
  }
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
#ifndef NDEBUG
  check_hazards(sched);
#endif
  return sched;
}

}  // namespace hcpsim
