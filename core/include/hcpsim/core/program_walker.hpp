#pragma once
/// The one program walker of the numeric executors: the order in which the GPU plan (build_execution_plan)
/// enqueues a schedule's ops and the CPU oracle (execute_schedule) executes them, with the rendezvous matching of
/// the ordering contract (schedule.hpp): a send/recv message moves while both of its ops run, a collective while
/// all of its members' ops run. Each step is one non-communication op, or a batch of communication ops that meet
/// (NCCL group semantics: every send with its receive, every collective with all its members), whose data
/// movement is the lowering of lowering.hpp.

#include <cstdint>
#include <vector>

#include "hcpsim/core/lowering.hpp"
#include "hcpsim/core/schedule.hpp"

namespace hcpsim {

/// One step of the walk.
struct WalkStep {
  bool is_batch = false;
  OpRef op;                    ///< !is_batch: the op
  std::vector<OpRef> members;  ///< is_batch: the ops of the batch, in rank order (one per rank)
};

/// Walks a schedule: round-robin over ranks in rank order, each rank stepping through its non-communication ops
/// (in RankProgram::ops order) until it reaches a communication op or its end; when every unfinished rank waits at
/// a communication op, the largest set of waiting ops that are mutually matched forms the next batch (a send_recv
/// matches when its send peer waits at a send_recv receiving from it with the same tag, and its recv peer waits at
/// one sending to it with the same tag; a collective when every group member waits at an op of the same kind with
/// the same group, chunk_order and tag); the batch's ranks move past their op, and the round-robin starts again.
/// List order within a rank is one execution the ordering contract allows; on a hazard-free schedule
/// (check_hazards) it computes what every allowed execution computes.
/// The schedule must outlive the walker; it should satisfy Schedule::check_invariants (the walker reads ops and
/// peers as they are).
class ProgramWalker {
 public:
  explicit ProgramWalker(const Schedule& schedule);

  /// Fills `step` with the next step and returns true, or returns false once every rank has finished.
  /// @throws InputError (key "schedule") when every unfinished rank waits at a communication op and none of them
  ///   can be matched (a deadlock under rendezvous semantics): the message names every waiting rank and op
  ///   (op_ref_text) and what it waits for.
  bool next(WalkStep& step);

  /// Communication batches returned so far.
  [[nodiscard]] int64_t batches() const { return batches_; }

 private:
  [[nodiscard]] bool finished(int64_t rank) const;
  [[nodiscard]] const Op& current(int64_t rank) const;
  [[nodiscard]] bool matched(const std::vector<bool>& waiting, int64_t rank) const;
  [[nodiscard]] std::vector<int64_t> next_rendezvous() const;
  [[nodiscard]] std::string deadlock_text() const;

  const Schedule& schedule_;
  std::vector<OpIndex> pc_;  ///< per rank: the next op not yet stepped past
  int64_t scan_ = 0;         ///< the rank the round-robin pass is at
  int64_t batches_ = 0;
};

/// All steps of the walk of `schedule` (ProgramWalker::next until false); errors as there.
std::vector<WalkStep> walk_program(const Schedule& schedule);

}  // namespace hcpsim
