#pragma once
// Private to oracles/: the CPU executor's I/O bindings (cpu_executor.hpp "Buffers", "Outputs") — global inputs
// scattered into every rank's bound buffers before the first op, rank buffers gathered into the global outputs
// after the last.

#include "executor_state.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim::cpu_exec {

/// Allocates every input binding's buffer and fills it from `in` (buffer row r = global token tokens[r], buffer
/// head hh = global head head_begin + hh), rounded to the run's dtype. HCPSIM_ASSERT on an unknown tensor name or
/// a binding that does not fit the global tensor.
void load_inputs(ExecutorState& state, const AttentionInputs& in);

/// The global out, softmax_lse, dq, dk, dv from every rank's output bindings, rounded to the run's dtype
/// (softmax_lse to fp32). HCPSIM_ASSERT on an unknown tensor name, a misfitting binding, or a global row-vector
/// written twice or by no rank.
AttentionOutputs gather_outputs(ExecutorState& state);

}  // namespace hcpsim::cpu_exec
