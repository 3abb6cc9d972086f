// The forward KV ring of the a2a+p2p rank: TE AttnFuncWithCPAndKVP2P.forward (docs/algorithm.md §4): per step the
// KV send/recv, the section choice, the attention block and the softmax_lse merge; then the output correction.
#include <string>
#include <utility>
#include <vector>

#include "hcpsim/core/schedule_builder_parts.hpp"

namespace hcpsim::builder_parts {

Section fwd_section(bool causal, int64_t P, int64_t p, int64_t i) {
  if (!causal) return Section::full;
  if (P == 1 || i == 0) return Section::diagonal;
  return i <= p ? Section::lower : Section::upper;
}

namespace {

/// fwd_section with the fault swapped_causal_sections applied (lower and upper exchanged).
Section fwd_step_section(const RankState& s, int64_t i) {
  Section sec = fwd_section(s.d.causal, s.d.P, s.d.p, i);
  if (s.faults.swapped_causal_sections && sec == Section::lower) {
    sec = Section::upper;
  } else if (s.faults.swapped_causal_sections && sec == Section::upper) {
    sec = Section::lower;
  }
  return sec;
}

/// p2p_comm_buffers[0] = cat(k, v): a copy of the local KV on the compute stream, after `ready`.
void alloc_kv_ring_buffer0(RankState& s, const AttnLayoutTensors& qkv, ForwardRing& ring) {
  const RankDims& d = s.d;
  const auto F = Phase::forward;
  const auto cs = Stream::compute;
  ring.k[0] = s.rb.alloc("kv_ring0.k", d.s_l, d.Hkvl, d.dk, d.dt, F, cs);
  ring.v[0] = s.rb.alloc("kv_ring0.v", d.s_l, d.Hkvl, d.dv, d.dt, F, cs);
  s.rb.copy(ring.k[0], {0, d.s_l}, qkv.k, {0, d.s_l}, false, F, cs, qkv.ready, "fwd kv ring buffer 0 (k)");
  ring.kv0_v = s.rb.copy(ring.v[0], {0, d.s_l}, qkv.v, {0, d.s_l}, false, F, cs, {}, "fwd kv ring buffer 0 (v)");
}

/// Step i's KV send to p+1 and receive from p−1 into the next ring buffer (steps 0..P−2); returns the op.
OpIndex fwd_send_recv_kv(RankState& s, ForwardRing& ring, int64_t i) {
  const RankDims& d = s.d;
  const auto F = Phase::forward;
  const auto comm = Stream::comm;
  const size_t iu = static_cast<size_t>(i);
  ring.k[iu + 1] = s.rb.alloc("kv_ring" + std::to_string(i + 1) + ".k", d.s_l, d.Hkvl, d.dk, d.dt, F, comm);
  ring.v[iu + 1] = s.rb.alloc("kv_ring" + std::to_string(i + 1) + ".v", d.s_l, d.Hkvl, d.dv, d.dt, F, comm);
  SendRecvOp m{d.next, d.prev, {ring.k[iu], ring.v[iu]}, {ring.k[iu + 1], ring.v[iu + 1]}, kTagFwdRing + i,
               kTagFwdRing + i};
  std::vector<OpIndex> deps;
  if (i == 0) deps.push_back(ring.kv0_v);
  return s.rb.add(m, F, comm, deps, numbered_label("fwd step ", i, " send/recv kv"), i, 0,
                  s.rb.bytes_of(ring.k[iu]) + s.rb.bytes_of(ring.v[iu]));
}

/// Step i's attention block on its stream (compute for even steps, cp_stream for odd ones) into per-step out and
/// LSE buffers, after the KV of step i has arrived (`kv_arrived`, or the ring buffer 0 copy at step 0).
OpIndex fwd_attn_block(RankState& s, const AttnLayoutTensors& qkv, ForwardRing& ring, int64_t i, Stream st,
                       OpIndex kv_arrived) {
  const RankDims& d = s.d;
  const auto F = Phase::forward;
  const size_t iu = static_cast<size_t>(i);
  const Section sec = ring.sections[iu];
  const auto rows = rows_of(sec, d.C);
  ring.out_step[iu] = s.rb.alloc("out_step" + std::to_string(i), rows.q.count, d.Hl, d.dv, d.dt, F, st);
  ring.lse_step[iu] = s.rb.alloc("lse_step" + std::to_string(i), rows.q.count, d.Hl, 1, Dtype::fp32, F, st);
  std::vector<OpIndex> deps;
  if (i == 0) deps.push_back(ring.kv0_v);
  if (i > 0) deps.push_back(kv_arrived);  // KV of step i has arrived
  DocumentMask doc = block_document_mask(s, rows, ((d.p - i) % d.P + d.P) % d.P);  // KV of p2p rank p − i
  const double flops = d.fwd_pair * static_cast<double>(block_pair_count(s, rows, doc));
  return s.rb.add(
      AttnFwdBlockOp{qkv.q, ring.k[iu], ring.v[iu], rows.q, rows.kv, rows.mask, sec, ring.out_step[iu],
                     ring.lse_step[iu], std::move(doc)},
      F, st, deps, numbered_label("fwd step ", i, spaced(to_string(sec))), i, flops,
      s.rb.bytes_of(qkv.q) + s.rb.bytes_of(ring.k[iu]) + s.rb.bytes_of(ring.v[iu]) +
          s.rb.bytes_of(ring.out_step[iu]));
}

/// softmax_lse merge of step i (TE flash_attn_fwd_softmax_lse_correction), chained across the two streams: step 0
/// allocates and initialises softmax_lse, later steps merge their LSE into the rows of their section.
void fwd_lse_merge(RankState& s, ForwardRing& ring, int64_t i, Stream st, OpIndex kernel) {
  const RankDims& d = s.d;
  const auto F = Phase::forward;
  const size_t iu = static_cast<size_t>(i);
  if (i == 0) {
    ring.lse = s.rb.alloc("softmax_lse", d.s_l, d.Hl, 1, Dtype::fp32, F, st);  // [b, S/P, H/A] fp32
    ring.last_merge = s.rb.copy(ring.lse, {0, d.s_l}, ring.lse_step[0], {0, d.s_l}, false, F, st, {kernel},
                                "fwd lse init", 0);
  } else {
    RowRange dst = rows_of(ring.sections[iu], d.C).q;
    std::vector<OpIndex> mdeps{kernel, ring.last_merge};
    ring.last_merge = s.rb.add(LseMergeOp{ring.lse, ring.lse_step[iu], dst, false, s.faults.unguarded_empty_merge},
                               F, st, mdeps,
                               numbered_label("fwd step ", i, " lse merge"), i, 0,
                               dst.count * d.batch * d.Hl * 4 * 3);
  }
}

}  // namespace

ForwardRing init_fwd_ring(RankState& s, const AttnLayoutTensors& qkv) {
  const size_t Pu = static_cast<size_t>(s.d.P);
  ForwardRing ring;
  ring.k.resize(Pu);
  ring.v.resize(Pu);
  ring.out_step.resize(Pu);
  ring.lse_step.resize(Pu);
  ring.sections.resize(Pu);
  alloc_kv_ring_buffer0(s, qkv, ring);
  return ring;
}

OpIndex fwd_ring_step(RankState& s, const AttnLayoutTensors& qkv, ForwardRing& ring, int64_t i, OpIndex prev_comm) {
  const Stream st = (i % 2 == 0) ? Stream::compute : Stream::cp;
  OpIndex comm_i = -1;
  if (i < s.d.P - 1) comm_i = fwd_send_recv_kv(s, ring, i);
  ring.sections[static_cast<size_t>(i)] = fwd_step_section(s, i);
  const OpIndex kernel = fwd_attn_block(s, qkv, ring, i, st, prev_comm);
  fwd_lse_merge(s, ring, i, st, kernel);
  return comm_i;
}

ForwardRing fwd_ring(RankState& s, const AttnLayoutTensors& qkv) {
  ForwardRing ring = init_fwd_ring(s, qkv);
  OpIndex prev_comm = -1;  // send/recv of the previous step: the KV of this step
  for (int64_t i = 0; i < s.d.P; ++i) prev_comm = fwd_ring_step(s, qkv, ring, i, prev_comm);
  return ring;
}

std::pair<BufferId, OpIndex> fwd_out_correction(RankState& s, const ForwardRing& ring) {
  const RankDims& d = s.d;
  const auto F = Phase::forward;
  const auto cs = Stream::compute;
  // Sequential on the current stream after the ring (TE L1980-2028).
  // [b, S/P, H/A, dv]
  const BufferId out_a = s.rb.alloc(d.A > 1 ? "out.a2a" : "out", d.s_l, d.Hl, d.dv, d.dt, F, cs);
  OpIndex last_corr = -1;
  for (int64_t i = 0; i < d.P; ++i) {
    const size_t iu = static_cast<size_t>(i);
    const auto rows = rows_of(ring.sections[iu], d.C);
    std::vector<OpIndex> deps{ring.last_merge};
    last_corr = s.rb.add(OutCorrectionOp{out_a, ring.out_step[iu], ring.lse_step[iu], ring.lse, rows.q, i > 0}, F,
                         cs, deps, numbered_label("fwd out correction ", i), i, 0,
                         rows.q.count * s.rb.row_bytes(out_a) * (i > 0 ? 3 : 2));
    s.rb.free(ring.out_step[iu], F, cs);
    s.rb.free(ring.lse_step[iu], F, cs);
  }
  return {out_a, last_corr};
}

void free_fwd_ring_buffers(RankState& s, const ForwardRing& ring, OpIndex fwd_done) {
  for (int64_t i = 0; i + 1 < s.d.P; ++i) {
    s.rb.free(ring.k[static_cast<size_t>(i)], Phase::forward, Stream::comm, {fwd_done});
    s.rb.free(ring.v[static_cast<size_t>(i)], Phase::forward, Stream::comm, {fwd_done});
  }
}

}  // namespace hcpsim::builder_parts
