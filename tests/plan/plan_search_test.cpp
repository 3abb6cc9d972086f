// hcpsim plan as a configuration search (library calls): PP and recompute find a layout of the 70B scenario that
// fits, --fixed holds dimensions, the size is known before simulating and bounded, nothing-fits names no winner.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "catch_compat.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/plan/plan.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;

namespace {

const std::string k70b = std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama3_70b_256k_tp8_cp8_8xdgx_h100.yaml";

// TP 4 and 8, PP 1 and 2, no or full recompute, micro-batch 1: a narrow search that still needs PP or recompute.
PlanRequest narrow() {
  PlanRequest r;
  r.tp = {4, 8};
  r.pp = {1, 2};
  r.recompute = {PlanRecompute::none, PlanRecompute::full};
  r.micro_batch = {1};
  r.threads = 2;
  return r;
}

bool contains(const std::vector<PlanOption>& v, const std::string& label) {
  return std::any_of(v.begin(), v.end(), [&](const PlanOption& o) { return o.label == label; });
}

}  // namespace

TEST_CASE("plan search: PP and recompute find a fitting layout of the 70B scenario, and only fitting ones rank",
          "[plan]") {
  size_t estimated = 0, progress_calls = 0, last_done = 0, last_total = 0;
  PlanRequest req = narrow();
  req.on_estimate = [&](const PlanEstimate& e) { estimated = e.simulated; };
  req.progress = [&](size_t done, size_t total) {
    ++progress_calls;
    last_done = done;
    last_total = total;
  };
  const PlanResult r = plan(load_scenario(k70b), req);
  REQUIRE_FALSE(r.nothing_fits);
  REQUIRE_FALSE(r.ranked.empty());
  const PlanOption& w = r.ranked[0];
  CHECK(w.label == "p2p TP8 PP1 full mbs1");
  CHECK(w.rank == 1);
  CHECK(w.tp == 8);
  CHECK(w.cp == 8);  // 64 GPUs per replica / (TP 8 x PP 1)
  CHECK(w.pp == 1);
  CHECK(w.recompute == PlanRecompute::full);
  CHECK(w.step.memory.fits);
  CHECK(w.step.memory.total_bytes < w.step.memory.capacity_bytes);
  CHECK(w.step.step_ps > 100'000'000'000'000);  // > 100 s per iteration at 256k tokens
  // Every ranked option fits; the ones that do not have no place and come after.
  for (const auto& o : r.ranked) CHECK((o.rank > 0) == o.step.memory.fits);
  // The scenario's own layout without PP and recompute is far above the GPU: not simulated.
  CHECK(contains(r.over_memory, "a2a+p2p [2,8] TP4 PP1 none mbs1"));
  for (const auto& o : r.over_memory) CHECK(o.step.memory.total_bytes > o.step.memory.capacity_bytes);
  CHECK(r.explanation.rfind("p2p TP8 PP1 full mbs1 wins with ", 0) == 0);
  CHECK(r.explanation.find("the runner-up ") != std::string::npos);
  // The estimate came first; progress heard every simulation: one step per option and one attention alone per
  // comm type, [A, P], TP, CP, PP and micro-batch (options differing in recompute or VP share it).
  CHECK(estimated == r.ranked.size());
  CHECK(r.estimate.simulated == r.ranked.size());
  CHECK(r.estimate.legal == r.ranked.size() + r.over_memory.size());
  CHECK(progress_calls == r.estimate.simulations);  // no partial recompute here: one layer per step
  CHECK(progress_calls < 2 * r.ranked.size());
  CHECK(last_done == last_total);
  // Shared attention: p2p TP8 PP2 with and without VP 2 time the same attention layer.
  const auto at = [&](const std::string& label) {
    return *std::find_if(r.ranked.begin(), r.ranked.end(), [&](const PlanOption& o) { return o.label == label; });
  };
  CHECK(at("p2p TP8 PP2 VP2 full mbs1").attention_forward_ps == at("p2p TP8 PP2 full mbs1").attention_forward_ps);
  CHECK(at("p2p TP8 PP2 VP2 full mbs1").attention_forward_ps > 0);
}

