#pragma once
/// Capacity planning: every legal context-parallel option (cp_comm_type, hierarchical sizes [A, P], TP) of a
/// scenario simulated as a whole training step (step.hpp) and ranked, and the difference between two simulated
/// configurations (`hcpsim diff`).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/step/training_step.hpp"

namespace hcpsim::sim {

/// What `hcpsim plan` sweeps.
struct PlanRequest {
  std::optional<int64_t> cp;    ///< --cp N: context_parallel_size of every option (default: the scenario's)
  std::optional<int64_t> gpus;  ///< --gpus N: TP·CP·PP = N GPUs per model replica (CP = N/(TP·PP) per TP);
                                ///< the cluster grows to hold them if needed. Excludes `cp`.
  std::vector<int64_t> tp;      ///< --tp LIST (default: the scenario's TP)
  enum class Objective { time, memory };
  Objective objective = Objective::time;
  /// Simulations run on this many threads (0: one per hardware thread). Results do not depend on it.
  int threads = 0;
  /// Optional, for a progress display (results never depend on it): called once per finished simulation with
  /// (simulations finished, simulations of the sweep), one call at a time (an OpenMP critical section), from
  /// whichever thread finished it.
  std::function<void(size_t done, size_t total)> progress = nullptr;
};

/// One option of the sweep.
struct PlanOption {
  CpCommType cp_comm_type = CpCommType::p2p;
  int64_t a2a_size = 1, p2p_size = 1;
  int64_t tp = 1, cp = 1, data_parallel_size = 1;
  std::string label;            ///< e.g. "a2a+p2p [8,2] TP1"
  std::string dropped_reason;   ///< non-empty: validation (or the sweep) ruled it out; the rest is unset
  StepResult step;              ///< whole step (layer simulated)
  TimePs attention_forward_ps = 0;   ///< one attention layer alone (as `simulate` prints it)
  TimePs attention_backward_ps = 0;
  TimePs attention_exposed_comm_ps = 0;  ///< worst GPU, attention alone
  int64_t inter_node_bytes_per_layer = 0;  ///< bytes of the simulated layer's messages that cross nodes
  int64_t intra_node_bytes_per_layer = 0;
  bool has_a2a = false;         ///< the option runs an all-to-all (a2a, or a2a+p2p with A > 1)
  bool a2a_intra_node = false;  ///< every a2a group of the first CP group sits on one node
  int rank = 0;                 ///< 1-based place in the ranking; 0 when dropped
};

/// The sweep's answer.
struct PlanResult {
  PlanRequest::Objective objective = PlanRequest::Objective::time;
  std::vector<PlanOption> ranked;   ///< legal options, best first
  std::vector<PlanOption> dropped;  ///< ruled-out options with their reasons, in enumeration order
  std::string explanation;          ///< one sentence: why the winner wins, from the simulated numbers
  bool nothing_fits = false;        ///< no legal option fits in GPU memory
  /// Samples per iteration of every option: model.global_batch_size, or micro_batch_size × the least common
  /// multiple of the options' data-parallel sizes when unset (so step times of options with different DP compare
  /// the same work).
  int64_t global_batch_size = 1;
};

/// Enumerates, for each TP of the request (with PlanResult::global_batch_size fixed), p2p, a2a, all_gather and a2a+p2p with every [A, P] (A·P = CP,
/// 1 < A < CP), validates each as `validate` would (the scenario with those parallel sizes; DP fills the cluster
/// unless the scenario sets it), simulates the legal ones (simulate_step plus the attention layer alone) and
/// ranks them. Objective time: options that fit in memory by step time, then those that do not (so a
/// configuration that does not fit is never first unless nothing fits); memory: by memory per GPU. Ties: label.
/// [1, CP] and [CP, 1] are listed as dropped (TE runs them as p2p and a2a).
/// @throws InputError for a bad request (--cp and --gpus together, CP or TP < 1, --gpus not divisible by TP·PP for
/// any TP) or a scenario without model.vocab_size (needed for the whole step).
PlanResult plan(const Scenario& scenario, const PlanRequest& request);


/// One compared quantity of `hcpsim diff`.
struct DiffRow {
  std::string group;     ///< "time", "comm", "memory", "messages"
  std::string name;      ///< e.g. "step time", "memory: activations", "layer messages forward inter_node bytes"
  std::string unit;      ///< "s", "B" (message bytes), "GB" (memory, value in bytes), "count", "TFLOP/s"
  double a = 0, b = 0;
  [[nodiscard]] double delta() const { return b - a; }
  /// |b − a| / |a| (the printed change relative to A); +infinity when a = 0 ≠ b; 0 when a = b.
  [[nodiscard]] double relative() const;
};

/// The rows of a diff between two whole-step results (A then B), largest relative difference first (ties: group,
/// then name order). Rows: step time and its parts (pipeline, layer forward/backward, output layer, DP exposed,
/// optimizer), attention layer forward/backward, exposed communication (layer and attention), model TFLOP/s per
/// GPU, memory per GPU by category and total, messages and bytes per phase and link level of the simulated layer
/// (TP and CP messages of one micro-batch; with recompute, the recomputed forward's messages count as backward).
/// Unchanged rows are kept (relative 0) at the end, in a fixed order.
std::vector<DiffRow> diff_rows(const PlanOption& a, const PlanOption& b);

/// Simulates one scenario as a single plan option (its own cp_comm_type; the first when it lists several).
/// @throws InputError as validate_scenario, or without model.vocab_size.
PlanOption evaluate_scenario(const Scenario& scenario);

}  // namespace hcpsim::sim
