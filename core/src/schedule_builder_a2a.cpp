// The a2a (Ulysses) level of the a2a+p2p rank: TE flash_attn_a2a_communicate before and after attention
// (docs/algorithm.md §3), with TE's chunk reorders chunk_ids_before_attn / chunk_ids_after_attn (§3.1).
#include <string>
#include <vector>

#include "hcpsim/core/schedule_builder_parts.hpp"

namespace hcpsim::builder_parts {

namespace {

/// One all-to-all on the rank's a2a group: scatter_heads (before attention, before(A) order) or gather_heads
/// (after attention, after(A) order); bytes = the input buffer.
OpIndex a2a(RankState& s, AllToAllOp::Direction dir, BufferId in, BufferId out, int64_t tag, Phase ph,
            std::vector<OpIndex> deps, const std::string& label) {
  AllToAllOp op{dir, s.a2a_group, dir == AllToAllOp::Direction::scatter_heads ? s.before_attn : s.after_attn, in,
                out, tag, a2a_seq_half_rows(s)};
  return s.rb.add(op, ph, Stream::comm, std::move(deps), label, -1, 0, s.rb.bytes_of(in));
}

}  // namespace

AttnLayoutTensors a2a_qkv_before_attn(RankState& s, const RankInputs& in) {
  const RankDims& d = s.d;
  const auto F = Phase::forward;
  const auto comm = Stream::comm;
  AttnLayoutTensors t{in.q, in.k, in.v, {}};
  if (d.A > 1) {
    t.q = s.rb.alloc("q.a2a", d.s_l, d.Hl, d.dk, d.dt, F, comm);  // [b, S/P, H/A, dk]
    t.k = s.rb.alloc("k.a2a", d.s_l, d.Hkvl, d.dk, d.dt, F, comm);
    t.v = s.rb.alloc("v.a2a", d.s_l, d.Hkvl, d.dv, d.dt, F, comm);
    const auto dir = AllToAllOp::Direction::scatter_heads;
    t.ready.push_back(a2a(s, dir, in.q, t.q, kTagFwdA2aQ, F, {}, "fwd a2a q"));
    t.ready.push_back(a2a(s, dir, in.k, t.k, kTagFwdA2aK, F, {}, "fwd a2a k"));
    t.ready.push_back(a2a(s, dir, in.v, t.v, kTagFwdA2aV, F, {}, "fwd a2a v"));
  }
  return t;
}

ForwardOutput a2a_out_after_attn(RankState& s, const AttnLayoutTensors& qkv, BufferId out_a,
                                 OpIndex last_correction) {
  const RankDims& d = s.d;
  const auto F = Phase::forward;
  const auto comm = Stream::comm;
  ForwardOutput o{out_a, out_a, last_correction};
  if (d.A > 1) {
    o.out = s.rb.alloc("out", d.s_f, d.H, d.dv, d.dt, F, comm);  // [b, S/cp, H, dv]
    o.done = a2a(s, AllToAllOp::Direction::gather_heads, out_a, o.out, kTagFwdA2aOut, F, {last_correction},
                 "fwd a2a out");
    s.rb.free(qkv.k, F, comm);  // post-a2a k, v are not saved for backward
    s.rb.free(qkv.v, F, comm);
  }
  return o;
}

AttnLayoutDout a2a_dout_before_attn(RankState& s, BufferId dout, OpIndex fwd_done) {
  const RankDims& d = s.d;
  const auto B = Phase::backward;
  AttnLayoutDout t{dout, {fwd_done}};
  if (d.A > 1) {
    t.dout = s.rb.alloc("dout.a2a", d.s_l, d.Hl, d.dv, d.dt, B, Stream::comm);
    t.ready.push_back(
        a2a(s, AllToAllOp::Direction::scatter_heads, dout, t.dout, kTagBwdA2aDout, B, {fwd_done}, "bwd a2a dout"));
  }
  return t;
}

Grads a2a_grads_after_attn(RankState& s, const Grads& acc, OpIndex last_accum) {
  const RankDims& d = s.d;
  const auto B = Phase::backward;
  const auto comm = Stream::comm;
  if (d.A == 1) return acc;
  Grads g;
  g.dq = s.rb.alloc("dq", d.s_f, d.H, d.dk, d.dt, B, comm);
  g.dk = s.rb.alloc("dk", d.s_f, d.Hkv, d.dk, d.dt, B, comm);
  g.dv = s.rb.alloc("dv", d.s_f, d.Hkv, d.dv, d.dt, B, comm);
  const auto dir = AllToAllOp::Direction::gather_heads;
  a2a(s, dir, acc.dq, g.dq, kTagBwdA2aDq, B, {last_accum}, "bwd a2a dq");
  a2a(s, dir, acc.dk, g.dk, kTagBwdA2aDk, B, {last_accum}, "bwd a2a dk");
  a2a(s, dir, acc.dv, g.dv, kTagBwdA2aDv, B, {last_accum}, "bwd a2a dv");
  for (BufferId id : {acc.dq, acc.dk, acc.dv}) s.rb.free(id, B, comm);
  return g;
}

}  // namespace hcpsim::builder_parts
