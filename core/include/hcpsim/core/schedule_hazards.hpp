#pragma once
/// Buffer hazards of a Schedule under the IR's ordering contract (schedule.hpp, "Ordering contract"): what every
/// op reads and writes, the happens-before relation of one rank's ops, and `check_hazards`, which requires every
/// conflicting pair of ops on different streams to be ordered by deps and stream order.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "hcpsim/core/schedule.hpp"

namespace hcpsim {

/// Rows [0, ∞): an op that touches a buffer as a whole (alloc, free, collectives, messages, block outputs).
inline constexpr RowRange kAllRows{0, std::numeric_limits<int64_t>::max()};

/// One access of an op to one of its rank's buffers: the rows it touches (all batches, heads and widths of those
/// rows: heads are not tracked, which is conservative) and whether it reads and / or writes them.
struct BufferAccess {
  BufferId buffer = -1;
  RowRange rows = kAllRows;
  bool reads = false;
  bool writes = false;  ///< alloc and free write the whole buffer; `+=` destinations read and write
};

/// The buffer accesses of `op` on its own rank, derived from the payload as its docstring in schedule.hpp defines
/// it: reads first (in payload field order), then writes. Collectives and send_recv read their send / input
/// buffers and write their recv / output buffers as a whole (the remote side's accesses belong to the remote op,
/// by the rendezvous rule); attention blocks read their q/k/v (and out, dout, lse) row ranges and write their
/// outputs as a whole; lse_merge, out_correction and copy write dst_rows (and read them when they accumulate:
/// lse_merge always, the others with `accumulate`); gemm and elementwise access no buffer (timing only).
/// The one definition of read and write sets: check_hazards and the GPU execution plan both use it.
std::vector<BufferAccess> op_buffer_accesses(const Op& op);

/// True when `a` and `b` touch the same buffer at overlapping rows and at least one of them writes.
bool accesses_conflict(const BufferAccess& a, const BufferAccess& b);

/// The happens-before relation of one rank's ops under the ordering contract: `ordered(a, b)` is true when a
/// chain of Op::deps and same-stream predecessors leads from op a to op b (a finishes before b starts in every
/// execution). Built once in O(ops² / 64) words; the program must satisfy check_invariants' dependency rule
/// (deps point to earlier ops; HCPSIM_ASSERT otherwise).
class RankOrder {
 public:
  explicit RankOrder(const RankProgram& program);
  /// True when op `earlier` happens before op `later` (false for earlier ≥ later); indices HCPSIM_ASSERTed.
  [[nodiscard]] bool ordered(OpIndex earlier, OpIndex later) const;

 private:
  size_t ops_ = 0;
  size_t words_ = 0;
  std::vector<uint64_t> before_;  ///< row i (words_ words): bit j set ⇔ op j happens before op i
};

/// Two ops of one rank that conflict on a buffer (accesses_conflict), run on different streams, and are not
/// ordered (RankOrder): the executors may run them concurrently or in either order.
struct Hazard {
  OpIndex earlier = -1;  ///< the op first in RankProgram::ops order
  OpIndex later = -1;
  BufferAccess earlier_access, later_access;  ///< the conflicting accesses (same buffer)
};

/// The first hazard of `program` in program order of the later op (then of the earlier one), or nullopt.
/// A pair whose conflict is implied through an intermediate op that writes the whole buffer (alloc, free, a
/// collective's output) is checked as its two links, so the reported pair may be such a link.
std::optional<Hazard> find_hazard(const RankProgram& program);

/// "cp_rank 2: op #14 copy 'bwd dq step 1' (stream compute) writes rows [0, 8) of buffer 'dq.a2a' and op #17
/// all_to_all 'bwd a2a dq' (stream comm) reads all rows of it, but no chain of deps and stream order orders them".
std::string hazard_text(const RankProgram& program, const Hazard& hazard);

/// Aborts (HCPSIM_ASSERT, like Schedule::check_invariants) on the first hazard of any rank, naming both ops (rank,
/// index, kind, label, stream), the buffer and the access kinds. Assumes check_invariants holds. Every builder
/// (build_schedule, build_layer_schedule) and fault injector yields hazard-free schedules; tests and debug builds
/// run it wherever check_invariants runs.
void check_hazards(const RankProgram& program);
/// check_hazards of every rank.
void check_hazards(const Schedule& schedule);

}  // namespace hcpsim
