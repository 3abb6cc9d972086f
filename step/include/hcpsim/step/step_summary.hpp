#pragma once
/// The JSON summary of `simulate --summary`: the attention layer's summary (sim/trace_writer.hpp) with the
/// training step and the calibration that produced it.

#include <string>

#include "hcpsim/sim/simulator.hpp"
#include "hcpsim/step/training_step.hpp"

namespace hcpsim::sim {

/// summary_json(result) plus "calibration" (GpuSpec::calibration, when non-empty) and, when `step` is given, a
/// "step" object with every StepResult field: times in ps (step_time_ps, pipeline_ps, dp_*_ps, …),
/// model_tflops_per_gpu (TFLOP/s, megatron_causal convention; model_flops_convention names it),
/// model_tflops_per_gpu_full_attention, mfu, tokens_per_s and memory_per_gpu_*_bytes (total, by category,
/// capacity, headroom) and fits.
std::string summary_json(const SimResult& result, const StepResult* step, const std::string& calibration);

/// The JSON of a per-layer cp_comm_type mix's step (compose_mixed_step): "layer_mix" (e.g. "12 a2a+p2p + 4 p2p"),
/// "calibration" when non-empty, and "step" with summary_json's step keys less cp_comm_type, a2a_size and p2p_size.
std::string mixed_step_summary_json(const StepResult& step, const std::string& calibration);

/// Writes summary_json(result, step, calibration) to `path` (temporary file, then rename).
/// @throws InputError (located at `path`) if the file cannot be written.
void write_summary_json(const std::string& path, const SimResult& result, const StepResult* step,
                        const std::string& calibration);

}  // namespace hcpsim::sim
