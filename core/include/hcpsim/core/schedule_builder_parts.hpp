#pragma once
/// The pieces the CP variants' schedule builders (cp_variant.hpp) compose a rank's program from: small named
/// functions that each append one part of TE's algorithm to a rank's program. The a2a+p2p rank
/// (compose_ring_rank) is, in program order (docs/algorithm.md §3–§5, §7):
///   forward:  a2a of q/k/v (schedule_builder_a2a.cpp) -> the KV ring (schedule_builder_fwd_ring.cpp: steps, LSE
///             merges, output correction) -> a2a of out -> free the ring's KV buffers except the last;
///   backward: a2a of dout -> the [KV | dKV] ring (schedule_builder_bwd_ring.cpp: buffers, steps with the §5.3
///             copy/add rules, frees) -> a2a of dq/dk/dv.
/// The all_gather rank (schedule_builder_all_gather.cpp) gathers K and V, runs one kernel per local chunk and
/// reduce-scatters dK and dV. Every piece appends to the rank's program through RankBuilder, so the order of the
/// calls is the order of the ops and buffers; the schedules are compared byte for byte, so that order must not
/// change.

#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/core/semantics.hpp"

namespace hcpsim::builder_parts {

/// Message tags: identical on every member of a collective and on both ends of a message.
constexpr int64_t kTagFwdA2aQ = 1, kTagFwdA2aK = 2, kTagFwdA2aV = 3, kTagFwdA2aOut = 4;
constexpr int64_t kTagBwdA2aDout = 11, kTagBwdA2aDq = 12, kTagBwdA2aDk = 13, kTagBwdA2aDv = 14;
constexpr int64_t kTagFwdRing = 1000, kTagBwdRing = 2000;
constexpr int64_t kTagFwdAgK = 21, kTagBwdAgK = 31, kTagBwdRsDk = 33, kTagBwdRsDv = 34;  ///< all_gather (+1: v)

/// " <word><tail>": the suffix of a numbered op label ("fwd step 3" + " lower").
inline std::string spaced(std::string_view word, std::string_view tail = {}) {
  std::string s(1, ' ');
  s.append(word).append(tail);
  return s;
}

/// Appends buffers and ops to one rank's program (buffers: [batch, rows, heads, width]; FLOPs and bytes are the
/// op's cost-model inputs).
class RankBuilder {
 public:
  /// `prog` and `shape` must outlive the builder.
  RankBuilder(RankProgram& prog, const AttentionShape& shape) : prog_(prog), shape_(shape) {}

  /// Declares a buffer [shape.batch, rows, heads, width] without an AllocOp (inputs, or allocated by hand).
  BufferId declare(const std::string& name, int64_t rows, int64_t heads, int64_t width, Dtype dtype) {
    prog_.buffers.push_back(BufferDecl{name, shape_.batch, rows, heads, width, dtype});
    return static_cast<BufferId>(prog_.buffers.size() - 1);
  }

  /// Appends an op; returns its index.
  OpIndex add(OpPayload payload, Phase phase, Stream stream, std::vector<OpIndex> deps, Label label,
              int64_t ring_step = -1, double flops = 0, int64_t bytes = 0) {
    return prog_.append(std::move(payload), phase, stream, std::move(deps), std::move(label), ring_step, flops, bytes);
  }

  /// Declares a buffer and emits its AllocOp on `stream` after `deps`.
  BufferId alloc(const std::string& name, int64_t rows, int64_t heads, int64_t width, Dtype dtype, Phase phase,
                 Stream stream, std::vector<OpIndex> deps = {}) {
    BufferId id = declare(name, rows, heads, width, dtype);
    add(AllocOp{id}, phase, stream, std::move(deps), prefixed_label("alloc ", name));
    return id;
  }

  /// Emits the FreeOp of `id` on `stream` after `deps`.
  OpIndex free(BufferId id, Phase phase, Stream stream, std::vector<OpIndex> deps = {}) {
    return add(FreeOp{id}, phase, stream, std::move(deps), prefixed_label("free ", prog_.buffers[static_cast<size_t>(id)].name));
  }

  /// Size of buffer `id` in bytes.
  int64_t bytes_of(BufferId id) const { return prog_.buffers[static_cast<size_t>(id)].size_bytes(); }
  /// Bytes of one row (one token) of buffer `id`.
  int64_t row_bytes(BufferId id) const {
    const auto& b = prog_.buffers[static_cast<size_t>(id)];
    return b.batch * b.heads * b.width * dtype_size_bytes(b.dtype);
  }

