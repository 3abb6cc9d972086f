// hcpsim plan / diff as library calls: ranking, ruled-out options, memory rule, diff rows.
#include <algorithm>
#include <string>

#include "catch_compat.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/plan/plan.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;

namespace {

Scenario fixture(const std::string& name, const std::vector<std::string>& overrides = {}) {
  return load_scenario(std::string(HCPSIM_SOURCE_DIR) + "/tests/fixtures/plan/" + name, overrides);
}

// Labels of the comm-only requests below: PP 1, no recompute, micro-batch 1 (the fixtures' own values).
const PlanOption* find(const std::vector<PlanOption>& v, const std::string& comm_label) {
  const std::string label = comm_label + " PP1 none mbs1";
  const auto it = std::find_if(v.begin(), v.end(), [&](const PlanOption& o) { return o.label == label; });
  return it == v.end() ? nullptr : &*it;
}

// The CP variants and [A, P] only (TP as listed, else the scenario's): the other dimensions held by --fixed.
PlanRequest comm_only(PlanRequest r = {}) {
  r.fixed = {PlanDimension::pp, PlanDimension::vp, PlanDimension::recompute, PlanDimension::micro_batch};
  if (r.tp.empty()) r.fixed.push_back(PlanDimension::tp);
  return r;
}

}  // namespace

TEST_CASE("plan: fast NVLink and a slow network make A = GPUs per node win", "[plan]") {
  const PlanResult r = plan(fixture("slow_network_cp32.yaml"), comm_only());
  REQUIRE(r.ranked.size() == 5);  // p2p, all_gather, [2,16], [4,8], [8,4]
  CHECK(r.ranked[0].label == "a2a+p2p [8,4] TP1 PP1 none mbs1");
  CHECK(r.ranked[0].rank == 1);
  CHECK(r.ranked[0].a2a_intra_node);
  CHECK(r.ranked[0].inter_node_bytes_per_layer < find(r.ranked, "p2p TP1")->inter_node_bytes_per_layer);
  // The more of the ring crosses the network, the slower: [8,4] < [4,8] < [2,16] < p2p.
  CHECK(find(r.ranked, "a2a+p2p [4,8] TP1")->step.step_ps < find(r.ranked, "a2a+p2p [2,16] TP1")->step.step_ps);
  CHECK(find(r.ranked, "a2a+p2p [2,16] TP1")->step.step_ps < find(r.ranked, "p2p TP1")->step.step_ps);
  CHECK(r.explanation.rfind("a2a+p2p [8,4] TP1 PP1 none mbs1 wins with", 0) == 0);
  CHECK(r.explanation.find("the largest difference is its exposed layer communication (on the busiest GPU)") !=
        std::string::npos);
  // Ruled out, each with its reason: a2a (32 > 8 KV heads), [16,2], and the degenerate [1,32] / [32,1].
  REQUIRE(r.dropped.size() == 4);
  CHECK(find(r.dropped, "a2a TP1")->dropped_reason.find("must both be divisible by context_parallel_size = 32") !=
        std::string::npos);
  CHECK(find(r.dropped, "a2a+p2p [16,2] TP1")->dropped_reason.find("divisible by the a2a size A = 16") !=
        std::string::npos);
  CHECK(find(r.dropped, "a2a+p2p [1,32] TP1")->dropped_reason.find("plain p2p") != std::string::npos);
  CHECK(find(r.dropped, "a2a+p2p [32,1] TP1")->dropped_reason.find("plain a2a") != std::string::npos);
  // Deterministic.
  const PlanResult again = plan(fixture("slow_network_cp32.yaml"), comm_only());
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    CHECK(again.ranked[i].label == r.ranked[i].label);
    CHECK(again.ranked[i].step.step_ps == r.ranked[i].step.step_ps);
  }
}

