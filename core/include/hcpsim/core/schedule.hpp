#pragma once
/// The schedule IR: for every CP rank, an ordered list of ops on named per-rank buffers, with dependencies and
/// streams. The simulator times it, the CPU oracle executes it numerically, the GPU backend runs it with CUDA.
/// No consumer re-derives the algorithm: everything an executor needs (row ranges, masks, copy/add rules,
/// message peers and tags, chunk reorder tables) is in the ops.
///
/// Buffer convention: every buffer is a 4-D tensor [b, rows, heads, width] in bshd order
/// (sbhd differs only in memory layout, which no op depends on). softmax_lse buffers have width 1 and are fp32.
/// Row ranges index the `rows` dimension.
///
/// Ordering contract (what every builder provides and every executor — simulator, CPU oracle, GPU plan — relies
/// on; nothing else orders ops):
/// * Within a rank, an op starts only after every op in its Op::deps and the previous op of its Stream (in
///   RankProgram::ops order) have finished. Deps and stream order, taken transitively, are the only ordering:
///   list order alone does not order two ops on different streams. An executor may run the ops in any order
///   that respects this (the CPU oracle runs them in list order, one such order).
/// * Messages are rendezvous: the data of a send/recv message moves while both its sending and its receiving op
///   run (it starts when both have started, and neither finishes before it has moved); a collective moves its
///   data while every member's op runs, and all members finish together. So each side reads its send / input
///   buffers and writes its recv / output buffers within its own op's interval, and since every communication
///   op of a rank runs on Stream::comm (check_invariants), communication orders no two ops of one rank beyond
///   that stream's order. A schedule that only works when sends are buffered deadlocks under this rule and is not
///   a valid schedule (ProgramWalker, program_walker.hpp, which the CPU oracle and the GPU plan walk, reports it).
/// * Hazard freedom (check_hazards, schedule_hazards.hpp): two ops of one rank on different streams that access
///   overlapping rows of one buffer, at least one writing (alloc and free write the whole buffer), are ordered
///   by the first rule. Then every execution the contract allows computes the same values.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "hcpsim/core/document_mask.hpp"
#include "hcpsim/core/op_storage.hpp"
#include "hcpsim/core/semantics.hpp"
#include "hcpsim/core/thd_layout.hpp"
#include "hcpsim/core/types.hpp"

namespace hcpsim {

/// Index of a buffer in Schedule::buffers of its rank.
using BufferId = int32_t;
/// Index of an op in RankProgram::ops.
using OpIndex = int32_t;

/// A per-rank tensor: [b, rows, heads, width].
struct BufferDecl {
  std::string name;  ///< unique within a rank, e.g. "q", "kv_ring1.k", "dq_step0"
  int64_t batch = 0;
  int64_t rows = 0;
  int64_t heads = 0;
  int64_t width = 0;
  Dtype dtype = Dtype::bf16;

