#pragma once
/// `hcpsim simulate --kernels`: the compute ops of one CP rank's attention program with their shapes and their
/// stand-alone kernel times, so a reader can check where a CP variant's time goes inside a node.

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/schedule.hpp"

namespace hcpsim::app {

/// Prints, for rank `cp_rank` of `schedule`, one line per attention block, LSE merge, output correction and copy:
/// phase, ring step, label, q rows × kv rows and mask (attention blocks), bytes (memory-bound kernels), the
/// kernel's time with the GPU to itself (sim::compute_op_ps: no sharing with concurrent kernels, no slowdown by
/// communication) and, for attention blocks, TFLOP/s in hcpsim's FLOP count (exact visible pairs); then the sums
/// per phase. Communication ops are left out (their time depends on the network; see the simulate table).
/// @param cp_rank in [0, schedule.ranks.size()) (HCPSIM_ASSERT otherwise).
void print_kernel_table(const Schedule& schedule, int64_t cp_rank, const GpuSpec& gpu);

}  // namespace hcpsim::app