TEST_CASE("plan: an option that does not fit is never ranked first unless nothing fits", "[plan]") {
  PlanRequest req;
  req.tp = {1, 2};
  req.cp = 16;  // CP 16 at both TP sizes (TP 2 then uses twice the GPUs per replica)
  req = comm_only(req);
  const PlanResult free = plan(fixture("tp_sweep_cp16.yaml"), req);
  const PlanOption* tp1 = find(free.ranked, "a2a+p2p [8,2] TP1");
  const PlanOption* p2p_tp2 = find(free.ranked, "p2p TP2");
  REQUIRE(tp1);
  REQUIRE(p2p_tp2);
  REQUIRE(tp1->step.step_ps < p2p_tp2->step.step_ps);  // faster, but it needs more memory
  REQUIRE(tp1->step.memory.total_bytes > 30e9);
  REQUIRE(p2p_tp2->step.memory.total_bytes < 30e9);
  CHECK(free.global_batch_size == 16);

  const PlanResult limited = plan(fixture("tp_sweep_cp16.yaml", {"cluster.gpu.memory_GB=30"}), req);
  CHECK_FALSE(limited.nothing_fits);
  bool seen_unfit = false;
  for (const auto& o : limited.ranked) {
    if (!o.step.memory.fits) seen_unfit = true;
    CHECK((o.step.memory.fits || seen_unfit));
    if (seen_unfit) CHECK_FALSE(o.step.memory.fits);  // every fitting option comes first
  }
  CHECK(limited.ranked[0].step.memory.fits);
  CHECK(limited.ranked[0].rank == 1);
  // Does not fit: no place (simulated and unranked, or not simulated because its closed-form memory is above 30 GB).
  const PlanOption* big = find(limited.ranked, "a2a+p2p [8,2] TP1");
  if (!big) big = find(limited.over_memory, "a2a+p2p [8,2] TP1");
  REQUIRE(big);
  CHECK(big->rank == 0);
  CHECK_FALSE(big->step.memory.fits);
  CHECK(find(limited.ranked, "p2p TP2")->rank >= 1);

  const PlanResult none = plan(fixture("tp_sweep_cp16.yaml", {"cluster.gpu.memory_GB=10"}), req);
  CHECK(none.nothing_fits);
  for (size_t i = 1; i < none.ranked.size(); ++i)
    CHECK(none.ranked[i - 1].step.step_ps <= none.ranked[i].step.step_ps);
  for (const auto& o : none.ranked) CHECK(o.rank == 0);  // no winner
  CHECK(none.explanation.rfind("nothing fits in GPU memory, so there is no winner: the closest simulated option, ", 0) == 0);
  CHECK(none.explanation.find(" wins") == std::string::npos);
  CHECK(none.explanation.find("PP is held by --fixed pp") != std::string::npos);

  PlanRequest mem = req;
  mem.objective = PlanRequest::Objective::memory;
  const PlanResult by_memory = plan(fixture("tp_sweep_cp16.yaml"), mem);
  for (size_t i = 1; i < by_memory.ranked.size(); ++i)
    CHECK(by_memory.ranked[i - 1].step.memory.total_bytes <= by_memory.ranked[i].step.memory.total_bytes);
  CHECK(by_memory.ranked[0].tp == 2);
}