  [[nodiscard]] int64_t elements() const { return batch * rows * heads * width; }
  [[nodiscard]] int64_t size_bytes() const { return elements() * dtype_size_bytes(dtype); }
};

/// Rows [begin, begin+count) of a buffer.
struct RowRange {
  int64_t begin = 0;
  int64_t count = 0;
  [[nodiscard]] int64_t end() const { return begin + count; }
  friend bool operator==(const RowRange& a, const RowRange& b) { return a.begin == b.begin && a.count == b.count; }
};

/// Which part of the causal ring block a step computes. Source: docs/algorithm.md §4.2 (TE
/// AttnFuncWithCPAndKVP2P: i == 0 the diagonal, i <= rank the lower half of KV, else the upper half of Q).
/// It is a label the rows and the mask of the block determine; check_invariants checks it with section_matches.
enum class Section { diagonal, lower, upper, full };
std::string to_string(Section s);

/// True when a block's rows and mask are what its section says (what check_invariants checks on every attention
/// block op): diagonal ⇔ a masked block (mask ≠ none); lower: unmasked, every row of the q buffer against the
/// first half of the kv buffer's rows; upper: unmasked, the second half of the q buffer's rows against every kv
/// row; full: unmasked, every kv row (any q rows: the all_gather variant computes one q chunk at a time). An
/// empty block (no q or no kv rows: lse −inf, out 0) matches every section.
/// q_buffer_rows / kv_buffer_rows: rows of the q and k buffers the block reads.
bool section_matches(Section section, BlockMask mask, RowRange q_rows, RowRange kv_rows, int64_t q_buffer_rows,
                     int64_t kv_buffer_rows);

// BlockMask, the mask a kernel applies inside its block, is declared with its meaning in semantics.hpp.

enum class Phase : uint8_t { forward, backward };
std::string to_string(Phase p);

/// Execution streams of a rank. compute = TE's current stream (S[0]); cp = TE's cp_stream (S[1]);
/// comm = NCCL's internal stream (collectives and send/recv). The ops of one stream run one after another in
/// RankProgram::ops order (ordering contract above).
enum class Stream : uint8_t { compute = 0, cp = 1, comm = 2 };
/// Number of Stream values (compute, cp, comm).
constexpr int kStreamCount = 3;
std::string to_string(Stream s);

/// Makes a buffer live (memory accounting only; contents undefined, executors fill it with NaN).
/// zero = true: contents are zero (TE's torch.zeros, e.g. the full-length dK/dV accumulators of all_gather);
/// additive field, default false.
struct AllocOp {
  BufferId buffer;
  bool zero = false;
};
/// Ends a buffer's life.
struct FreeOp { BufferId buffer; };

/// Ulysses all-to-all inside an a2a group (TE flash_attn_a2a_communicate). All members run the matching op.
/// scatter_heads: input [b, s, h, w] → output [b, A·s, h/A, w]: member j's whole sequence for head group a
///   (this member's a2a_rank), concatenated j-major as 2A half-chunks (index 2j+half), then output half-chunk k
///   = concatenated half-chunk chunk_order[k] (chunk_order = before(A)).
/// gather_heads: input [b, A·s, h/A, w] → output [b, s, h, w]: input half-chunks permuted so that slot m
///   = input half-chunk chunk_order[m] (chunk_order = after(A)); slots (2j, 2j+1) go to member j, which stores
///   what it receives from member a as its two chunks for head group a (heads [a·h/A, (a+1)·h/A)).
struct AllToAllOp {
  enum class Direction { scatter_heads, gather_heads };
  Direction direction = Direction::scatter_heads;
  std::vector<int64_t> group;        ///< CP ranks of the a2a group, in a2a_rank order
  std::vector<int64_t> chunk_order;  ///< 2A entries: before(A) or after(A)
  BufferId input = -1;
  BufferId output = -1;
  int64_t tag = 0;                   ///< identical on every member
  /// Packed sequences (THD, thd_layout.hpp): rows of one half-chunk of every sequence in one member's
  /// input-layout buffer [b, s, h, w] (h_s, Σ h_s = s/2), which then holds the first half-chunks of all sequences
  /// followed by the second ones ("halves-major"). Every half-chunk above is then cut per sequence: member j's
  /// half-chunk (j, half) of sequence q sits at its rows half·s/2 + Σ_{q'<q} h_q'; in the attention-layout
  /// buffer [b, A·s, h/A, w] slot k of sequence q sits at rows (k / A)·A·s/2 + A·Σ_{q'<q} h_q' + (k % A)·h_q.
  /// Empty = one sequence of s/2 rows (bshd), where both reduce to the rules above. Additive field.
  std::vector<int64_t> seq_half_rows{};
};

/// All-gather along the sequence inside `group` (TE all_gather CP, docs/algorithm.md §9.5). Every member's
/// input [b, s, h, w] is split into two half-chunks; the concatenation over members j (index 2j+half) is
/// permuted so that output half-chunk k = concatenated half-chunk chunk_order[k] (chunk_order = before(cp),
/// which yields natural sequence order). Output [b, cp·s, h, w]. All members run the matching op.
struct AllGatherOp {
  std::vector<int64_t> group;        ///< CP ranks, in rank order
  std::vector<int64_t> chunk_order;  ///< 2·|group| entries
  BufferId input = -1;
  BufferId output = -1;
  int64_t tag = 0;
  /// Packed sequences (THD): h_s per sequence as in AllToAllOp::seq_half_rows; member j's half-chunk (j, half) of
  /// sequence q sits at its rows half·s/2 + Σ_{q'<q} h_q', and output slot k of sequence q at rows
  /// 2n·Σ_{q'<q} h_q' + k·h_q (n = |group|: the packed natural order with before(n)). Empty = bshd. Additive field.
  std::vector<int64_t> seq_half_rows{};
};

/// Reduce-scatter along the sequence, the inverse of AllGatherOp: every member's input [b, cp·s, h, w] is cut
/// into 2·cp half-chunks, slot m = input half-chunk chunk_order[m] (chunk_order = after(cp)); member j receives
/// slots (2j, 2j+1) of every member and sums them in member order 0, 1, … (deterministic). Output [b, s, h, w].
struct ReduceScatterOp {
  std::vector<int64_t> group;
  std::vector<int64_t> chunk_order;
  BufferId input = -1;
  BufferId output = -1;
  int64_t tag = 0;
  /// Packed sequences (THD): the inverse of AllGatherOp::seq_half_rows's placement, per sequence. Additive field.
  std::vector<int64_t> seq_half_rows{};
};

/// One isend/irecv pair (TE flash_attn_p2p_communicate): sends `send` buffers (concatenated) to send_peer and
/// receives into `recv` buffers from recv_peer. Either side may be empty (peer −1). A message is identified by
/// (source cp rank, destination cp rank, tag); sizes of the two sides must match.
struct SendRecvOp {
  int64_t send_peer = -1;
  int64_t recv_peer = -1;
  IndexList send;
  IndexList recv;
  int64_t send_tag = 0;
  int64_t recv_tag = 0;
  /// Moved by the GPUs' copy engines rather than by a kernel on the SMs (Transformer Engine's userbuffers ring
  /// exchange with use_ce, TE's default for its all-gather overlaps: pytorch/module/base.py initialize_ub), so
  /// it does not slow the GPU's compute (GpuSpec::compute_slowdown_during_comm). Timing only. Additive field.
  bool copy_engine = false;
};

/// Forward attention of Q rows against KV rows: out = softmax(scale·q kᵀ + mask) v per (batch, head),
/// normalised within the block, and lse = log Σ exp(scale·q kᵀ) (natural log; −inf and out = 0 for a row with
/// no visible key). GQA: local q head hh uses local kv head hh / (heads_q / heads_kv).
/// out: [b, q_rows.count, hq, dv]; lse: [b, q_rows.count, hq, 1] fp32.
struct AttnFwdBlockOp {
  BufferId q = -1, k = -1, v = -1;
  RowRange q_rows, kv_rows;
  BlockMask mask = BlockMask::none;
  Section section = Section::full;
  BufferId out = -1, lse = -1;
  /// Packed sequences (THD): the tokens of q_rows and kv_rows (document_mask.hpp); a pair is visible iff both are
  /// in the same sequence, neither is padding and, for mask = causal, the key's position ≤ the query's. Empty =
  /// `mask` alone (bshd). Additive field.
  SharedDocumentMask doc{};
};

/// Backward of one block given the *global* out and lse (docs/algorithm.md §5.2): with D_r = Σ dO_r·O_r,
/// P = exp(scale·q kᵀ − L), dV = Pᵀ dO, dS = P∘(dO vᵀ − D), dQ = scale·dS k, dK = scale·dSᵀ q.
/// Reads q, out, dout, lse at q_rows and k, v at kv_rows. Writes fresh buffers dq [b, q_rows.count, hq, dk],
/// dk [b, kv_rows.count, hkv, dk], dv [b, kv_rows.count, hkv, dv] (GQA: summed over the query group).
struct AttnBwdBlockOp {
  BufferId q = -1, k = -1, v = -1, out = -1, dout = -1, lse = -1;
  RowRange q_rows, kv_rows;
  BlockMask mask = BlockMask::none;
  Section section = Section::full;
  BufferId dq = -1, dk = -1, dv = -1;
  SharedDocumentMask doc{};  ///< as AttnFwdBlockOp::doc; empty rows get dq = 0 and add nothing to dk, dv. Additive field.
};

/// TE flash_attn_fwd_softmax_lse_correction on rows [dst_rows): L ← max(L, L_i) + log1p(exp(min − max)),
/// with merge(−inf, −inf) = −inf. `src` rows are [0, dst_rows.count).
struct LseMergeOp {
  BufferId dst = -1;   ///< running lse
  BufferId src = -1;   ///< lse of one step
  RowRange dst_rows;
  /// true: the pre-#716 merge log(exp(L) + exp(L_i)) in fp32, which overflows for logits ≳ 88.7 (only the
  /// fault injector naive_lse_merge sets it; TE ≥ v1.6, the first release with #716, never does; TE before
  /// it computed the naive merge in fp64). Additive field, default false.
  bool naive = false;
  /// true: TE's unguarded merge, max + log1p(exp(min − max)) with merge(−inf, −inf) = NaN (flash-attention
  /// #978, flashinfer #4051); only the fault injector unguarded_empty_merge sets it. Additive field.
  bool unguarded = false;
};

/// TE flash_attn_fwd_out_correction(_init): dst[dst_rows] (= | +=) src · exp(src_lse − lse[dst_rows]),
/// broadcast over width. A row whose src_lse is −inf contributes 0.
struct OutCorrectionOp {
  BufferId dst = -1;      ///< output [b, rows, h, dv]
  BufferId src = -1;      ///< one step's output, rows [0, dst_rows.count)
  BufferId src_lse = -1;  ///< that step's lse
  BufferId lse = -1;      ///< final merged lse of the whole local sequence
  RowRange dst_rows;
  bool accumulate = false;  ///< false: init (copy); true: add
};

/// dst[dst_rows] (= | +=) src[src_rows]; the dQ/dKV copy/add rules of docs/algorithm.md §5.3.
struct CopyOp {
  BufferId dst = -1;
  BufferId src = -1;
  RowRange dst_rows;
  RowRange src_rows;
  bool accumulate = false;
};

/// A dense GEMM of the layer model (QKV / output projection, MLP, logits): C[m, n] = A[m, k] · B[k, n], once per
/// op (batch and tokens folded into m). Timing only: executors that compute numerics reject it (the oracle
/// checks attention). Op::flops = 2·m·n·k; Op::bytes = (m·k + k·n + m·n)·element size (compulsory HBM traffic).
struct GemmOp {
  int64_t m = 0, n = 0, k = 0;
  bool fp8 = false;  ///< runs at the GPU's FP8 peak (Transformer Engine FP8 linear layers)
  /// An FP8 GEMM that promotes its partial sums to FP32 on the CUDA cores (cuBLASLt without
  /// CUBLASLT_MATMUL_DESC_FAST_ACCUM): Transformer Engine's dgrad and wgrad GEMMs (pytorch/module/base.py
  /// _2X_ACC_DGRAD = _2X_ACC_WGRAD = True; the fprop GEMM, _2X_ACC_FPROP = False, accumulates fast). Timed at
  /// gemm_efficiency_fp8 / fp8_split_accumulator_slowdown (sim/cost_model.hpp gemm_ps). Ignored without fp8.
  bool split_accumulator = false;
};

/// A memory-bound kernel of the layer model (norm, rotary embedding, activation, residual add, loss, optimizer):
/// its time is the launch overhead plus Op::bytes (read + written) at HBM bandwidth. Timing only.
struct ElementwiseOp {
  int64_t elements = 0;  ///< elements of the main output (informational)
};

using OpPayload = std::variant<AllocOp, FreeOp, AllToAllOp, SendRecvOp, AttnFwdBlockOp, AttnBwdBlockOp, LseMergeOp,
                               OutCorrectionOp, CopyOp, AllGatherOp, ReduceScatterOp, GemmOp, ElementwiseOp>;

/// Op kinds, in OpPayload alternative order.
enum class OpKind {
  alloc, free, all_to_all, send_recv, attn_fwd_block, attn_bwd_block, lse_merge, out_correction, copy,
  all_gather, reduce_scatter, gemm, elementwise
};
static_assert(std::variant_size_v<OpPayload> == static_cast<size_t>(OpKind::elementwise) + 1,
              "OpKind lists the OpPayload alternatives in order");
/// True for the ops that communicate (all_to_all, send_recv, all_gather, reduce_scatter).
bool is_communication(OpKind k);
std::string to_string(OpKind k);

/// One op of a rank's program.
struct Op {
  OpPayload payload;
  Phase phase = Phase::forward;
  Stream stream = Stream::compute;
  /// Ring step i this op belongs to, −1 outside the ring (32 bits beside the two one-byte fields: an Op is 160
  /// bytes; a ring has far fewer than 2^31 steps).
  int32_t ring_step = -1;
  /// Ops of the same rank that must finish first, besides stream order; with stream order the only ordering
  /// within a rank (the ordering contract above).
  IndexList deps;
  Label label;                ///< short human text, e.g. "fwd step 1 upper"
  double flops = 0;           ///< floating-point operations (attention blocks; see schedule_builder.hpp)
  /// Bytes the op moves: send_recv = bytes sent; all_to_all = the member's whole input buffer ((A−1)/A of it
  /// leaves the rank); copy / lse_merge / out_correction = bytes read + written; attention blocks = the
  /// buffers they read and write (an upper bound on HBM traffic); alloc / free = 0.
  int64_t bytes = 0;

