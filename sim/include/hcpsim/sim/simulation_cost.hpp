#pragma once
/// Closed-form cost of simulating one attention layer, computed from the scenario's shape before any schedule is
/// built (admission control, docs/robustness.md "Admission control"). Every quantity is a double so that an absurd
/// scenario (context_parallel_size 2^40) estimates without overflow.

#include <cstdint>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/core/types.hpp"

namespace hcpsim::sim {

/// Estimated cost of one `simulate` of one comm type (all of it an upper-bound style estimate, see the formulas).
struct SimulationCost {
  double ops = 0;      ///< schedule ops of all CP ranks, forward and backward
  double events = 0;   ///< discrete events of the full (unreduced) simulation
  double bytes = 0;    ///< peak resident bytes: the schedule, the simulator's per-op state and the token lists
  double seconds = 0;  ///< wall time of the full simulation on one core, order of magnitude
};

/// Ops of one CP rank's attention schedule (forward and backward) for a2a size `a2a` and ring size `p2p`, counted
/// from the builders' structure: each ring step adds a fixed set of ops (send/recv, the block kernel, LSE merge,
/// output correction, dKV accumulation and their allocs and frees), each a2a adds its collectives and copies:
///   p2p (P ≥ 2): 23·P + 23;   a2a+p2p: 23·P + 47;   a2a (A ≥ 2): 52;   all_gather: 57;   A = P = 1: 28.
/// The busiest rank of a causal schedule has exactly this many (tests/sim/simulation_cost_test.cpp); A·P times it
/// bounds the whole schedule from above, within 5% (P = 2 unmasked: 138 vs 132).
double schedule_ops_per_rank(CpCommType cp_comm_type, int64_t a2a, int64_t p2p);

/// The cost of simulating `cp_comm_type` on an [a2a, p2p] layout of a `seq_length` sequence, `timeline` when every
/// op's timeline entry is kept (--trace):
///   ops = A·P·schedule_ops_per_rank, events = 1.25·ops,
///   bytes = (320, timeline 4000)·ops + 96·seq_length + 16 MiB, seconds = (3e-6, timeline 3e-5)·ops
/// (measured constants rounded up, docs/robustness.md "Admission control": an upper bound within 1.4x of the
/// measured peak RSS on p2p rings of 16 to 256 ranks).
SimulationCost estimate_simulation_cost(CpCommType cp_comm_type, int64_t a2a, int64_t p2p, int64_t seq_length,
                                        bool timeline = false);


/// Ops one rank of the simulated transformer layer (step/layer_builder.hpp) adds to its attention schedule: the
/// GEMMs, norms, elementwise ops, TP collectives and their allocs and frees, forward and backward, and the
/// recomputed forward. Counted on the builder's output: 21 (TP 1) and 71 (TP 2, sequence parallel) without
/// recompute, up to 121 with full recompute; tests/step/step_trace_test.cpp checks the bound.
constexpr double kLayerOpsPerRank = 130;

/// The cost of the transformer layer simulated with its timeline kept (simulate --step-trace): ops =
/// TP·A·P·(f·schedule_ops_per_rank + kLayerOpsPerRank), f = 2 with full recompute (the attention's forward runs
/// again) and 1 otherwise, at the timeline constants of estimate_simulation_cost; the largest over the scenario's
/// comm types. It adds to the attention's cost: simulate holds both results while it writes the traces.
SimulationCost estimate_layer_timeline_cost(const Scenario& scenario);

/// What `hcpsim simulate` (and `diff`, per scenario) runs for `scenario`: the attention alone and, with
/// model.vocab_size, the whole-step layer, each on the P representatives when the symmetry reduction applies
/// (symmetry_reduction_blocker(); the attention without a timeline, the layer at TP = 1 without --step-trace) and
/// on every GPU otherwise:
///   attention ops = (P or A·P)·schedule_ops_per_rank,
///   layer ops     = (P or TP·A·P)·(f·schedule_ops_per_rank + kLayerOpsPerRank), f = 2 with full or selective
///                   recompute (the attention forward runs again), else 1,
///   bytes = max (sum when a timeline is kept) of the two at estimate_simulation_cost's per-op constants
///           + 96·seq_length + 16 MiB; seconds = the sum; the largest over the comm types.
/// An upper bound of the measured peak RSS: docs/robustness.md "Admission control" (1.35-2.4x on a2a+p2p
/// [8, 64..512] whole steps, loosest at small CP where the per-token term, counted for every rank, dominates).
/// @param data_parallel_size resolved DP (ValidationReport::data_parallel_size), for the CP ranks' placement.
SimulationCost estimate_simulate_cost(const Scenario& scenario, int64_t data_parallel_size, bool timeline,
                                      bool layer_timeline);

}  // namespace hcpsim::sim