TEST_CASE("plan: bad requests and scenarios without a vocabulary are input errors", "[plan]") {
  // --cp with --gpus: TP x PP = GPUs / CP (it was refused, and --fixed cp with --gpus too); GPUs that are not a
  // multiple of CP are an error naming --gpus.
  PlanRequest both;
  both.cp = 16;
  both.gpus = 32;
  both.tp = {1, 2, 4};
  both = comm_only(both);
  const PlanResult held = plan(fixture("tp_sweep_cp16.yaml"), both);
  REQUIRE_FALSE(held.ranked.empty());
  for (const auto& o : held.ranked) {
    CHECK(o.cp == 16);
    CHECK(o.tp * o.pp == 2);
  }
  CHECK(held.model_gpus == 32);
  PlanRequest fixed_cp;
  fixed_cp.tp = {2};
  fixed_cp = comm_only(fixed_cp);
  fixed_cp.gpus = 32;
  fixed_cp.fixed.push_back(PlanDimension::cp);
  const PlanResult f = plan(fixture("tp_sweep_cp16.yaml"), fixed_cp);
  REQUIRE_FALSE(f.ranked.empty());
  CHECK(f.ranked[0].cp == 16);
  CHECK(f.ranked[0].tp == 2);
  both.gpus = 24;
  try {
    plan(fixture("tp_sweep_cp16.yaml"), both);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.key() == "--gpus");
    CHECK(std::string(e.what()).find("24 GPUs per model replica are not a multiple of CP 16 (--cp)") !=
          std::string::npos);
  }
  PlanRequest odd;
  odd.gpus = 15;
  odd.tp = {2};  // 15 is odd: no TP 2 x PP divides it
  CHECK_THROWS_AS(plan(fixture("tp_sweep_cp16.yaml"), odd), InputError);
  try {
    plan(fixture("tp_sweep_cp16.yaml", {"model.vocab_size=null"}), comm_only());
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.key() == "model.vocab_size");
  }
  // --gpus: CP = GPUs / TP for each TP.
  PlanRequest gpus;
  gpus.gpus = 16;
  gpus.tp = {1, 2};
  gpus = comm_only(gpus);
  const PlanResult g = plan(fixture("tp_sweep_cp16.yaml"), gpus);
  CHECK(find(g.ranked, "p2p TP1")->cp == 16);
  CHECK(find(g.ranked, "p2p TP2")->cp == 8);
}

TEST_CASE("diff: a scenario against itself changes nothing; [A,P] moves bytes between link levels", "[plan]") {
  const Scenario s = fixture("tp_sweep_cp16.yaml");
  const PlanOption a = evaluate_scenario(s);
  const auto same = diff_rows(a, evaluate_scenario(s));
  REQUIRE(!same.empty());
  for (const auto& r : same) CHECK(r.relative() == 0);

  // [8,2] keeps the all-to-all inside a node; [2,8] moves the ring onto more inter-node hops: fewer NVLink bytes,
  // more network bytes.
  const PlanOption b = evaluate_scenario(fixture("tp_sweep_cp16.yaml", {"parallel.hierarchical_context_parallel_sizes=[2,8]"}));
  const auto rows = diff_rows(a, b);
  auto row = [&](const std::string& name) {
    const auto it = std::find_if(rows.begin(), rows.end(), [&](const DiffRow& r) { return r.name == name; });
    REQUIRE(it != rows.end());
    return *it;
  };
  CHECK(row("layer messages forward inter_node bytes").delta() > 0);
  CHECK(row("layer messages backward inter_node bytes").delta() > 0);
  // [2,8]'s layer loses its time to load imbalance, not to exposed communication: its busiest GPU idles less
  // than [8,2]'s, but its GPUs' kernel times differ by 1.1 ms instead of 54 us. The two rows split the worst GPU's
  // idle time exactly.
  CHECK(row("layer exposed comm (busiest GPU)").delta() < 0);
  CHECK(row("layer load imbalance").delta() > 0);
  for (const PlanOption* o : {&a, &b})
    CHECK(o->step.layer_exposed_comm_ps == o->step.layer_critical_exposed_comm_ps + o->step.layer_load_imbalance_ps);
  for (size_t i = 1; i < rows.size(); ++i) CHECK(rows[i - 1].relative() >= rows[i].relative());
  CHECK(row("memory: weights").relative() == 0);

  // The memory rows add up to the total on both sides; with FP8 on, TE's cached FP8 weight copies are a row of
  // their own (diff showed activations -0.47 GB and total +1.48 GB with nothing between them).
  const PlanOption fp8 = evaluate_scenario(fixture("tp_sweep_cp16.yaml", {"training.fp8=true"}));
  const auto with_fp8 = diff_rows(a, fp8);
  double sum_a = 0, sum_b = 0, total_a = 0, total_b = 0;
  for (const DiffRow& r : with_fp8) {
    if (r.name == "memory: total") {
      total_a = r.a;
      total_b = r.b;
    } else if (r.name.rfind("memory: ", 0) == 0) {
      sum_a += r.a;
      sum_b += r.b;
    }
  }
  CHECK(sum_a == Approx(total_a).epsilon(1e-12));
  CHECK(sum_b == Approx(total_b).epsilon(1e-12));
  const auto copies = std::find_if(with_fp8.begin(), with_fp8.end(),
                                   [](const DiffRow& r) { return r.name == "memory: FP8 weight copies"; });
  REQUIRE(copies != with_fp8.end());
  CHECK(copies->a == 0);
  CHECK(copies->b > 0);
}

