// The all_gather rank: TE AttnFuncWithCPAndKVAllGather (docs/algorithm.md §9.5). K and V are all-gathered along
// the sequence into natural order (before(cp)); each local chunk (g and 2cp−1−g) runs one kernel against the KV
// prefix it may see (bottom-right causal); the backward accumulates full-length zeroed dK/dV that are
// reduce-scattered (after(cp)) back to the zigzag shards. K and V are gathered again in the backward, as TE does.
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "hcpsim/core/schedule_builder_parts.hpp"

namespace hcpsim::builder_parts {

namespace {

using semantics::block_pairs;

/// What the all_gather rank's forward and backward share: its sizes, masks, group and input buffers.
struct AgRank {
  explicit AgRank(RankBuilder& builder) : rb(builder) {}

  RankBuilder& rb;
  int64_t g = 0, cp = 1, c = 0, S = 0, s_f = 0;  ///< rank, CP size, chunk S/(2cp), sequence, tokens per rank
  int64_t H = 0, Hkv = 0, dk = 0, dv = 0;
  Dtype dt = Dtype::bf16;
  bool causal = false;
  double fwd_pair = 0, bwd_pair = 0;  ///< attention FLOPs per (q, k) pair × batch × H
  std::vector<int64_t> group;         ///< the whole CP group, 0 … cp−1
  BufferId q = -1, k = -1, v = -1, dout = -1;
  /// Packed sequences: the THD layout [1, cp] (null for bshd), this rank's token runs and the packed runs.
  std::shared_ptr<const ThdLayout> thd;
  std::vector<TokenRun> q_runs, kv_runs;