TEST_CASE("plan search: --fixed holds dimensions at the scenario's values", "[plan]") {
  PlanRequest req;
  req.fixed = {PlanDimension::tp, PlanDimension::cp_comm_type, PlanDimension::micro_batch, PlanDimension::vp};
  req.pp = {1, 2, 4};
  req.recompute = {PlanRecompute::full};
  req.threads = 2;
  const PlanResult r = plan(load_scenario(k70b, {"parallel.tensor_model_parallel_size=4",
                                                 "parallel.context_parallel_size=16",
                                                 "parallel.cp_comm_type=a2a+p2p",
                                                 "parallel.hierarchical_context_parallel_sizes=[2,8]"}),
                            req);
  for (const auto* list : {&r.ranked, &r.over_memory, &r.dropped})
    for (const auto& o : *list) {
      INFO(o.label);
      CHECK(o.tp == 4);
      CHECK(o.cp_comm_type == CpCommType::a2a_p2p);
      CHECK(o.micro_batch_size == 1);
      CHECK(o.vp == 1);
    }
  // CP follows PP: 64 GPUs / (4 x PP).
  REQUIRE_FALSE(r.ranked.empty());
  for (const auto& o : r.ranked) CHECK(o.cp * o.pp * o.tp == 64);
  CHECK(std::any_of(r.ranked.begin(), r.ranked.end(), [](const PlanOption& o) { return o.pp == 2; }));
  const auto dim = [&](PlanDimension d) {
    return *std::find_if(r.dimensions.begin(), r.dimensions.end(), [&](const auto& x) { return x.dimension == d; });
  };
  CHECK(dim(PlanDimension::tp).fixed);
  CHECK(dim(PlanDimension::tp).values == std::vector<std::string>{"4"});
  CHECK_FALSE(dim(PlanDimension::pp).fixed);
  CHECK(dim(PlanDimension::pp).values == std::vector<std::string>{"1", "2", "4"});
  // A list for a held dimension, and an unknown key, are input errors naming the option.
  PlanRequest both = req;
  both.tp = {8};
  CHECK_THROWS_AS(plan(load_scenario(k70b), both), InputError);
  try {
    parse_plan_dimension("gpus");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.key() == "--fixed");
  }
}

TEST_CASE("plan search: the size is known before simulating; above --max-configurations it is refused", "[plan]") {
  PlanRequest req = narrow();
  req.max_configurations = 2;
  PlanEstimate seen;
  req.on_estimate = [&](const PlanEstimate& e) { seen = e; };
  bool simulated = false;
  req.progress = [&](size_t, size_t) { simulated = true; };
  try {
    plan(load_scenario(k70b), req);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.key() == "--max-configurations");
    CHECK(std::string(e.what()).find("--fixed") != std::string::npos);
  }
  CHECK_FALSE(simulated);
  CHECK(seen.configurations > seen.legal);
  CHECK(seen.simulated > 2);
  CHECK(seen.fit_in_memory == seen.simulated);
  CHECK(seen.seconds > 0);
}

TEST_CASE("plan search: when nothing fits there is no winner, and the answer says what would fit", "[plan]") {
  PlanRequest req;
  req.fixed = {PlanDimension::tp, PlanDimension::pp, PlanDimension::vp, PlanDimension::recompute,
               PlanDimension::micro_batch};
  req.threads = 2;
  const PlanResult r = plan(load_scenario(k70b, {"cluster.gpu.memory_GB=40"}), req);
  CHECK(r.nothing_fits);
  REQUIRE(r.ranked.size() <= 3);  // only the least-memory options are simulated
  for (const auto& o : r.ranked) CHECK(o.rank == 0);
  const std::string& x = r.explanation;
  CHECK(x.rfind("nothing fits in GPU memory, so there is no winner: the closest simulated option, ", 0) == 0);
  // The option named is the simulated one with the least memory (whose figure counts the CP attention buffers),
  // never a closed-form estimate of an option that was not simulated.
  REQUIRE_FALSE(r.ranked.empty());
  const PlanOption* least = &r.ranked.front();
  for (const auto& o : r.ranked)
    if (o.step.memory.total_bytes < least->step.memory.total_bytes) least = &o;
  CHECK(x.find("option, " + least->label + ", needs " + fmt::format("{:.2f} GB", least->step.memory.total_bytes / 1e9) + " per GPU") !=
        std::string::npos);
  CHECK(x.find(" wins") == std::string::npos);
  CHECK(x.find("GB over") != std::string::npos);
  CHECK(x.find("PP is held by --fixed pp") != std::string::npos);
  CHECK(x.find("recompute is held by --fixed") == std::string::npos);  // the scenario already recomputes fully
  CHECK(x.find("--gpus 128") != std::string::npos);
}
