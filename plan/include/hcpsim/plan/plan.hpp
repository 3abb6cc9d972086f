#pragma once
/// Capacity planning: a search over the parallel configuration of a scenario (cp_comm_type, hierarchical sizes
/// [A, P], TP, PP and VP, recompute, micro-batch), each legal option that fits in memory simulated as a whole
/// training step (training_step.hpp) and ranked, and the difference between two simulated
/// configurations (`hcpsim diff`).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/step/training_step.hpp"

namespace hcpsim::sim {

/// The recompute setting of one plan option (Megatron --recompute-granularity / --recompute-method /
/// --recompute-num-layers, training.* of the scenario): none; selective (core attention); full = granularity full,
/// method uniform, one layer per group (every layer's input saved, every layer rerun); partial = granularity full,
/// method block, recompute_num_layers = half the layers of a model chunk (rounded up): the first half of each
/// chunk reruns, the rest keeps its activations. Source: Megatron-LM transformer_block.py _checkpointed_forward.
enum class PlanRecompute { none, selective, full, partial };
/// "none", "selective", "full", "partial".
std::string to_string(PlanRecompute r);

/// A dimension of the configuration search, as `--fixed` names it.
enum class PlanDimension { tp, cp, pp, vp, recompute, micro_batch, cp_comm_type };
/// "tp", "cp", "pp", "vp", "recompute", "micro_batch", "cp_comm_type".
std::string to_string(PlanDimension d);
/// Parses one `--fixed` key. @throws InputError (option --fixed) for an unknown key, naming the known ones.
PlanDimension parse_plan_dimension(const std::string& key);

/// The size of a search, known before any simulation (PlanRequest::on_estimate, PlanResult::estimate).
struct PlanEstimate {
  size_t configurations = 0;  ///< every enumerated option (legal or not)
  size_t legal = 0;           ///< options validation accepts
  size_t fit_in_memory = 0;   ///< legal options whose closed-form memory (without CP attention buffers) fits
  size_t simulated = 0;       ///< options to simulate: those that fit, or the few least-memory ones when none does
  size_t simulations = 0;     ///< simulations of those: the step's layer (partial recompute: also the layer
                              ///< without recompute) and the attention alone, shared by options that differ only
                              ///< in recompute and VP
  double seconds = 0;         ///< estimated wall time of the simulations on one core (simulation_cost.hpp)
  int threads = 1;            ///< threads the simulations run on
};

/// What `hcpsim plan` searches: TP × CP variant × [A, P] × PP (and VP) × recompute × micro-batch. GPUs per model
/// replica (TP·CP·PP) stay the scenario's (or `gpus`), CP = GPUs / (TP·PP), unless `cp` fixes CP. An empty list
/// searches the dimension's default values; a dimension in `fixed` keeps the scenario's value.
struct PlanRequest {
  std::optional<int64_t> cp;    ///< --cp N: context_parallel_size of every option (default: GPUs / (TP·PP))
  std::optional<int64_t> gpus;  ///< --gpus N: TP·CP·PP = N GPUs per model replica (CP = N/(TP·PP));
                                ///< the cluster grows to hold them if needed. Excludes `cp`.
  std::vector<int64_t> tp;      ///< --tp LIST (default: every divisor of gpus_per_node)
  /// --pp LIST (default: every PP the scenario's pipeline split allows, config/pipeline_split.hpp: the divisors of
  /// num_layers, or of num_layers + e + l with the account_for_* options)
  std::vector<int64_t> pp;
  /// --vp LIST, 1 = no interleaving (default: 1, 2 and the scenario's VP, those above 1 only with PP > 1 where the
  /// pipeline split allows them)
  std::vector<int64_t> vp;
  std::vector<PlanRecompute> recompute;  ///< --recompute LIST (default: all four)
  std::vector<int64_t> micro_batch;      ///< --micro-batch LIST (default: the scenario's and twice it; 1 for THD)
  std::vector<PlanDimension> fixed;      ///< --fixed KEYS: dimensions held at the scenario's values
  /// Refuse (InputError naming --max-configurations) a search that would simulate more options than this.
  size_t max_configurations = 5000;
  enum class Objective { time, memory };
  Objective objective = Objective::time;
  /// Simulations run on this many threads (0: one per hardware thread). Results do not depend on it.
  int threads = 0;
  /// Called once with the size of the search before any simulation (and before the refusal above the bound).
  std::function<void(const PlanEstimate&)> on_estimate;
  /// Called after each finished simulation task, a step or an attention alone (done, total), from one thread at a
  /// time; unset by default.
  std::function<void(size_t done, size_t total)> progress;
};

/// One option of the sweep.
struct PlanOption {
  CpCommType cp_comm_type = CpCommType::p2p;
  int64_t a2a_size = 1, p2p_size = 1;
  int64_t tp = 1, cp = 1, data_parallel_size = 1;
  int64_t pp = 1;               ///< pipeline_model_parallel_size
  int64_t vp = 1;               ///< virtual_pipeline_model_parallel_size (1: not interleaved)
  PlanRecompute recompute = PlanRecompute::none;
  int64_t recompute_num_layers = 0;  ///< partial: recompute_num_layers (block); 0 otherwise
  int64_t micro_batch_size = 1;
  std::string label;            ///< e.g. "a2a+p2p [8,2] TP1 PP2 VP2 full mbs1" (VP only when interleaved)
  std::string dropped_reason;   ///< non-empty: validation (or the sweep) ruled it out; the rest is unset
  /// A TP x PP pair ruled out before any option of it was formed (the GPUs do not divide): only tp and pp are set,
  /// the other layout fields are placeholders that reports leave empty.
  bool sizes_only = false;
  std::string dropped_key;      ///< what the reason is about: the rejected scenario key, or a short phrase
  /// false: not simulated because its closed-form memory (without CP attention buffers, a lower bound) exceeds
  /// the GPU; then only step.memory is set (that estimate).
  bool simulated = false;
  StepResult step;              ///< whole step (layer simulated)
  TimePs attention_forward_ps = 0;   ///< one attention layer alone (as `simulate` prints it)
  TimePs attention_backward_ps = 0;
  TimePs attention_exposed_comm_ps = 0;    ///< attention alone: SimResult::critical_exposed_comm_ps (busiest GPU)
  TimePs attention_load_imbalance_ps = 0;  ///< attention alone: SimResult::load_imbalance_ps
  int64_t inter_node_bytes_per_layer = 0;  ///< bytes of the simulated layer's messages that cross nodes
  int64_t intra_node_bytes_per_layer = 0;
  bool has_a2a = false;         ///< the option runs an all-to-all (a2a, or a2a+p2p with A > 1)
  bool a2a_intra_node = false;  ///< every a2a group of the first CP group sits on one node
  int rank = 0;                 ///< 1-based place in the ranking; 0 when dropped or not simulated
};

/// Ruled-out options sharing the key their reason names (e.g. "parallel.context_parallel_size").
struct PlanDroppedGroup {
  std::string key;      ///< the reason's key, or the reason itself when it names none
  size_t count = 0;
  std::string example;  ///< the first such option: "label: reason"
};

/// One searched dimension and its values, as the request resolved them.
struct PlanDimensionValues {
  PlanDimension dimension = PlanDimension::tp;
  std::vector<std::string> values;  ///< e.g. {"1", "2", "4"}, {"none", "full"}; cp: "GPUs/(TP*PP)" or the size
  bool fixed = false;               ///< held at the scenario's value by --fixed
};

/// The sweep's answer.
struct PlanResult {
  PlanRequest::Objective objective = PlanRequest::Objective::time;
  std::vector<PlanOption> ranked;   ///< simulated options, best first
  std::vector<PlanOption> dropped;  ///< ruled-out options with their reasons, in enumeration order
  std::vector<PlanDroppedGroup> dropped_summary;  ///< `dropped` by reason key, largest count first (then key)
  /// Legal options not simulated because their closed-form memory exceeds the GPU, least memory first.
  std::vector<PlanOption> over_memory;
  std::vector<PlanDimensionValues> dimensions;  ///< what was searched, in PlanDimension order
  int64_t model_gpus = 0;           ///< GPUs per model replica (TP·CP·PP), 0 when --cp fixes CP without --gpus
  PlanEstimate estimate;
  std::string explanation;          ///< why the winner wins, or that nothing fits and what would
  bool nothing_fits = false;        ///< no legal option fits in GPU memory (no winner)
  /// Samples per iteration of every option: model.global_batch_size, or the least common multiple of the options'
  /// micro_batch_size × data-parallel size when unset (so step times of options with different DP compare the
  /// same work).
  int64_t global_batch_size = 1;
};

/// Enumerates the options of the request (with PlanResult::global_batch_size fixed): for each TP, PP, VP,
/// recompute and micro-batch, p2p, a2a, all_gather and a2a+p2p with every [A, P] (A·P = CP, 1 < A < CP), validates
/// each as `validate` would (the scenario with those sizes; DP fills the cluster unless the scenario sets it),
/// computes the memory of the legal ones in closed form, simulates those that fit (simulate_step plus the attention
/// layer alone; when none fits, the three that need the least) and ranks them. Objective time: options that fit
/// by step time, then those that do not (a configuration that does not fit is never first unless nothing fits,
/// and then PlanResult::nothing_fits names no winner); memory: by memory per GPU. Ties: label.
/// [1, CP] and [CP, 1] are listed as dropped (TE runs them as p2p and a2a).
/// @throws InputError for a bad request (--cp and --gpus together, CP, TP, PP, VP or micro-batch < 1, --gpus not
/// divisible by TP·PP for any TP and PP), a search above max_configurations (naming --max-configurations, --fixed
/// and the lists), or a scenario without model.vocab_size (needed for the whole step).
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
