#include "hcpsim/core/schedule_builder.hpp"

#include <memory>
#include <string>
#include <vector>

#include "hcpsim/core/cp_variant.hpp"
#include "hcpsim/core/schedule_builder_parts.hpp"

namespace hcpsim {

double attn_fwd_flops_per_pair(int64_t head_dim_qk, int64_t head_dim_v) {
  return 2.0 * static_cast<double>(head_dim_qk + head_dim_v);
}

double attn_bwd_flops_per_pair(int64_t head_dim_qk, int64_t head_dim_v) {
  return 2.0 * static_cast<double>(3 * head_dim_qk + 2 * head_dim_v);
}

namespace builder_parts {

namespace {

int64_t mod(int64_t x, int64_t m) { return ((x % m) + m) % m; }

}  // namespace

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

RankState make_rank_state(RankProgram& prog, const AttentionShape& sh, const CpLayout& layout, int64_t g,
                          const BuilderFaults& faults) {
  RankDims d;
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
  RankState s{RankBuilder(prog, sh), d, layout.a2a_group(d.p), CpLayout::chunk_ids_before_attn(d.A),
              CpLayout::chunk_ids_after_attn(d.A), faults, nullptr, {}};
  if (sh.packing.thd()) {
    const bool floor = !sh.packing.pad_between_seqs || faults.floor_cu_seqlens ||
                       (faults.tail_padding_blind && sh.packing.only_tail_padded());
    s.thd = std::make_shared<const ThdLayout>(d.A, d.P, sh.packing,
                                              floor ? ThdLayout::ValidRule::floor : ThdLayout::ValidRule::padded);
    for (int64_t p = 0; p < d.P; ++p) s.thd_runs.push_back(s.thd->post_a2a_runs(p));
  }
  return s;
}

DocumentMask block_document_mask(const RankState& s, const RowsOfSection& rows, int64_t kv_source) {
  if (!s.thd) return {};
  return DocumentMask{slice_runs(s.thd_runs[static_cast<size_t>(s.d.p)], rows.q.begin, rows.q.count),
                      slice_runs(s.thd_runs[static_cast<size_t>(kv_source)], rows.kv.begin, rows.kv.count)};
}

int64_t block_pair_count(const RankState& s, const RowsOfSection& rows, const DocumentMask& doc) {
  if (s.thd) return document_mask_pairs(doc, rows.mask != BlockMask::none);
  return semantics::block_pairs(rows.q.count, rows.kv.count, rows.mask);
}

std::vector<int64_t> a2a_seq_half_rows(const RankState& s) {
  return s.thd ? s.thd->seq_half_rows() : std::vector<int64_t>{};
}

RankInputs declare_rank_inputs(RankState& s, const std::vector<int64_t>& tokens) {
  const RankDims& d = s.d;
  RankInputs in;
  in.q = s.rb.declare("q", d.s_f, d.H, d.dk, d.dt);        // [b, S/cp, H, dk]
  in.k = s.rb.declare("k", d.s_f, d.Hkv, d.dk, d.dt);      // [b, S/cp, Hkv, dk]
  in.v = s.rb.declare("v", d.s_f, d.Hkv, d.dv, d.dt);      // [b, S/cp, Hkv, dv]
  in.dout = s.rb.declare("dout", d.s_f, d.H, d.dv, d.dt);  // [b, S/cp, H, dv]
  s.rb.prog().inputs = {{"q", in.q, tokens, 0}, {"k", in.k, tokens, 0}, {"v", in.v, tokens, 0},
                        {"dout", in.dout, tokens, 0}};
  return in;
}

RingForward ring_forward(RankState& s, const RankInputs& in) {
  // TE AttnFuncWithCPAndKVP2P.forward, docs/algorithm.md §4.
  RingForward f;
  f.qkv = a2a_qkv_before_attn(s, in);
  f.ring = fwd_ring(s, f.qkv);
  const auto [out_a, last_corr] = fwd_out_correction(s, f.ring);
  f.out = a2a_out_after_attn(s, f.qkv, out_a, last_corr);
  free_fwd_ring_buffers(s, f.ring, f.out.done);
  return f;
}

Grads ring_backward(RankState& s, const RankInputs& in, const RingForward& fwd) {
  // TE AttnFuncWithCPAndKVP2P.backward, docs/algorithm.md §5.
  const AttnLayoutDout dout = a2a_dout_before_attn(s, in.dout, fwd.out.done);
  const BackwardInputs bwd_in{fwd.qkv.q, fwd.out.out_a, dout.dout, fwd.ring.lse, dout.ready};
  const BackwardRingBuffers bufs = alloc_bwd_ring_buffers(s, bwd_in, fwd.ring);
  const OpIndex last_accum = bwd_ring(s, bufs, bwd_in);
  const KvBuf fin = free_bwd_ring_buffers(s, bufs);
  const Grads grads = a2a_grads_after_attn(s, {bufs.dq, fin.dk, fin.dv}, last_accum);
  if (s.d.A > 1) {  // the attention-layout dout, q and out, kept through the backward
    for (BufferId id : {dout.dout, fwd.qkv.q, fwd.out.out_a}) s.rb.free(id, Phase::backward, Stream::comm);
  }
  order_backward_after_forward(s.rb.prog(), fwd.out.done);
  return grads;
}

void compose_ring_rank(RankState& s, const std::vector<int64_t>& tokens, const std::vector<int64_t>& lse_tokens) {
  // Inputs zigzag-sharded with the flat CP rank (docs/algorithm.md §2.1).
  const RankInputs in = declare_rank_inputs(s, tokens);
  const RingForward fwd = ring_forward(s, in);
  const Grads grads = ring_backward(s, in, fwd);
  s.rb.prog().outputs = {{"out", fwd.out.out, tokens, 0},
                         {"softmax_lse", fwd.ring.lse, lse_tokens, s.d.a * s.d.Hl},
                         {"dq", grads.dq, tokens, 0},
                         {"dk", grads.dk, tokens, 0},
                         {"dv", grads.dv, tokens, 0}};
}

}  // namespace builder_parts

Schedule build_schedule(CpCommType cp_comm_type, const CpLayout& layout, const AttentionShape& shape, int threads) {
  return build_variant_schedule(cp_variant(cp_comm_type), layout, shape, BuilderFaults{}, threads);
}

Schedule build_schedule_ranks(CpCommType cp_comm_type, const CpLayout& layout, const AttentionShape& shape,
                              const std::vector<int64_t>& cp_ranks, int threads) {
  return build_variant_schedule_ranks(cp_variant(cp_comm_type), layout, shape, cp_ranks, threads);
}

Schedule build_schedule(CpCommType cp_comm_type, const CpLayout& layout, const AttentionShape& shape,
                        const BuilderFaults& faults) {
  return build_variant_schedule(cp_variant(cp_comm_type), layout, shape, faults);
}

}  // namespace hcpsim