  /// Elementwise copy/add of rows; bytes = read src (+ dst when adding) + write dst.
  OpIndex copy(BufferId dst, RowRange dst_rows, BufferId src, RowRange src_rows, bool accumulate, Phase phase,
               Stream stream, std::vector<OpIndex> deps, Label label, int64_t ring_step = -1) {
    int64_t bytes = row_bytes(src) * src_rows.count * (accumulate ? 3 : 2);
    return add(CopyOp{dst, src, dst_rows, src_rows, accumulate}, phase, stream, std::move(deps), label, ring_step, 0,
               bytes);
  }

  /// The program being appended to.
  RankProgram& prog() { return prog_; }

 private:
  RankProgram& prog_;
  const AttentionShape& shape_;
};

// ---- the a2a+p2p rank ----

/// Where one flat CP rank g sits in the [A, P] layout and its local sizes (docs/algorithm.md §1–§2).
struct RankDims {
  int64_t A = 1, P = 1;  ///< a2a and p2p group sizes
  int64_t a = 0, p = 0;  ///< this rank's a2a and p2p ranks
  int64_t s_f = 0;       ///< tokens per rank before the a2a, S/cp
  int64_t C = 0;         ///< super-chunk, S/(2P)
  int64_t s_l = 0;       ///< tokens per rank after the a2a, S/P
  int64_t batch = 0;     ///< b
  int64_t H = 0, Hkv = 0, dk = 0, dv = 0;  ///< per-TP-rank heads and head dims
  int64_t Hl = 0, Hkvl = 0;                ///< heads after the a2a: H/A, Hkv/A
  Dtype dt = Dtype::bf16;
  bool causal = false;
  double fwd_pair = 0, bwd_pair = 0;  ///< attention FLOPs per (q, k) pair × batch × H/A
  int64_t next = 0, prev = 0;         ///< flat CP ranks of p2p ranks p+1 and p−1 (same a2a rank)
};

/// The state every piece of an a2a+p2p rank's program shares: the program being appended to, the rank's
/// dimensions, its a2a group with TE's chunk reorders, and the deliberate faults (all false = TE).
struct RankState {
  RankBuilder rb;
  RankDims d;
  std::vector<int64_t> a2a_group;    ///< flat CP ranks of this rank's a2a group
  std::vector<int64_t> before_attn;  ///< chunk_ids_before_attn(A)
  std::vector<int64_t> after_attn;   ///< chunk_ids_after_attn(A)
  BuilderFaults faults;
  /// Packed sequences (shape.packing non-empty): the THD layout with the valid-token rule the faults select, and
  /// the post-a2a token runs of every p2p rank (what the KV of that rank holds). Null for bshd.
  std::shared_ptr<const ThdLayout> thd;
  std::vector<std::vector<TokenRun>> thd_runs;
};

/// The builder state of the rank at flat CP position g of `layout`: its dimensions in the layout and shape, its
/// ring neighbours (the same a2a rank at p2p ranks p±1), its a2a group and TE's chunk orders. A variant that
/// places ranks differently overrides d.next / d.prev. `prog` and `shape` must outlive the state.
RankState make_rank_state(RankProgram& prog, const AttentionShape& shape, const CpLayout& layout, int64_t g,
                          const BuilderFaults& faults);

/// The rank's input tensors, zigzag-sharded with the flat CP rank: [b, S/cp, heads, width].
struct RankInputs {
  BufferId q = -1, k = -1, v = -1, dout = -1;
};

/// Declares the rank's inputs q, k, v, dout ([b, S/cp, heads, width]) and binds them to the global token
/// positions `tokens` (head offset 0).
RankInputs declare_rank_inputs(RankState& s, const std::vector<int64_t>& tokens);

/// Tensors in the attention layout [b, S/P, heads/A, width] (the inputs themselves when A = 1) and the ops the
/// first kernel that reads them waits for (the a2a ops; none when A = 1).
struct AttnLayoutTensors {
  BufferId q = -1, k = -1, v = -1;
  std::vector<OpIndex> ready;
};

/// What the forward ring leaves behind (docs/algorithm.md §4).
struct ForwardRing {
  std::vector<BufferId> k, v;  ///< KV ring buffers per step (p2p_comm_buffers); the last is saved for the backward
  std::vector<BufferId> out_step, lse_step;  ///< per-step partial outputs and LSEs, freed by the correction
  std::vector<Section> sections;             ///< forward section of each step
  BufferId lse = -1;                         ///< merged softmax_lse, [b, S/P, H/A] fp32
  OpIndex kv0_v = -1;                        ///< copy of the local V into ring buffer 0
  OpIndex last_merge = -1;                   ///< the last LSE merge (or the LSE init when P = 1)
};

/// The forward's result: the corrected output in the attention layout, the output in the input layout (out_a
/// itself when A = 1) and the op that ends the forward (the a2a of out, or the last correction when A = 1).
struct ForwardOutput {
  BufferId out_a = -1, out = -1;
  OpIndex done = -1;
};

/// The backward's dout in the attention layout (the input itself when A = 1) and the ops the backward ring waits
/// for: the forward's end and the a2a of dout.
struct AttnLayoutDout {
  BufferId dout = -1;
  std::vector<OpIndex> ready;
};

/// What every backward kernel reads besides the travelling KV, all in the attention layout, and the ops the
/// backward ring waits for.
struct BackwardInputs {
  BufferId q = -1, out = -1, dout = -1, lse = -1;
  std::vector<OpIndex> ready;
};

/// One [KV | dKV] buffer of the backward ring.
struct KvBuf {
  BufferId k = -1, v = -1, dk = -1, dv = -1;
};

/// The backward ring's buffers (docs/algorithm.md §5.1): the dq accumulator, two [KV | dKV] buffers (one when
/// P = 1: the saved KV with the dk/dv accumulators) and, for the fault stale_kv_backward only, a stale KV copy.
struct BackwardRingBuffers {
  BufferId dq = -1;
  KvBuf buf[2];
  BufferId saved_k = -1, saved_v = -1;  ///< the last forward KV buffer
  BufferId stale_k = -1, stale_v = -1;
  OpIndex b0_copy = -1;  ///< the last copy into the ring's first buffer (or into the stale KV), -1 when P = 1
};

/// dq, dk and dv of one rank: the accumulators in the attention layout or the gathered gradients.
struct Grads {
  BufferId dq = -1, dk = -1, dv = -1;
};

/// Section of the causal block a ring step computes: its query rows, KV rows and mask (docs/algorithm.md §4.2).
struct RowsOfSection {
  RowRange q, kv;
  BlockMask mask;
};

/// The rows a section covers in the local [b, 2C, ...] q and KV, C = S/(2P) (docs/algorithm.md §4.2): diagonal =
/// both halves with the causal mask, lower = all q against the first KV half, upper = the second q half against
/// all KV, full = everything (non-causal).
inline RowsOfSection rows_of(Section s, int64_t C) {
  switch (s) {
    case Section::diagonal: return {{0, 2 * C}, {0, 2 * C}, BlockMask::causal};
    case Section::lower: return {{0, 2 * C}, {0, C}, BlockMask::none};
    case Section::upper: return {{C, C}, {0, 2 * C}, BlockMask::none};
    case Section::full: return {{0, 2 * C}, {0, 2 * C}, BlockMask::none};
  }
  HCPSIM_ASSERT(false, "unknown section");
}

/// The document mask of a ring block of this rank whose KV belongs to p2p rank `kv_source` (THD; empty for
/// bshd): the runs of this rank's q rows and of the source's KV rows in `rows`.
DocumentMask block_document_mask(const RankState& s, const RowsOfSection& rows, int64_t kv_source);
/// The (query, key) pairs a ring block computes: document_mask_pairs of `doc` (THD) or semantics::block_pairs.
int64_t block_pair_count(const RankState& s, const RowsOfSection& rows, const DocumentMask& doc);
/// THD: AllToAllOp::seq_half_rows of this rank's a2a ops (empty for bshd).
std::vector<int64_t> a2a_seq_half_rows(const RankState& s);

// schedule_builder_a2a.cpp: TE flash_attn_a2a_communicate (docs/algorithm.md §3).

/// Allocates q/k/v in the attention layout and scatters heads / gathers sequence into them (before_attn reorder);
/// returns the inputs unchanged when A = 1.
AttnLayoutTensors a2a_qkv_before_attn(RankState& s, const RankInputs& in);
/// Gathers heads of the corrected output back to the input layout (after_attn reorder) after `last_correction`
/// and frees the post-a2a k and v (not saved for the backward); when A = 1 the output is out_a itself.
ForwardOutput a2a_out_after_attn(RankState& s, const AttnLayoutTensors& qkv, BufferId out_a,
                                 OpIndex last_correction);
/// Allocates dout in the attention layout and scatters it after `fwd_done` (A > 1); returns it with the ops the
/// backward ring waits for.
AttnLayoutDout a2a_dout_before_attn(RankState& s, BufferId dout, OpIndex fwd_done);
/// Gathers the dq, dk, dv accumulators back to the input layout after `last_accum` and frees the accumulators;
/// returns `acc` unchanged when A = 1.
Grads a2a_grads_after_attn(RankState& s, const Grads& acc, OpIndex last_accum);

// schedule_builder_fwd_ring.cpp: TE AttnFuncWithCPAndKVP2P.forward (docs/algorithm.md §4).

/// Forward section of ring step i on p2p rank p of P (docs/algorithm.md §4.2): diagonal at step 0 (or P = 1),
/// then lower for i <= p and upper after; full when not causal.
Section fwd_section(bool causal, int64_t P, int64_t p, int64_t i);
/// The forward ring's state with ring buffer 0 = a copy of the local KV (TE p2p_comm_buffers[0]).
ForwardRing init_fwd_ring(RankState& s, const AttnLayoutTensors& qkv);
/// Forward ring step i: KV send to d.next / receive from d.prev (steps 0..P−2), the section, the attention block
/// (compute stream for even steps, cp_stream for odd ones) after the KV arrived (`prev_comm`, the previous step's
/// send/recv; -1 at step 0) and the softmax_lse merge. Returns this step's send/recv (-1 at the last step).
OpIndex fwd_ring_step(RankState& s, const AttnLayoutTensors& qkv, ForwardRing& ring, int64_t i, OpIndex prev_comm);
/// The P ring steps: init_fwd_ring then fwd_ring_step for i = 0 … P−1.
ForwardRing fwd_ring(RankState& s, const AttnLayoutTensors& qkv);
/// Allocates the output in the attention layout and applies the per-step output corrections (TE L1980-2028);
/// returns the output buffer and the last correction.
std::pair<BufferId, OpIndex> fwd_out_correction(RankState& s, const ForwardRing& ring);
/// Frees every forward KV ring buffer except the last (TE saves kv = p2p_comm_buffers[P-1]) after `fwd_done`.
void free_fwd_ring_buffers(RankState& s, const ForwardRing& ring, OpIndex fwd_done);

// schedule_builder_bwd_ring.cpp: TE AttnFuncWithCPAndKVP2P.backward (docs/algorithm.md §5).

/// Allocates the dq accumulator and the [KV | dKV] ring buffers. P > 1: copies the saved KV (the last forward KV
/// buffer) into the first, then frees it; P = 1: the saved KV is used in place with fresh dk/dv accumulators.
BackwardRingBuffers alloc_bwd_ring_buffers(RankState& s, const BackwardInputs& in, const ForwardRing& ring);
/// The copy (=) or add (+=) ops of one backward step, on the compute stream after the step's kernel and message.
struct StepAccumulator {
  RankBuilder& rb;
  std::vector<OpIndex> deps;
  int64_t i;  ///< the ring step

