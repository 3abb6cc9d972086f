#pragma once
/// Input loading, output gathering and a host replay of an ExecutionPlan, shared by the device executor and the
/// CPU tests. The replay runs the plan's steps in order on host float buffers with the kernels' own arithmetic
/// (block_math.hpp), so it computes what the GPU computes (up to the device's exp/log rounding) and lets the
/// executor's planning be tested against the float64 reference without a GPU.

#include <cstdint>
#include <vector>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/gpu/execution_plan.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim::gpu {

/// The float contents of a rank's input buffer bound by `bind` (buffer row r = global token tokens[r], buffer
/// head hh = global head head_begin + hh), rounded to `dtype` (inputs are normally rounded already).
/// @param global  q, k, v or dout of `inputs`, chosen by bind.tensor; HCPSIM_ASSERT on an unknown name or a
///   binding outside the global tensor.
std::vector<float> gather_input(const RankProgram& program, const IoBinding& bind, const AttentionInputs& inputs,
                                Dtype dtype);

/// Collects the ranks' output buffers into the global tensors out [B, S, H, dv], softmax_lse [B, S, H, 1],
/// dq [B, S, H, dk], dk [B, S, Hkv, dk], dv [B, S, Hkv, dv] of `shape` (as the CPU executor does).
class OutputGatherer {
 public:
  explicit OutputGatherer(const AttentionShape& shape);
  /// Copies the float contents `data` of the buffer bound by `bind` of `program` into its global tensor.
  /// HCPSIM_ASSERT when a global element is written twice or the binding does not fit.
  void add(const RankProgram& program, const IoBinding& bind, const float* data);
  /// The gathered tensors, out/dq/dk/dv rounded to `dtype` and softmax_lse to fp32. HCPSIM_ASSERT when an
  /// element was written by no rank.
  AttentionOutputs finish(Dtype dtype);

 private:
  AttentionOutputs outputs_;
  std::vector<std::vector<uint8_t>> written_;
};

/// Runs `plan` of `schedule` on the host in float storage at `dtype` (fp32, bf16 or fp16): the steps in plan
/// order, compute ops with block_math.hpp's row functions, batches by applying their segments. Accumulating
/// copies round to fp32, or to dtype when schedule.grad_accumulation_in_dtype.
/// @throws InputError (key "--dtype") for fp64: the GPU backend computes in fp32 at most.
AttentionOutputs execute_plan_on_host(const Schedule& schedule, const ExecutionPlan& plan,
                                      const AttentionInputs& inputs, Dtype dtype);

/// The accumulator format of a run: fp32, or dtype when grad_accumulation_in_dtype (TE's F16 path, §5.3).
Dtype accumulator_dtype(const Schedule& schedule, Dtype dtype);

/// Throws InputError (key "--dtype", fix: use fp32, bf16 or fp16, or --backend cpu for fp64) unless dtype is one
/// the GPU backend runs.
void check_gpu_dtype(Dtype dtype);

}  // namespace hcpsim::gpu