TEST_CASE("plan: a runner-up on the same GPUs that loses on compute is told which kernels cost it", "[plan]") {
  // Llama-3-8B at 64K tokens on one DGX node, CP = 8: every option has the same FLOPs per GPU; the p2p ring of 8
  // runs 8 steps of LSE merges and output corrections where [2,4] runs 4, so the tie is decided in those kernels.
  const Scenario s = load_scenario(std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml",
                                   {"cluster.nodes=1", "parallel.context_parallel_size=8", "model.seq_length=65536",
                                    "parallel.hierarchical_context_parallel_sizes=[4,2]"});
  PlanRequest r;
  r.fixed = {PlanDimension::tp, PlanDimension::pp, PlanDimension::vp, PlanDimension::recompute,
             PlanDimension::micro_batch};
  const PlanResult p = plan(s, r);
  REQUIRE(p.ranked.size() >= 2);
  CHECK(p.ranked[0].label == "a2a+p2p [2,4] TP1 PP1 full mbs1");
  CHECK(p.ranked[1].label == "p2p TP1 PP1 full mbs1");
  CHECK(p.explanation.find("the largest difference is its compute") != std::string::npos);
  CHECK(p.explanation.find("e.g. faster kernels at the same FLOPs per GPU: per layer its busiest GPU spends ") !=
        std::string::npos);
  CHECK(p.explanation.find(" in merges and corrections against ") != std::string::npos);
  CHECK(p.explanation.find("a larger share of the model's GPUs") == std::string::npos);
}


TEST_CASE("plan: PP and VP candidates follow the scenario's pipeline split (Llama3.1-405B: 126 + 2 layers)", "[plan]") {
  // 126 layers with the embedding and the loss counted as layers split over PP 8 x VP 8 (Bridge's 405B recipe);
  // PP 8 divides 128, not 126, and the divisors of 126 alone (1, 2, 3, 6, 7, 9, ...) left the published layout out:
  // at 128 GPUs per replica the search found nothing that fits.
  const Scenario s = load_scenario(std::string(HCPSIM_SOURCE_DIR) +
                                   "/validation/steps/bridge2511_llama31_405b_tp8_pp8_cp2_vp8.yaml");
  PlanRequest r;
  r.gpus = 128;
  r.fixed = {PlanDimension::tp, PlanDimension::recompute, PlanDimension::micro_batch, PlanDimension::cp_comm_type};
  const PlanResult p = plan(s, r);
  auto values = [&](PlanDimension d) {
    for (const auto& x : p.dimensions)
      if (x.dimension == d) return x.values;
    return std::vector<std::string>{};
  };
  CHECK(values(PlanDimension::pp) == std::vector<std::string>{"1", "2", "4", "8", "16", "32", "64", "128"});
  CHECK(values(PlanDimension::vp) == std::vector<std::string>{"1", "2", "8"});  // the scenario's own VP 8 too
  REQUIRE_FALSE(p.ranked.empty());
  const auto published = std::find_if(p.ranked.begin(), p.ranked.end(),
                                      [](const PlanOption& o) { return o.label == "p2p TP8 PP8 VP8 none mbs1"; });
  REQUIRE(published != p.ranked.end());
  CHECK(published->step.memory.fits);
  CHECK(published->cp == 2);
}

