#pragma once
/// Lowering of the data movement of a Schedule to strided copy segments, done once here for every executor: the
/// CPU oracle applies the segments to its float64 tensors, the GPU plan hands them to its device and host replay
/// copies, and the simulator sizes its messages with the byte counts below (equal to the segments' sums, without
/// materialising them). Every communication op (send/recv, all-to-all with its chunk reorders, all-gather,
/// reduce-scatter) and CopyOp lowers to segments with exactly the semantics of its docstring in schedule.hpp.
///
/// Units: offsets, strides and counts are in elements of the buffers' [b, rows, heads, width] storage (bshd,
/// row-major: element (b, r, h, w) at ((b·rows + r)·heads + h)·width + w), whatever the executor's element type.
/// Sources: TE context_parallel.py flash_attn_p2p_communicate (send/recv), flash_attn_a2a_communicate (all-to-all
/// with get_seq_chunk_ids_for_reordering_before/after_attn, docs/algorithm.md §3.1–§3.3),
/// AttnFuncWithCPAndKVAllGather (all-gather / reduce-scatter, §9.5), the dQ/dKV copy/add rules (§5.3).

#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/core/semantics.hpp"

namespace hcpsim {

/// (rank, op) of a schedule: RankProgram::rank, its index in Schedule::ranks (= cp_rank in an attention
/// schedule), and the index into its ops.
struct OpRef {
  int64_t rank = 0;
  OpIndex op = 0;
  friend bool operator==(const OpRef& a, const OpRef& b) { return a.rank == b.rank && a.op == b.op; }
  friend bool operator<(const OpRef& a, const OpRef& b) { return a.rank != b.rank ? a.rank < b.rank : a.op < b.op; }
};

/// "cp_rank 3 op #12 send_recv 'fwd step 1 kv'": how the walker, the GPU plan and the CPU oracle name an op.
std::string op_ref_text(const Schedule& schedule, const OpRef& ref);

/// One strided copy of `batch × rows` runs of `run_elements` contiguous elements, from a buffer of src_rank into a
/// buffer of dst_rank: element (b, r, e) goes from src_offset + b·src_batch_stride + r·src_row_stride + e to
/// dst_offset + b·dst_batch_stride + r·dst_row_stride + e (all in elements). accumulate = true: dst = round(dst +
/// src) to the accumulator format (copy/add rules, reduce-scatter sums, docs/algorithm.md §5.3); false: dst = src.
struct CopySegment {
  int64_t src_rank = 0;
  BufferId src = -1;
  int64_t dst_rank = 0;
  BufferId dst = -1;
  int64_t src_offset = 0, src_batch_stride = 0, src_row_stride = 0;
  int64_t dst_offset = 0, dst_batch_stride = 0, dst_row_stride = 0;
  int64_t batch = 0, rows = 0, run_elements = 0;
  bool accumulate = false;

