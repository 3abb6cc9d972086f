// The backward [KV | dKV] ring of the a2a+p2p rank: TE AttnFuncWithCPAndKVP2P.backward (docs/algorithm.md §5):
// the ring buffers, per step the send/recv, the attention-backward block and the §5.3 copy/add accumulation of
// dq (local) and dk/dv (into the accumulator received from p+1), then the frees.
#include <string>
#include <utility>
#include <vector>

#include "hcpsim/core/schedule_builder_parts.hpp"

namespace hcpsim::builder_parts {

Section bwd_section(bool causal, int64_t P, int64_t p, int64_t i) {
  if (!causal) return Section::full;
  if (i == P - 1) return Section::diagonal;
  return i >= P - p - 1 ? Section::lower : Section::upper;
}

namespace {

/// Step i's message to p−1 / from p+1 (docs/algorithm.md §5.1): KV at step 0, KV + dKV in between, dKV at the last
/// step; after the previous step's accumulation and the backward's inputs.
OpIndex bwd_send_recv(RankState& s, const BackwardRingBuffers& bufs, const BackwardInputs& in, int64_t i,
                      OpIndex prev_accum) {
  const int64_t P = s.d.P;
  const KvBuf& cur = bufs.buf[i % 2];
  const KvBuf& nxt = bufs.buf[(i + 1) % 2];
  SendRecvOp m{s.d.prev, s.d.next, {}, {}, kTagBwdRing + i, kTagBwdRing + i};  // send to p-1, receive from p+1
  if (i == 0) {
    m.send = {cur.k, cur.v};
    m.recv = {nxt.k, nxt.v};
  } else if (i < P - 1) {
    m.send = {cur.k, cur.v, cur.dk, cur.dv};
    m.recv = {nxt.k, nxt.v, nxt.dk, nxt.dv};
  } else {
    m.send = {cur.dk, cur.dv};
    m.recv = {nxt.dk, nxt.dv};
  }
  int64_t bytes = 0;
  for (BufferId id : m.send) bytes += s.rb.bytes_of(id);
  std::vector<OpIndex> deps{prev_accum};
  for (OpIndex r : in.ready) deps.push_back(r);
  const char* what = i == 0 ? " send/recv kv" : (i < P - 1 ? " send/recv kv+dkv" : " send/recv dkv");
  return s.rb.add(m, Phase::backward, Stream::comm, deps, numbered_label("bwd step ", i, what), i, 0, bytes);
}

/// A backward step's attention-backward block and the per-step gradients it writes.
struct BwdBlock {
  Grads step;  ///< [b, q rows, H/A, dk], [b, kv rows, Hkv/A, dk], [b, kv rows, Hkv/A, dv]
  OpIndex kernel = -1;
};

/// Step i's attention-backward block into freshly allocated per-step dq/dk/dv, after the inputs, the KV of this
/// step (`prev_comm`) and the ring buffer 0 copy; the fault stale_kv_backward reads the stale KV copy instead.
BwdBlock bwd_attn_block(RankState& s, const BackwardRingBuffers& bufs, const BackwardInputs& in, int64_t i,
                        OpIndex prev_comm) {
  const RankDims& d = s.d;
  const auto B = Phase::backward;
  const auto cs = Stream::compute;
  const Section sec = bwd_section(d.causal, d.P, d.p, i);
  const auto rows = rows_of(sec, d.C);
  BwdBlock blk;
  Grads& step = blk.step;
  step.dq = s.rb.alloc("dq_step" + std::to_string(i), rows.q.count, d.Hl, d.dk, d.dt, B, cs);
  step.dk = s.rb.alloc("dk_step" + std::to_string(i), rows.kv.count, d.Hkvl, d.dk, d.dt, B, cs);
  step.dv = s.rb.alloc("dv_step" + std::to_string(i), rows.kv.count, d.Hkvl, d.dv, d.dt, B, cs);
  std::vector<OpIndex> kdeps = in.ready;
  if (prev_comm >= 0) kdeps.push_back(prev_comm);
  if (bufs.b0_copy >= 0) kdeps.push_back(bufs.b0_copy);
  DocumentMask doc = block_document_mask(s, rows, (d.p + 1 + i) % d.P);  // KV of p2p rank p + 1 + i
  const double flops = d.bwd_pair * static_cast<double>(block_pair_count(s, rows, doc));
  const KvBuf& cur = bufs.buf[i % 2];
  const BufferId kern_k = bufs.stale_k >= 0 ? bufs.stale_k : cur.k;
  const BufferId kern_v = bufs.stale_v >= 0 ? bufs.stale_v : cur.v;
  blk.kernel = s.rb.add(AttnBwdBlockOp{in.q, kern_k, kern_v, in.out, in.dout, in.lse, rows.q, rows.kv, rows.mask,
                                      sec, step.dq, step.dk, step.dv, std::move(doc)},
                       B, cs, kdeps, numbered_label("bwd step ", i, spaced(to_string(sec))), i, flops,
                       2 * (s.rb.bytes_of(in.q) + s.rb.bytes_of(cur.k) + s.rb.bytes_of(cur.v)) +
                           s.rb.bytes_of(in.out) + s.rb.bytes_of(in.dout));
  return blk;
}

}  // namespace

void accumulate_dq(const RankDims& d, StepAccumulator& acc, BufferId dq_acc, BufferId dq_step, int64_t i) {
  const int64_t P = d.P, p = d.p, C = d.C;
  const RowRange all{0, d.s_l}, h0{0, C}, h1{C, C}, half_src{0, C}, second_src{C, C};
  if (!d.causal || P == 1) {
    acc(dq_acc, all, dq_step, all, i > 0, "dq");
  } else if (i > P - p - 1) {
    acc(dq_acc, all, dq_step, all, true, "dq");
  } else if (i == P - p - 1) {
    if (p == P - 1) {
      acc(dq_acc, all, dq_step, all, false, "dq");
    } else {
      acc(dq_acc, h0, dq_step, half_src, false, "dq[h0]");
      acc(dq_acc, h1, dq_step, second_src, true, "dq[h1]");
    }
  } else {
    acc(dq_acc, h1, dq_step, {0, C}, i > 0, "dq[h1]");  // upper: dq_step holds the second half only
  }
}

OpIndex accumulate_dkv(const RankDims& d, StepAccumulator& acc, const KvBuf& dst, const Grads& step, int64_t i) {
  const int64_t P = d.P, p = d.p, C = d.C;
  const RowRange all{0, d.s_l}, h0{0, C}, h1{C, C}, half_src{0, C}, second_src{C, C};
  OpIndex last = -1;
  for (int which = 0; which < 2; ++which) {
    const BufferId to = which == 0 ? dst.dk : dst.dv;
    const BufferId from = which == 0 ? step.dk : step.dv;
    const std::string nm = which == 0 ? "dk" : "dv";
    if (!d.causal || P == 1) {
      last = acc(to, all, from, all, P > 1 && i > 0, nm);
    } else if (i == P - 1) {
      if (p == 0) {
        acc(to, h0, from, half_src, true, nm + "[h0]");
        last = acc(to, h1, from, second_src, false, nm + "[h1]");
      } else {
        last = acc(to, all, from, all, true, nm);
      }
    } else if (i >= P - p - 1) {  // lower: the step's dk covers the first half only
      last = acc(to, h0, from, {0, C}, !(i == 0 && p == P - 1), nm + "[h0]");
    } else {  // upper
      last = acc(to, all, from, all, i > 0, nm);
    }
  }
  return last;
}

BwdStepOps bwd_ring_step(RankState& s, const BackwardRingBuffers& bufs, const BackwardInputs& in, int64_t i,
                         const BwdStepOps& prev) {
  const auto B = Phase::backward;
  const auto cs = Stream::compute;
  BwdStepOps ops;
  if (s.d.P > 1) ops.comm = bwd_send_recv(s, bufs, in, i, prev.accum);
  const BwdBlock blk = bwd_attn_block(s, bufs, in, i, prev.comm);
  const Grads& step = blk.step;
  StepAccumulator acc{s.rb, {blk.kernel}, i};
  if (ops.comm >= 0) acc.deps.push_back(ops.comm);
  accumulate_dq(s.d, acc, bufs.dq, step.dq, i);
  const KvBuf& dst = (s.d.P == 1) ? bufs.buf[0] : bufs.buf[(i + 1) % 2];
  ops.accum = accumulate_dkv(s.d, acc, dst, step, i);
  s.rb.free(step.dq, B, cs);
  s.rb.free(step.dk, B, cs);
  s.rb.free(step.dv, B, cs);
  return ops;
}

BackwardRingBuffers alloc_bwd_ring_buffers(RankState& s, const BackwardInputs& in, const ForwardRing& ring) {
  const RankDims& d = s.d;
  const auto B = Phase::backward;
  const auto cs = Stream::compute;
  BackwardRingBuffers b;
  b.dq = s.rb.alloc(d.A > 1 ? "dq.a2a" : "dq", d.s_l, d.Hl, d.dk, d.dt, B, cs);  // [b, S/P, H/A, dk]
  // Two [KV | dKV] ring buffers. B0's KV is the saved last forward buffer (copied, as TE does).
  b.saved_k = ring.k[static_cast<size_t>(d.P - 1)];
  b.saved_v = ring.v[static_cast<size_t>(d.P - 1)];
  if (d.P == 1) {
    b.buf[0] = {b.saved_k, b.saved_v, -1, -1};
    b.buf[0].dk = s.rb.alloc(d.A > 1 ? "dk.a2a" : "dk", d.s_l, d.Hkvl, d.dk, d.dt, B, cs);
    b.buf[0].dv = s.rb.alloc(d.A > 1 ? "dv.a2a" : "dv", d.s_l, d.Hkvl, d.dv, d.dt, B, cs);
    return b;
  }
  for (int j = 0; j < 2; ++j) {
    const std::string n = "bwd_ring" + std::to_string(j);
    b.buf[j].k = s.rb.alloc(n + ".k", d.s_l, d.Hkvl, d.dk, d.dt, B, cs);
    b.buf[j].v = s.rb.alloc(n + ".v", d.s_l, d.Hkvl, d.dv, d.dt, B, cs);
    b.buf[j].dk = s.rb.alloc(n + ".dk", d.s_l, d.Hkvl, d.dk, d.dt, B, cs);
    b.buf[j].dv = s.rb.alloc(n + ".dv", d.s_l, d.Hkvl, d.dv, d.dt, B, cs);
  }
  const RowRange all{0, d.s_l};
  s.rb.copy(b.buf[0].k, all, b.saved_k, all, false, B, cs, in.ready, "bwd ring buffer 0 (k)");
  b.b0_copy = s.rb.copy(b.buf[0].v, all, b.saved_v, all, false, B, cs, {}, "bwd ring buffer 0 (v)");
  if (s.faults.stale_kv_backward) {
    b.stale_k = s.rb.alloc("bwd_stale.k", d.s_l, d.Hkvl, d.dk, d.dt, B, cs);
    b.stale_v = s.rb.alloc("bwd_stale.v", d.s_l, d.Hkvl, d.dv, d.dt, B, cs);
    s.rb.copy(b.stale_k, all, b.saved_k, all, false, B, cs, {}, "bwd stale kv (k)");
    b.b0_copy = s.rb.copy(b.stale_v, all, b.saved_v, all, false, B, cs, {}, "bwd stale kv (v)");
  }
  s.rb.free(b.saved_k, B, cs);
  s.rb.free(b.saved_v, B, cs);
  return b;
}

OpIndex bwd_ring(RankState& s, const BackwardRingBuffers& bufs, const BackwardInputs& in) {
  BwdStepOps prev{-1, bufs.b0_copy};
  for (int64_t i = 0; i < s.d.P; ++i) prev = bwd_ring_step(s, bufs, in, i, prev);
  return prev.accum;
}

KvBuf free_bwd_ring_buffers(RankState& s, const BackwardRingBuffers& bufs) {
  const auto B = Phase::backward;
  const auto cs = Stream::compute;
  const int64_t P = s.d.P;
  const KvBuf fin = (P == 1) ? bufs.buf[0] : bufs.buf[P % 2];
  if (P > 1) {
    const KvBuf& spare = bufs.buf[(P + 1) % 2];
    for (BufferId id : {spare.k, spare.v, spare.dk, spare.dv}) s.rb.free(id, B, cs);
    s.rb.free(fin.k, B, cs);
    s.rb.free(fin.v, B, cs);
    if (bufs.stale_k >= 0) {
      s.rb.free(bufs.stale_k, B, cs);
      s.rb.free(bufs.stale_v, B, cs);
    }
  } else {
    s.rb.free(bufs.saved_k, B, cs);
    s.rb.free(bufs.saved_v, B, cs);
  }
  return fin;
}

}  // namespace hcpsim::builder_parts