TEST_CASE("plan: an option at TP 1 runs without sequence parallelism and TP overlap, not ruled out for them", "[plan]") {
  // Bridge's 70B recipe sets sequence_parallel and tp_comm_overlap for its TP 4; at TP 1 Megatron turns sequence
  // parallelism off and asserts that TP overlap has it, so these options were all ruled out by tp_comm_overlap.
  const Scenario s =
      load_scenario(std::string(HCPSIM_SOURCE_DIR) + "/validation/steps/bridge2511_llama3_70b_tp4_pp8_vp5.yaml");
  REQUIRE(s.parallel.tp_comm_overlap);
  PlanRequest r;
  r.tp = {1};
  r.fixed = {PlanDimension::pp, PlanDimension::vp, PlanDimension::recompute, PlanDimension::micro_batch};
  const PlanResult p = plan(s, r);
  for (const PlanOption& o : p.dropped) {
    INFO(o.label << ": " << o.dropped_reason);
    CHECK(o.dropped_reason.find("tp_comm_overlap") == std::string::npos);
    CHECK(o.dropped_key != "parallel.tp_comm_overlap");
  }
  CHECK(p.ranked.size() + p.over_memory.size() > 0);
  for (const PlanOption& o : p.over_memory) CHECK(o.tp == 1);
}

TEST_CASE("plan: selective recompute's cost is its recomputed attention forward, not compute", "[plan]") {
  // The 70B recipe's layout with recompute none, selective, full: the runner-up (selective) loses by rerunning the
  // core attention's forward in every layer's backward; it was called "compute" with "faster kernels" as the fix.
  const Scenario s =
      load_scenario(std::string(HCPSIM_SOURCE_DIR) + "/validation/steps/bridge2511_llama3_70b_tp4_pp8_vp5.yaml");
  PlanRequest r;
  r.fixed = {PlanDimension::tp, PlanDimension::cp, PlanDimension::pp, PlanDimension::vp, PlanDimension::micro_batch,
             PlanDimension::cp_comm_type};
  r.recompute = {PlanRecompute::none, PlanRecompute::selective, PlanRecompute::full};
  const PlanResult p = plan(s, r);
  REQUIRE(p.ranked.size() >= 2);
  REQUIRE(p.ranked[1].recompute == PlanRecompute::selective);
  CHECK(p.explanation.find("the largest difference is its recomputed forwards") != std::string::npos);
  CHECK(p.explanation.find("faster kernels") == std::string::npos);
  // The gap (366 ms) is larger than the whole recomputed part (357 ms): the sentence says that part alone cannot
  // close it.
  CHECK(p.explanation.find("(more than all of its recomputed forwards: that part alone cannot close it)") !=
        std::string::npos);
}

TEST_CASE("plan: from a scenario at TP 1, options at TP > 1 run with sequence parallelism", "[plan]") {
  // Llama-3-8B at 128K on CP 16 (TP 1): the TP 2 options of a search shard their activations over TP as
  // Megatron-Bridge sets it, instead of inheriting the TP 1 scenario's sequence_parallel: false.
  const std::string path = std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml";
  const Scenario s = load_scenario(path);
  REQUIRE(s.parallel.tensor_model_parallel_size == 1);
  REQUIRE_FALSE(s.parallel.sequence_parallel);
  PlanRequest r;
  r.tp = {2};
  r.fixed = {PlanDimension::pp, PlanDimension::vp, PlanDimension::recompute, PlanDimension::micro_batch};
  const PlanResult p = plan(s, r);
  const auto o = std::find_if(p.ranked.begin(), p.ranked.end(),
                              [](const PlanOption& x) { return x.label.rfind("p2p TP2 PP1 ", 0) == 0; });
  REQUIRE(o != p.ranked.end());
  const std::vector<std::string> layout = {"parallel.tensor_model_parallel_size=2", "parallel.context_parallel_size=8",
                                           "parallel.cp_comm_type=p2p",
                                           "parallel.hierarchical_context_parallel_sizes=null"};
  std::vector<std::string> with_sp = layout, without_sp = layout;
  with_sp.push_back("parallel.sequence_parallel=true");
  const PlanOption sp = evaluate_scenario(load_scenario(path, with_sp));
  const PlanOption no_sp = evaluate_scenario(load_scenario(path, without_sp));
  CHECK(o->step.memory.activations_bytes == sp.step.memory.activations_bytes);
  CHECK(o->step.layer_forward_ps == sp.step.layer_forward_ps);
  CHECK(sp.step.memory.activations_bytes < no_sp.step.memory.activations_bytes);
}
