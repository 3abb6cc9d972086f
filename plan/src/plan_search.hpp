#pragma once
/// The parts of the configuration search shared by its translation units: the resolved search space, the
/// enumeration with validation and the closed-form memory of every option (plan_search.cpp), and the
/// explanation of the ranking (plan_explain.cpp).

#include <optional>
#include <string>
#include <vector>

#include "hcpsim/plan/plan.hpp"

namespace hcpsim::sim::detail {

/// The values of every dimension the search takes, after the request's checks and --fixed.
struct SearchSpace {
  std::vector<int64_t> tp, pp, vp, micro_batch;
  std::vector<PlanRecompute> recompute;  ///< empty when the recompute dimension keeps the scenario's training.*
  std::vector<CpCommType> comm_types;    ///< the CP variants to enumerate, in the variant table's order
  std::optional<int64_t> cp;             ///< fixed CP (--cp or --fixed cp); else CP = model_gpus / (TP·PP)
  std::optional<int64_t> gpus;           ///< --gpus N
  int64_t model_gpus = 0;                ///< TP·CP·PP of every option (--gpus, or the scenario's when CP is not
                                         ///< held); 0 when CP is held without --gpus
  std::vector<PlanDimensionValues> dimensions;
  std::vector<PlanDimension> fixed;
  bool vp_listed = false;                ///< --vp gave the values (else VP 2 only where stages split evenly)
};

/// Checks the request and resolves every dimension's values (defaults, lists, --fixed).
/// @throws InputError naming the option (--cp, --gpus, --tp, --pp, --vp, --micro-batch, --fixed).
SearchSpace resolve_search_space(const Scenario& scenario, const PlanRequest& request);

/// The legal options of a search with the scenario each simulates; `options[i]` belongs to `scenarios[i]`.
struct LegalOptions {
  std::vector<PlanOption> options;  ///< step.memory holds the closed-form memory (no CP attention buffers)
  std::vector<Scenario> scenarios;
  size_t configurations = 0;        ///< every enumerated option, dropped ones included
};

/// Enumerates every option of `space`, sets result.global_batch_size, appends the ruled-out options to
/// result.dropped and returns the legal ones with their closed-form memory.
/// @throws InputError (--gpus) when --gpus fits no TP·PP of the lists.
LegalOptions enumerate_options(const Scenario& scenario, const SearchSpace& space, PlanResult& result);

/// "a2a+p2p [A,P] TPn", "p2p TPn", or "no CP TPn" when A·P = 1: the comm part of an option's label (describe's
/// label).
std::string describe_label(CpCommType t, int64_t a, int64_t p, int64_t tp);

/// Labels, layout and placement facts of option `t` of a validated scenario (no simulation); the label is the
/// comm type, [A, P] and TP only.
PlanOption describe(const Scenario& scenario, CpCommType t, int64_t data_parallel_size);

/// The ruled-out options grouped by the key of their reason (PlanResult::dropped_summary).
std::vector<PlanDroppedGroup> summarise_dropped(const std::vector<PlanOption>& dropped);

/// Why the winner wins and what the runner-up would need, or that nothing fits and what would.
std::string explain(const PlanResult& result, const SearchSpace& space);

/// "12.345 ms" style times and "1.23 GB" (10^9 bytes) sizes of the explanation.
std::string time_text(TimePs ps);
std::string gb_text(double bytes);

}  // namespace hcpsim::sim::detail