  /// dst[dr] = src[sr] (add false) or dst[dr] += src[sr] (add true), labelled "bwd step <i> <what> =" / "+=".
  OpIndex operator()(BufferId dst, RowRange dr, BufferId src, RowRange sr, bool add, const std::string& what) {
    return rb.copy(dst, dr, src, sr, add, Phase::backward, Stream::compute, deps,
                   numbered_label("bwd step ", i, spaced(what, add ? " +=" : " =")), i);
  }
};

/// Backward section of ring step i on p2p rank p of P (docs/algorithm.md §5.1): upper, then lower from step
/// P−p−1, diagonal at the last step; full when not causal.
Section bwd_section(bool causal, int64_t P, int64_t p, int64_t i);
/// The dQ rules of step i (docs/algorithm.md §5.3): copy or add the step's dq into the rank's accumulator.
void accumulate_dq(const RankDims& d, StepAccumulator& acc, BufferId dq_acc, BufferId dq_step, int64_t i);
/// The dK/dV rules of step i (docs/algorithm.md §5.3): copy or add the step's dk, dv into the accumulator `dst`
/// received from p+1; returns the last op.
OpIndex accumulate_dkv(const RankDims& d, StepAccumulator& acc, const KvBuf& dst, const Grads& step, int64_t i);

/// The message and accumulation ops of one backward step.
struct BwdStepOps {
  OpIndex comm = -1;   ///< the step's send/recv, -1 when P = 1
  OpIndex accum = -1;  ///< the step's last dk/dv accumulation
};

/// Backward ring step i: send/recv ([KV | dKV] to d.prev, from d.next) after the previous step's accumulation,
/// attention-backward block, dq and dk/dv copy/add rules, free the step's gradients.
BwdStepOps bwd_ring_step(RankState& s, const BackwardRingBuffers& bufs, const BackwardInputs& in, int64_t i,
                         const BwdStepOps& prev);
/// The P backward ring steps (bwd_ring_step for i = 0 … P−1); returns the last step's last accumulation op.
OpIndex bwd_ring(RankState& s, const BackwardRingBuffers& bufs, const BackwardInputs& in);
/// Frees the backward ring's KV and spare buffers; returns the buffer holding the final dk/dv accumulators.
KvBuf free_bwd_ring_buffers(RankState& s, const BackwardRingBuffers& bufs);

// schedule_builder.cpp: the composed a2a+p2p rank (TE AttnFuncWithCPAndKVP2P with flash_attn_a2a_communicate).

/// The forward's results the backward reads.
struct RingForward {
  AttnLayoutTensors qkv;  ///< q, k, v in the attention layout
  ForwardRing ring;       ///< the ring's buffers (the last KV is saved for the backward) and softmax_lse
  ForwardOutput out;      ///< the corrected output and the op that ends the forward
};

/// The backward of a layer starts after its forward: the first backward op of every stream of `prog` gets a
/// dependency on `fwd_done` (otherwise backward buffers would be allocated during the forward's last a2a).
void order_backward_after_forward(RankProgram& prog, OpIndex fwd_done);
/// The forward: a2a of q/k/v, the KV ring, the output correction, the a2a of out, the ring's KV buffers freed.
RingForward ring_forward(RankState& s, const RankInputs& in);
/// The backward: a2a of dout, the [KV | dKV] ring, the a2a of dq/dk/dv, the attention-layout tensors freed, and
/// every stream's first backward op ordered after the forward. Returns dq, dk, dv in the input layout.
Grads ring_backward(RankState& s, const RankInputs& in, const RingForward& fwd);
/// One whole a2a+p2p rank: inputs bound to `tokens` (before the a2a), ring_forward, ring_backward, outputs bound
/// to `tokens` (softmax_lse to `lse_tokens`, the tokens after the a2a, at head offset a·H/A).
void compose_ring_rank(RankState& s, const std::vector<int64_t>& tokens, const std::vector<int64_t>& lse_tokens);

// schedule_builder_all_gather.cpp: TE AttnFuncWithCPAndKVAllGather (docs/algorithm.md §9.5).

/// K and V (inputs k, v) all-gathered over `group` in phase `ph` after `deps` into fresh [b, S, Hkv, dk] and
/// [b, S, Hkv, dv] buffers "k.ag<what>", "v.ag<what>" on the comm stream in natural order (before(cp)); THD
/// gathers per sequence into packed natural order (`seq_half_rows`, AllGatherOp; empty for bshd).
/// Returns them with the two gather ops.
std::tuple<BufferId, BufferId, std::vector<OpIndex>> gather_kv(RankBuilder& rb, const std::vector<int64_t>& group,
                                                               Phase ph, BufferId k, BufferId v,
                                                               const std::string& what, std::vector<OpIndex> deps,
                                                               const std::vector<int64_t>& seq_half_rows = {});
/// One whole all_gather rank g of `layout` (A = 1): gathered KV, one forward kernel per local chunk against the
/// visible KV prefix, backward per chunk into zeroed full-length dK/dV reduce-scattered back (after(cp)).
void compose_all_gather_rank(Schedule& sched, const CpLayout& layout, int64_t g);

}  // namespace hcpsim::builder_parts
