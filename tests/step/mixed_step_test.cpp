// A per-layer cp_comm_type mix composed into one step (compose_mixed_step) and Megatron's layer order over
// pipeline stages and model chunks (pipeline_layer_chunks), against hand computations.
#include <string>
#include <utility>
#include <vector>

#include "catch_compat.hpp"
#include "small_step_scenario.hpp"
#include "hcpsim/step/training_step.hpp"

using namespace hcpsim;
using hcpsim::test::small;
using hcpsim::test::step_of;
using Chunks = std::vector<std::vector<std::pair<int64_t, int64_t>>>;

TEST_CASE("mixed step: Megatron's interleaved layer order over stages and chunks", "[step][pipeline]") {
  // 8 layers, PP 2, V 2: chunk v of stage k holds layers (v·PP + k)·2 .. + 2.
  const Chunks even = sim::pipeline_layer_chunks(
      small({"model.num_layers=8", "parallel.pipeline_model_parallel_size=2",
             "parallel.virtual_pipeline_model_parallel_size=2", "model.global_batch_size=8"}));
  CHECK(even == Chunks{{{0, 2}, {4, 6}}, {{2, 4}, {6, 8}}});
  // 6 layers + embedding + loss over PP 2 x V 2: 2 "layers" per chunk; stage 0's first chunk gives one to the
  // embedding, stage 1's last one to the loss: [0,1) [1,3) | [3,5) [5,6).
  const Chunks account = sim::pipeline_layer_chunks(
      small({"model.num_layers=6", "parallel.pipeline_model_parallel_size=2",
             "parallel.virtual_pipeline_model_parallel_size=2", "parallel.account_for_embedding_in_pipeline_split=true",
             "parallel.account_for_loss_in_pipeline_split=true", "model.global_batch_size=8"}));
  CHECK(account == Chunks{{{0, 1}, {3, 5}}, {{1, 3}, {5, 6}}});
  // Explicit first/last stages, no VP: 1 | 2 | 2 | 1 over PP 4.
  const Chunks first_last = sim::pipeline_layer_chunks(
      small({"model.num_layers=6", "parallel.pipeline_model_parallel_size=4", "parallel.context_parallel_size=1",
             "parallel.decoder_first_pipeline_num_layers=1", "parallel.decoder_last_pipeline_num_layers=1",
             "model.global_batch_size=8"}));
  CHECK(first_last == Chunks{{{0, 1}}, {{1, 3}}, {{3, 5}}, {{5, 6}}});
}

TEST_CASE("mixed step: each layer runs with its own comm type", "[step]") {
  // small(): 2 layers on CP 2; layer 0 p2p, layer 1 a2a.
  const Scenario p2p = small({"parallel.cp_comm_type=p2p"}), a2a = small({"parallel.cp_comm_type=a2a"});
  const Scenario mix = small({"parallel.cp_comm_type=[p2p,a2a]"});
  const sim::StepResult rp = step_of(p2p), ra = step_of(a2a);
  const sim::StepResult m = sim::compose_mixed_step(mix, {rp, ra});
  CHECK(m.layer_mix == "1 p2p + 1 a2a");
  REQUIRE(m.stage_layers_ps.size() == 1);
  CHECK(m.stage_layers_ps[0] ==
        rp.layer_forward_ps + rp.layer_backward_ps + ra.layer_forward_ps + ra.layer_backward_ps);
  CHECK(m.stage_microbatch_ps == m.stage_layers_ps[0] + rp.output_layer_forward_ps + rp.output_layer_backward_ps);
  CHECK(m.step_ps > std::min(rp.step_ps, ra.step_ps));
  CHECK(m.step_ps < std::max(rp.step_ps, ra.step_ps));
  CHECK(m.model_flops == rp.model_flops);
  CHECK(m.memory.total_bytes == std::max(rp.memory.total_bytes, ra.memory.total_bytes));
  // The idle-time figures are one type's layer's, the one idling longest, so the split adds up (a max of each
  // figure over the types mixed the busiest GPU of one layer with the imbalance of another).
  const sim::StepResult& idlest = rp.layer_exposed_comm_ps >= ra.layer_exposed_comm_ps ? rp : ra;
  CHECK(m.layer_exposed_comm_ps == idlest.layer_exposed_comm_ps);
  CHECK(m.layer_critical_exposed_comm_ps == idlest.layer_critical_exposed_comm_ps);
  CHECK(m.layer_load_imbalance_ps == idlest.layer_load_imbalance_ps);
  CHECK(m.layer_exposed_comm_ps == m.layer_critical_exposed_comm_ps + m.layer_load_imbalance_ps);
  // A mix of one type is that type's step.
  const sim::StepResult same = sim::compose_mixed_step(small({"parallel.cp_comm_type=[p2p,p2p]"}), {rp});
  CHECK(same.step_ps == rp.step_ps);
  CHECK(same.executed_flops_per_gpu == rp.executed_flops_per_gpu);
}

TEST_CASE("mixed step: pipeline stages and block recompute sum their own layers", "[step][pipeline]") {
  // PP 2: stage 0 holds layer 0 (p2p), stage 1 layer 1 (a2a) and the output layer.
  const std::vector<std::string> pp2{"parallel.pipeline_model_parallel_size=2", "parallel.context_parallel_size=2"};
  auto with = [&](const std::string& types, std::vector<std::string> more = {}) {
    std::vector<std::string> o = pp2;
    o.push_back("parallel.cp_comm_type=" + types);
    for (auto& x : more) o.push_back(x);
    return small(o);
  };
  const sim::StepResult rp = step_of(with("p2p")), ra = step_of(with("a2a"));
  const sim::StepResult m = sim::compose_mixed_step(with("[p2p,a2a]"), {rp, ra});
  REQUIRE(m.stage_layers_ps.size() == 2);
  CHECK(m.stage_layers_ps[0] == rp.layer_forward_ps + rp.layer_backward_ps);
  CHECK(m.stage_layers_ps[1] == ra.layer_forward_ps + ra.layer_backward_ps);
  CHECK(m.stage_microbatch_ps ==
        std::max(m.stage_layers_ps[0], m.stage_layers_ps[1] + ra.output_layer_forward_ps + ra.output_layer_backward_ps) +
            2 * ra.pp_message_ps);
  // Block recompute of 0 layers per chunk: every layer runs its backward without the rerun.
  const std::vector<std::string> block{"training.recompute_granularity=full", "training.recompute_method=block",
                                       "training.recompute_num_layers=0"};
  const sim::StepResult bp = step_of(with("p2p", block)), ba = step_of(with("a2a", block));
  const sim::StepResult mb = sim::compose_mixed_step(with("[p2p,a2a]", block), {bp, ba});
  CHECK(mb.stage_layers_ps[0] == bp.layer_forward_ps + bp.layer_backward_no_recompute_ps);
  CHECK(mb.stage_layers_ps[1] == ba.layer_forward_ps + ba.layer_backward_no_recompute_ps);
}