  [[nodiscard]] OpKind kind() const { return static_cast<OpKind>(payload.index()); }
};

/// Binds a rank's buffer to rows/heads of a global tensor: buffer row r holds global token tokens[r] and
/// buffer head hh holds global head head_begin + hh.
struct IoBinding {
  std::string tensor;           ///< "q", "k", "v", "dout" (inputs) or "out", "softmax_lse", "dq", "dk", "dv"
  BufferId buffer = -1;
  /// Global sequence positions, one per buffer row; empty in a layer schedule (ScheduleKind::layer, timing only:
  /// no executor reads them).
  std::vector<int64_t> tokens;
  int64_t head_begin = 0;
};

/// The program of one rank: a CP rank of an attention schedule, a (tp_rank, cp_rank) pair of a layer schedule.
struct RankProgram {
  /// Index of this program in Schedule::ranks, the id that message peers (SendRecvOp::send_peer / recv_peer) and
  /// collective groups name. Equals cp_rank in an attention schedule; cp_rank·tp_size + tp_rank in a layer
  /// schedule (step/layer_builder.hpp layer_rank). Additive field (check_invariants checks it).
  int64_t rank = 0;
  int64_t cp_rank = 0;  ///< CP rank in [0, A·P)
  int64_t tp_rank = 0;  ///< TP rank in [0, Schedule::tp_size); 0 in an attention schedule. Additive field.
  std::vector<BufferDecl> buffers;
  std::vector<Op> ops;
  std::vector<IoBinding> inputs;   ///< filled before the first op; live from the start
  std::vector<IoBinding> outputs;  ///< read after the last op

