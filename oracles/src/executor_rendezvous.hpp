#pragma once
// Private to oracles/: how the CPU executor's communication ops meet (cpu_executor.hpp "Scheduling") — a
// collective (all-to-all, all-gather, reduce-scatter) waits until every member of its group has reached it, then
// completes on all members at once; send/recv messages meet in the Mailbox (executor_state.hpp), implemented here
// too.

#include <string>
#include <vector>

#include "executor_state.hpp"

namespace hcpsim::cpu_exec {

/// Group rendezvous shared by all-to-all, all-gather and reduce-scatter, for the current op of `st`: marks this
/// rank as arrived and returns true with every member (in group order) once all of them wait at an op of the same
/// kind with this tag. HCPSIM_ASSERT when members disagree on the group or chunk_order, or the group is malformed.
/// `touched`: set when this call changed state (the rank's arrival) although the op still blocks.
bool wait_for_group(ExecutorState& state, RankState& st, const std::string& where, bool& touched,
                    std::vector<RankState*>& members);

/// Completes the current op of every member but `st` (the walker completes it on `st`): a collective finishes on
/// all members at once.
void complete_on_other_members(ExecutorState& state, const RankState& st, const std::vector<RankState*>& members);

}  // namespace hcpsim::cpu_exec