  /// Visible KV prefix of local chunk `half` (global chunk g or 2cp−1−g); THD keeps the whole gathered KV, the
  /// per-sequence visibility being the document mask's (TE get_kv_seq_info_after_all_gather).
  [[nodiscard]] int64_t kv_len(int64_t half) const {
    if (thd) return S;
    return causal ? ((half == 0 ? g : 2 * cp - 1 - g) + 1) * c : S;
  }
  /// The document mask of local chunk `half`'s kernel (empty for bshd).
  [[nodiscard]] DocumentMask doc(int64_t half) const {
    if (!thd) return {};
    return DocumentMask{slice_runs(q_runs, half * c, c), kv_runs};
  }
  /// Pairs of local chunk `half`'s kernel.
  [[nodiscard]] int64_t pairs(int64_t half) const {
    if (thd) return document_mask_pairs(doc(half), causal);
    return block_pairs(c, kv_len(half), mask());
  }
  /// AllGatherOp / ReduceScatterOp::seq_half_rows (empty for bshd).
  [[nodiscard]] std::vector<int64_t> seq_half_rows() const {
    return thd ? thd->seq_half_rows() : std::vector<int64_t>{};
  }
  [[nodiscard]] BlockMask mask() const { return causal ? BlockMask::causal_bottom_right : BlockMask::none; }
  [[nodiscard]] Section section() const { return causal ? Section::diagonal : Section::full; }
};

/// The forward's outputs the backward reads, and the op that ends the forward.
struct AgForward {
  BufferId out = -1, lse = -1;
  OpIndex done = -1;
};

/// Forward: gather KV, one kernel per local chunk (chunk 0 on the compute stream, chunk 1 on cp_stream) into
/// per-chunk buffers copied into out and softmax_lse, then free the gathered KV.
AgForward ag_forward(AgRank& r) {
  RankBuilder& rb = r.rb;
  RankProgram& prog = rb.prog();
  const auto F = Phase::forward;
  const int64_t c = r.c;
  auto [kf, vf, ready] = gather_kv(rb, r.group, F, r.k, r.v, "", {}, r.seq_half_rows());
  AgForward f;
  f.out = rb.alloc("out", r.s_f, r.H, r.dv, r.dt, F, Stream::compute);                   // [b, S/cp, H, dv]
  f.lse = rb.alloc("softmax_lse", r.s_f, r.H, 1, Dtype::fp32, F, Stream::compute);  // [b, S/cp, H] fp32
  // Chunk 1's copies into out and softmax_lse run on cp_stream and wait for these allocs on the compute stream
  // (nothing else orders the two streams here; the ordering contract, schedule.hpp).
  const auto lse_alloc = static_cast<OpIndex>(prog.ops.size() - 1), out_alloc = lse_alloc - 1;
  std::vector<OpIndex> fwd_tail;
  for (int64_t half = 0; half < 2; ++half) {
    const Stream st = half == 0 ? Stream::compute : Stream::cp;
    const std::string n = std::to_string(half);
    const BufferId o = rb.alloc("out_chunk" + n, c, r.H, r.dv, r.dt, F, st);
    const BufferId l = rb.alloc("lse_chunk" + n, c, r.H, 1, Dtype::fp32, F, st);
    const RowRange qr{half * c, c}, kr{0, r.kv_len(half)};
    const OpIndex kern =
        rb.add(AttnFwdBlockOp{r.q, kf, vf, qr, kr, r.mask(), r.section(), o, l, r.doc(half)}, F, st, ready,
               "fwd chunk " + n, half, r.fwd_pair * static_cast<double>(r.pairs(half)),
               rb.bytes_of(r.q) / 2 + rb.bytes_of(kf) + rb.bytes_of(vf) + rb.bytes_of(o));
    std::vector<OpIndex> out_deps{kern}, lse_deps{kern};
    if (st != Stream::compute) out_deps.push_back(out_alloc), lse_deps.push_back(lse_alloc);
    rb.copy(f.out, qr, o, {0, c}, false, F, st, out_deps, "fwd out chunk " + n, half);
    fwd_tail.push_back(rb.copy(f.lse, qr, l, {0, c}, false, F, st, lse_deps, "fwd lse chunk " + n, half));
    rb.free(o, F, st);
    rb.free(l, F, st);
  }
  rb.free(kf, F, Stream::comm, fwd_tail);
  f.done = rb.free(vf, F, Stream::comm, fwd_tail);
  return f;
}

/// Backward: gather KV again after the forward, one backward kernel per local chunk accumulating into zeroed
/// full-length dk.ag / dv.ag, reduce-scatter them to the rank's dk, dv. Returns dq, dk, dv.
Grads ag_backward(AgRank& r, const AgForward& f) {
  RankBuilder& rb = r.rb;
  const auto B = Phase::backward;
  const auto comm = Stream::comm;
  const int64_t c = r.c;
  auto [kb, vb, bready] = gather_kv(rb, r.group, B, r.k, r.v, ".bwd", {f.done}, r.seq_half_rows());
  Grads grads;
  // The backward's buffers exist once the forward is done (the compute stream reaches them while the forward's
  // second chunk may still run on the cp stream).
  grads.dq = rb.alloc("dq", r.s_f, r.H, r.dk, r.dt, B, Stream::compute, {f.done});
  const BufferId dkf = rb.declare("dk.ag", r.S, r.Hkv, r.dk, r.dt);  // [b, S, Hkv, dk], zeroed (TE torch.zeros)
  const BufferId dvf = rb.declare("dv.ag", r.S, r.Hkv, r.dv, r.dt);
  rb.add(AllocOp{dkf, true}, B, Stream::compute, {f.done}, "alloc dk.ag (zeros)");
  rb.add(AllocOp{dvf, true}, B, Stream::compute, {f.done}, "alloc dv.ag (zeros)");
  std::vector<OpIndex> bwd_tail;
  for (int64_t half = 0; half < 2; ++half) {
    // Both chunks accumulate into dk.ag/dv.ag: one stream keeps the adds ordered.
    const Stream st = Stream::compute;
    const std::string n = std::to_string(half);
    const RowRange qr{half * c, c}, kr{0, r.kv_len(half)};
    const BufferId dq_ = rb.alloc("dq_chunk" + n, c, r.H, r.dk, r.dt, B, st);
    const BufferId dk_ = rb.alloc("dk_chunk" + n, kr.count, r.Hkv, r.dk, r.dt, B, st);
    const BufferId dv_ = rb.alloc("dv_chunk" + n, kr.count, r.Hkv, r.dv, r.dt, B, st);
    const OpIndex kern =
        rb.add(AttnBwdBlockOp{r.q, kb, vb, f.out, r.dout, f.lse, qr, kr, r.mask(), r.section(), dq_, dk_, dv_,
                              r.doc(half)},
               B, st, bready, "bwd chunk " + n, half, r.bwd_pair * static_cast<double>(r.pairs(half)),
               2 * (rb.bytes_of(r.q) / 2 + rb.bytes_of(kb) + rb.bytes_of(vb)));
    rb.copy(grads.dq, qr, dq_, {0, c}, false, B, st, {kern}, "bwd dq chunk " + n, half);
    rb.copy(dkf, kr, dk_, {0, kr.count}, true, B, st, {kern}, "bwd dk chunk " + n + " +=", half);
    bwd_tail.push_back(rb.copy(dvf, kr, dv_, {0, kr.count}, true, B, st, {kern}, "bwd dv chunk " + n + " +=", half));
    rb.free(dq_, B, st);
    rb.free(dk_, B, st);
    rb.free(dv_, B, st);
  }
  grads.dk = rb.alloc("dk", r.s_f, r.Hkv, r.dk, r.dt, B, comm);
  grads.dv = rb.alloc("dv", r.s_f, r.Hkv, r.dv, r.dt, B, comm);
  const auto after = CpLayout::chunk_ids_after_attn(r.cp);
  rb.add(ReduceScatterOp{r.group, after, dkf, grads.dk, kTagBwdRsDk, r.seq_half_rows()}, B, comm, bwd_tail,
         "bwd reduce_scatter dk", -1, 0, rb.bytes_of(dkf));
  rb.add(ReduceScatterOp{r.group, after, dvf, grads.dv, kTagBwdRsDv, r.seq_half_rows()}, B, comm, bwd_tail,
         "bwd reduce_scatter dv", -1, 0, rb.bytes_of(dvf));
  for (BufferId id : {kb, vb, dkf, dvf}) rb.free(id, B, comm);
  return grads;
}

}  // namespace

std::tuple<BufferId, BufferId, std::vector<OpIndex>> gather_kv(RankBuilder& rb, const std::vector<int64_t>& group,
                                                               Phase ph, BufferId k, BufferId v,
                                                               const std::string& what, std::vector<OpIndex> deps,
                                                               const std::vector<int64_t>& seq_half_rows) {
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
  const OpIndex a = rb.add(AllGatherOp{group, before, k, kf, tag0, seq_half_rows}, ph, comm, deps,
                           p + " all_gather k", -1, 0, rb.bytes_of(k));
  const OpIndex b = rb.add(AllGatherOp{group, before, v, vf, tag0 + 1, seq_half_rows}, ph, comm, deps,
                           p + " all_gather v", -1, 0, rb.bytes_of(v));
  return std::tuple{kf, vf, std::vector<OpIndex>{a, b}};
}

void compose_all_gather_rank(Schedule& sched, const CpLayout& layout, int64_t g) {
  const AttentionShape& sh = sched.shape;
  RankProgram& prog = sched.ranks[static_cast<size_t>(g)];
  RankBuilder rb(prog, sh);
  AgRank r(rb);
  r.g = g;
  r.cp = layout.cp_size();
  r.c = layout.chunk_size();  // S/(2cp)
  r.S = sh.seq_length;
  r.s_f = 2 * r.c;
  r.H = sh.heads_q;
  r.Hkv = sh.heads_kv;
  r.dk = sh.head_dim_qk;
  r.dv = sh.head_dim_v;
  r.dt = sh.dtype;
  r.causal = sh.causal;
  r.fwd_pair = attn_fwd_flops_per_pair(r.dk, r.dv) * static_cast<double>(sh.batch * r.H);
  r.bwd_pair = attn_bwd_flops_per_pair(r.dk, r.dv) * static_cast<double>(sh.batch * r.H);
  for (int64_t i = 0; i < r.cp; ++i) r.group.push_back(i);
  if (sh.packing.thd()) {  // [1, cp] THD layout, exact valid-token rule (no faults for all_gather)
    r.thd = std::make_shared<const ThdLayout>(1, r.cp, sh.packing, sh.packing.pad_between_seqs
                                                                       ? ThdLayout::ValidRule::padded
                                                                       : ThdLayout::ValidRule::floor);
    r.q_runs = r.thd->post_a2a_runs(g);
    r.kv_runs = r.thd->global_runs();
  }
  const auto tokens = r.thd ? r.thd->tokens_before_a2a(g) : layout.tokens_before_a2a(g);
  r.q = rb.declare("q", r.s_f, r.H, r.dk, r.dt);        // [b, S/cp, H, dk]
  r.k = rb.declare("k", r.s_f, r.Hkv, r.dk, r.dt);      // [b, S/cp, Hkv, dk]
  r.v = rb.declare("v", r.s_f, r.Hkv, r.dv, r.dt);      // [b, S/cp, Hkv, dv]
  r.dout = rb.declare("dout", r.s_f, r.H, r.dv, r.dt);  // [b, S/cp, H, dv]
  prog.inputs = {{"q", r.q, tokens, 0}, {"k", r.k, tokens, 0}, {"v", r.v, tokens, 0}, {"dout", r.dout, tokens, 0}};
  const AgForward f = ag_forward(r);
  const Grads grads = ag_backward(r, f);
  prog.outputs = {{"out", f.out, tokens, 0}, {"softmax_lse", f.lse, tokens, 0}, {"dq", grads.dq, tokens, 0},
                  {"dk", grads.dk, tokens, 0}, {"dv", grads.dv, tokens, 0}};
}

}  // namespace hcpsim::builder_parts