  /// Buffer id by name; HCPSIM_ASSERT if missing.
  [[nodiscard]] BufferId buffer(const std::string& name) const;

  /// Appends an op built from its fields (what every builder does for each op) and returns its index in `ops`.
  OpIndex append(OpPayload payload, Phase phase, Stream stream, IndexList deps, Label label,
                 int64_t ring_step = -1, double flops = 0, int64_t bytes = 0);
};

/// Why the numeric executors (the CPU oracle, the GPU backend) cannot run a schedule: `problem` empty when they
/// can, else the problem and its fix (a layer schedule holds timing-only GEMM and elementwise ops).
struct RunBlocker {
  std::string problem;
  std::string fix;
  [[nodiscard]] bool blocked() const { return !problem.empty(); }
  /// "problem; fix: fix" (empty when not blocked).
  [[nodiscard]] std::string text() const { return blocked() ? problem + "; fix: " + fix : ""; }
};
/// What both numeric executors refuse; their cpu_can_run (oracles/cpu_executor.hpp) and gpu::gpu_can_run
/// (gpu/execution_plan.hpp) build on it and are checked once at entry instead of rejecting ops one by one.
struct Schedule;
RunBlocker numeric_run_blocker(const Schedule& schedule);

/// Attention problem one schedule solves (per TP rank: head counts are already divided by TP).
struct AttentionShape {
  int64_t batch = 1;          ///< b
  int64_t seq_length = 0;     ///< S (global)
  int64_t heads_q = 0;        ///< H per TP rank
  int64_t heads_kv = 0;       ///< Hkv per TP rank
  int64_t head_dim_qk = 0;    ///< dk
  int64_t head_dim_v = 0;     ///< dv
  bool causal = true;
  double softmax_scale = 0;   ///< default dk^-0.5 (TE CP.py L1427-1428)
  Dtype dtype = Dtype::bf16;  ///< element type of activations and messages
  /// qkv_format thd: the packed sequences of the micro-batch (seq_length = packing.total_padded(), batch 1);
  /// empty = bshd/sbhd. Additive field.
  PackedSequences packing;
};

/// What a schedule is for. attention: one CP attention layer (schedule_builder.hpp), which every executor runs
/// (the oracle and the GPU backend numerically, the simulator in time); layer: a whole transformer layer with the
/// timing-only GemmOp / ElementwiseOp around the attention (step/layer_builder.hpp), which only the simulator runs.
enum class ScheduleKind { attention = 0, layer = 1 };
/// "attention" | "layer".
std::string to_string(ScheduleKind k);

/// A whole layer's schedule (forward then backward) for all CP ranks.
struct Schedule {
  /// attention or layer; check_invariants rejects GemmOp / ElementwiseOp in an attention schedule, so a numeric
  /// executor can decide from the kind alone whether it can run a schedule (cpu_can_run, gpu::gpu_can_run). Additive
  /// field.
  ScheduleKind kind = ScheduleKind::attention;
  CpCommType cp_comm_type = CpCommType::a2a_p2p;
  int64_t a2a_size = 1;  ///< A
  int64_t p2p_size = 1;  ///< P
  /// TP ranks per CP rank: 1 for an attention schedule; TP for a layer schedule (layer_builder.hpp), whose
  /// ranks are (tp_rank, cp_rank) pairs. Additive field.
  int64_t tp_size = 1;
  AttentionShape shape;
  std::vector<RankProgram> ranks;  ///< indexed by flat CP rank (layer schedules: layer_rank(tp_rank, cp_rank))
  /// Numerics of the dQ/dKV accumulation (CopyOp with accumulate, ReduceScatterOp sums): false (default) keeps
  /// the accumulators in fp32, as the oracle checks by default; true rounds every accumulation to shape.dtype,
  /// TE's F16-path behaviour (docs/algorithm.md §5.3; set by the fault injector bf16_accumulation).
  /// Timing consumers ignore it. Additive field.
  bool grad_accumulation_in_dtype = false;

  /// Checks structural invariants and aborts (HCPSIM_ASSERT) on the first violation: timing-only ops (GemmOp,
  /// ElementwiseOp) only in a layer schedule, buffer ids in range,
  /// all_to_all and send_recv on Stream::comm and compute ops never on it,
  /// row ranges inside buffers, deps point backwards, every send has one matching recv of equal size,
  /// every all-to-all is issued by all group members with equal tags, alloc/free balanced and used only
  /// while live, inputs/outputs bound to buffers of the right shape (with one token per buffer row in an attention
  /// schedule, none in a layer schedule). Buffer hazards (the ordering contract) are
  /// checked by check_hazards (schedule_hazards.hpp), which assumes these invariants.
  /// @param threads  rank programs checked at once (core/parallel_for.hpp); the messages and collectives are
  ///   matched across ranks afterwards, in rank order. On one thread the first violation in rank and op order is
  ///   reported; on several, a violation in one rank's program is reported by whichever thread reaches one first.
  void check_invariants(int threads = 1) const;

  /// Sum of `flops` over all ranks and ops of `phase`.
  [[nodiscard]] double total_flops(Phase phase) const;
};

}  // namespace hcpsim
