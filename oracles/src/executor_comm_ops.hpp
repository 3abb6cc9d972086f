#pragma once
// Private to oracles/: the CPU executor's communication ops — the data each one moves once its rendezvous
// (executor_rendezvous.hpp) has met, as the docstrings in hcpsim/core/schedule.hpp define it. Each returns false
// while the op blocks; `touched` is set when the call changed state although the op still blocks; a collective
// that completes also completes on the other members of its group. `where` names the op (op_text).

#include <string>

#include "executor_state.hpp"

namespace hcpsim::cpu_exec {

/// SendRecvOp: posts the send (a snapshot of the concatenated send buffers) once, then waits for the message of
/// its recv side and unpacks it into the recv buffers. HCPSIM_ASSERT on peers out of range, a send without
/// buffers, recv buffers without a peer, or a message whose size differs from the recv buffers.
bool run_send_recv(ExecutorState& state, RankState& st, const SendRecvOp& op, const std::string& where,
                   bool& touched);

/// AllToAllOp: scatter_heads or gather_heads over the whole group at once (members must agree on the direction).
bool run_all_to_all(ExecutorState& state, RankState& st, const AllToAllOp& op, const std::string& where,
                    bool& touched);

/// AllGatherOp: every member's output = the members' input half-chunks in chunk_order.
bool run_all_gather(ExecutorState& state, RankState& st, const AllGatherOp& op, const std::string& where,
                    bool& touched);

/// ReduceScatterOp: member j's output halves = the sums over members (in member order 0, 1, …, each add rounded
/// to the accumulator format) of input chunks chunk_order[2j], chunk_order[2j + 1].
bool run_reduce_scatter(ExecutorState& state, RankState& st, const ReduceScatterOp& op, const std::string& where,
                        bool& touched);

}  // namespace hcpsim::cpu_exec
