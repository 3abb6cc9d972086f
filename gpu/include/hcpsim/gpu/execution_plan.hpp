#pragma once
/// Host-side planning of a Schedule's execution on GPUs: the order in which the host enqueues ops, the
/// cross-stream waits that carry the schedule's deps (and its buffer order) between streams, the grouping of communication ops into
/// batches whose members all take part at once (NCCL group semantics), and the data movement of every
/// communication op as strided copy segments. Everything here is plain C++ (no CUDA): the device executor
/// (device_executor.hpp) walks the plan with CUDA streams, events and kernels; `execute_plan_on_host` walks the
/// same plan on the CPU with the same kernel arithmetic (block_math.hpp), so the whole executor logic is tested
/// without a GPU.
///
/// Device storage convention: every buffer is float [b, rows, heads, width] (block_math.hpp), so the segments'
/// element offsets and strides count floats.

#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/core/lowering.hpp"
#include "hcpsim/core/schedule.hpp"
#include "hcpsim/gpu/block_math.hpp"

namespace hcpsim::gpu {

// OpRef, CopySegment and the lowering of every communication op and CopyOp to segments are core's
// (hcpsim/core/lowering.hpp); the enqueue order and the rendezvous batches come from core's ProgramWalker
// (hcpsim/core/program_walker.hpp), which the CPU oracle walks too.

/// One member of a communication batch: the op, and the segments that write into this member's buffers, in the
/// order they must be applied (reduce-scatter: member order, the first assigning, the rest accumulating).
struct CommItem {
  OpRef op;
  std::vector<CopySegment> incoming;  ///< dst_rank == op.rank for every segment
  std::vector<int64_t> sources;       ///< ranks (≠ op.rank) whose buffers `incoming` reads, ascending
  std::vector<int64_t> readers;       ///< ranks (≠ op.rank) whose incoming segments read this member, ascending
};

/// One host enqueue step: a single non-communication op, or a batch of communication ops that are issued
/// together (every send with its receive, every collective with all its members).
struct PlanStep {
  bool is_batch = false;
  OpRef op;                     ///< !is_batch: the op
  std::vector<CommItem> items;  ///< is_batch: members in rank order
};

/// Buffer reads and writes of one op, by buffer id: op_buffer_accesses (schedule_hazards.hpp) without row
/// ranges, an access that writes under `writes`, the others under `reads` (alloc and free count as writes;
/// collectives read their input and write their output on this rank; send_recv reads `send` and writes `recv`).
struct BufferUses {
  std::vector<BufferId> reads;
  std::vector<BufferId> writes;
};

/// The uses of `op`. @throws InputError (key "schedule") for GemmOp / ElementwiseOp: the GPU backend executes
/// attention schedules, the layer model is timing only.
BufferUses op_buffer_uses(const Op& op);

/// Everything the device executor needs besides the schedule.
struct ExecutionPlan {
  std::vector<PlanStep> steps;  ///< host enqueue order
  /// waits[rank][op]: ops of the same rank on *other* streams whose completion this op must wait for (at most one
  /// per stream, the latest): explicit Op::deps, and every read-after-write, write-after-read and
  /// write-after-write on a buffer (by buffer id, alloc/free included) in program order. The ordering contract
  /// (schedule.hpp) already orders every such pair whose rows overlap, so a buffer wait either repeats what the
  /// deps imply or orders accesses to disjoint rows of one buffer; a pair the deps leave unordered is a schedule
  /// hazard and aborts build_execution_plan.
  std::vector<std::vector<std::vector<OpIndex>>> waits;
  int64_t batches = 0;            ///< communication batches
  int64_t segments = 0;           ///< copy segments over all batches
  int64_t moved_elements = 0;     ///< floats moved between different ranks' buffers by all segments
};

/// Builds the plan. Enqueue order and batches: core's ProgramWalker (program_walker.hpp: round-robin over ranks,
/// non-communication ops until a communication op, then the largest mutually matched set of waiting ops, under
/// rendezvous semantics, NCCL's grouped send/recv), the same walk the CPU oracle executes. Movement: each batch
/// member's incoming_segments (lowering.hpp): send_recv the concatenated send buffers onto the concatenated recv
/// buffers; all_to_all scatter_heads / gather_heads and all_gather half-chunks per chunk_order; reduce_scatter
/// member-order sums (the first assigns).
/// Calls Schedule::check_invariants first (and check_hazards in debug builds). Aborts (HCPSIM_ASSERT, naming both
/// ops and the buffer) when two ops of a rank on different streams conflict on a buffer without a chain of deps and
/// stream order between them (what check_hazards rejects): the plan does not repair a schedule.
/// @throws InputError (key "schedule") when the schedule holds layer-model ops, when a rendezvous cannot be formed
///   (a deadlock under rendezvous semantics: the message names every waiting rank and op), or when a message's size
///   differs from its receive buffers.
ExecutionPlan build_execution_plan(const Schedule& schedule);

/// Whether the GPU backend can run `schedule`, decided from the schedule alone before a plan is built: attention
/// schedules only (a layer schedule's GEMM and elementwise ops are timing only), and no packed sequences (THD:
/// the device kernels have no document mask; the CPU oracle runs them). build_execution_plan throws the
/// refusal as an InputError (key "schedule") with its fix.
RunBlocker gpu_can_run(const Schedule& schedule);

/// Device memory bound of one rank in the executor's float storage (bytes): the input buffers, then the peak of
/// live bytes walking the ops in program order (AllocOp adds elements·4, FreeOp subtracts). Ranks sharing a GPU
/// add up (an upper bound: their peaks need not coincide). Scratch of the backward kernels (nq·hq floats per block)
/// and message staging of the NCCL backend are not included.
int64_t planned_peak_bytes(const RankProgram& program);

/// A TensorRef of buffer `id` of `program` at address `data`.
inline TensorRef tensor_ref(const RankProgram& program, BufferId id, float* data) {
  const BufferDecl& d = program.buffers[static_cast<size_t>(id)];
  return TensorRef{data, d.rows, d.heads, d.width};
}

/// The fields forward and backward block arguments share: q, k, v, lse, batch, row ranges, mask, scale, format.
template <typename Args, typename BlockOp, typename PtrOf>
void fill_block_args(Args& a, const RankProgram& prog, const BlockOp& p, PtrOf& ptr_of, float scale,
                     Dtype format) {
  a.q = tensor_ref(prog, p.q, ptr_of(p.q));
  a.k = tensor_ref(prog, p.k, ptr_of(p.k));
  a.v = tensor_ref(prog, p.v, ptr_of(p.v));
  a.lse = tensor_ref(prog, p.lse, ptr_of(p.lse));
  a.batch = prog.buffers[static_cast<size_t>(p.q)].batch;
  a.q_row0 = p.q_rows.begin;
  a.nq = p.q_rows.count;
  a.kv_row0 = p.kv_rows.begin;
  a.nk = p.kv_rows.count;
  a.mask = p.mask;
  a.scale = scale;
  a.format = format;
}

/// Kernel arguments of a forward block op; `ptr_of(BufferId) -> float*` resolves buffer addresses (host or device).
template <typename PtrOf>
AttnFwdArgs make_fwd_args(const RankProgram& prog, const AttnFwdBlockOp& p, PtrOf&& ptr_of, float scale,
                          Dtype format) {
  AttnFwdArgs a;
  fill_block_args(a, prog, p, ptr_of, scale, format);
  a.out = tensor_ref(prog, p.out, ptr_of(p.out));
  return a;
}

/// Kernel arguments of a backward block op (delta left null: the caller provides scratch [batch, nq, hq]).
template <typename PtrOf>
AttnBwdArgs make_bwd_args(const RankProgram& prog, const AttnBwdBlockOp& p, PtrOf&& ptr_of, float scale,
                          Dtype format) {
  AttnBwdArgs a;
  fill_block_args(a, prog, p, ptr_of, scale, format);
  a.out = tensor_ref(prog, p.out, ptr_of(p.out));
  a.dout = tensor_ref(prog, p.dout, ptr_of(p.dout));
  a.dq = tensor_ref(prog, p.dq, ptr_of(p.dq));
  a.dk = tensor_ref(prog, p.dk, ptr_of(p.dk));
  a.dv = tensor_ref(prog, p.dv, ptr_of(p.dv));
  return a;
}

}  // namespace hcpsim::gpu