  /// batch·rows·run_elements.
  [[nodiscard]] int64_t elements() const { return batch * rows * run_elements; }
};

/// send_recv: the sender's concatenated send buffers onto the receiver's concatenated recv buffers (TE
/// flash_attn_p2p_communicate), cut at every boundary of either side (usually one segment per buffer: [k, v] →
/// [k, v]); each segment is one run (batch = rows = 1) at element offsets into the whole buffers.
/// `sender` and `receiver` must be SendRecvOps, the sender's send_peer the receiver and vice versa.
/// @throws InputError (key "schedule") when the message carries a different number of elements than the receive
///   buffers hold. HCPSIM_ASSERT when the receiving op also sends one of its recv buffers (under rendezvous
///   semantics it would read what it overwrites).
std::vector<CopySegment> message_segments(const Schedule& schedule, const OpRef& sender, const OpRef& receiver);

/// Incoming segments of collective member `me` (AllToAllOp, AllGatherOp, ReduceScatterOp), in the order they must
/// be applied; `batch` holds the ops of the members (any order, other ranks' ops allowed). Semantics (schedule.hpp):
///   all_to_all scatter_heads: input [b, s, h, w] → output [b, A·s, h/A, w]: output half-chunk k (c = s/2 rows) =
///     member chunk_order[k]/2's input rows [(chunk_order[k] % 2)·c, +c) at heads [a·h/A, +h/A), a = my index;
///   all_to_all gather_heads: input [b, A·s, h/A, w] → output [b, s, h, w]: from every member a, its input
///     half-chunks chunk_order[2j], chunk_order[2j+1] (c = A·s / 2A rows, j = my index) go to my rows [0, c) and
///     [c, 2c) at heads [a·h/A, +h/A);
///   all_gather: output half-chunk k (c = s/2 rows) = member chunk_order[k]/2's half chunk_order[k] % 2;
///   reduce_scatter: my output half `half` = Σ over members a (in member order, the first assigning, the others
///     accumulating) of their input chunk chunk_order[2j + half] (c = rows/(2n)).
/// HCPSIM_ASSERT on a member missing from `batch`, members disagreeing on kind, group, chunk_order or direction,
/// chunk_order entries out of range, member inputs of different shapes, or rows / heads that do not split.
std::vector<CopySegment> collective_segments(const Schedule& schedule, const std::vector<OpRef>& batch,
                                             const OpRef& me);

/// The segments that write into the buffers of `me`, a member of a communication batch `batch` (the ops of one
/// rendezvous, program_walker.hpp): message_segments from its recv peer (none for a send-only op), or
/// collective_segments. Errors as there.
std::vector<CopySegment> incoming_segments(const Schedule& schedule, const std::vector<OpRef>& batch, const OpRef& me);

/// The CopyOp of `program` (rank `rank`) as one segment within the rank: dst_rows.count rows of whole
/// [heads, width] runs in every batch, accumulating when op.accumulate (docs/algorithm.md §5.3).
CopySegment copy_op_segment(const RankProgram& program, int64_t rank, const CopyOp& op);

/// Bytes of the segments' source elements: elements() · dtype size of the source buffer.
int64_t segment_bytes(const Schedule& schedule, const CopySegment& segment);

/// Bytes a SendRecvOp of `program` sends: Σ size_bytes of its send buffers (0 when send_peer is −1), which equals
/// Σ segment_bytes over its message_segments. HCPSIM_ASSERT on a buffer id out of range.
int64_t message_send_bytes(const RankProgram& program, const SendRecvOp& op);
/// Bytes a SendRecvOp of `program` receives: Σ size_bytes of its recv buffers (0 when recv_peer is −1).
int64_t message_recv_bytes(const RankProgram& program, const SendRecvOp& op);

/// Bytes collective `op` of `program` sends to each other member (Σ segment_bytes of its segments into one
/// member): all_gather the whole input, all_to_all and reduce_scatter input / group size. HCPSIM_ASSERT when `op`
/// is no collective, its input is out of range or does not split into group-size equal parts.
int64_t collective_peer_bytes(const RankProgram& program, const Op& op);

/// Applies `seg` to element storage of type T (the CPU oracle's double, the GPU replay's float): `src` and `dst`
/// are the whole source and destination buffers; accumulation rounds dst + src to `acc_format`
/// (semantics::round_to_dtype), a plain copy moves values unchanged. Unchecked (the lowering sized the segment).
template <typename T>
void apply_copy_segment(const CopySegment& seg, const T* src, T* dst, Dtype acc_format) {
  for (int64_t b = 0; b < seg.batch; ++b) {
    for (int64_t r = 0; r < seg.rows; ++r) {
      const T* s = src + seg.src_offset + b * seg.src_batch_stride + r * seg.src_row_stride;
      T* d = dst + seg.dst_offset + b * seg.dst_batch_stride + r * seg.dst_row_stride;
      if (seg.accumulate) {
        for (int64_t e = 0; e < seg.run_elements; ++e) d[e] = semantics::round_to_dtype(d[e] + s[e], acc_format);
      } else {
        for (int64_t e = 0; e < seg.run_elements; ++e) d[e] = s[e];
      }
    }
  }
}

}  // namespace hcpsim
