// Partial full recompute (training.recompute_method uniform | block, training.recompute_num_layers): memory and
// time of the whole-step model against hand closed forms on a small model.
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "small_step_scenario.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/step/training_model.hpp"
#include "hcpsim/step/training_step.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;

namespace {

// The step tests' small model (h = 64, ffn = 256 gated, H = 4, Hkv = 2, dk = dv = 16, S = 256, CP 2: t = 128
// tokens per GPU, bf16) with L = 4 layers.
Scenario small(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), "model.num_layers=4");
  return test::small(overrides);
}

using test::step_of;

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    small(overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// One layer input t·h·e = 128·64·2 B; one layer's full activations (training_step_test's closed form).
constexpr double kInput = 16384.0;
constexpr double kFull = 313344.0;

}  // namespace

TEST_CASE("step: partial recompute memory equals the closed form per method and N", "[step][recompute]") {
  const std::string full = "training.recompute_granularity=full";
  // PP 1: one micro-batch in flight. Saved inputs + the layers kept whole, plus the working layers rebuilt at once.
  CHECK(memory_per_gpu(small({}), 4, 1, 0).activations_bytes == 4 * kFull);
  CHECK(memory_per_gpu(small({full}), 4, 1, 0).activations_bytes == 4 * kInput + 1 * kFull);  // uniform, N = 1
  // uniform N = 2: two group inputs saved; a whole group (2 layers) rebuilt during its backward.
  CHECK(memory_per_gpu(small({full, "training.recompute_num_layers=2"}), 4, 1, 0).activations_bytes ==
        2 * kInput + 2 * kFull);
  CHECK(memory_per_gpu(small({full, "training.recompute_num_layers=4"}), 4, 1, 0).activations_bytes ==
        1 * kInput + 4 * kFull);
  // block N = 1: the first layer checkpointed, the other three keep everything. Backward frees those three before
  // it recomputes the first layer, whose rebuilt activations then take their place: no extra working layer (it
  // was counted once more, so that N = 15 of 16 layers needed more memory than N = 16).
  const std::string block = "training.recompute_method=block";
  CHECK(memory_per_gpu(small({full, block, "training.recompute_num_layers=1"}), 4, 1, 0).activations_bytes ==
        1 * kInput + 3 * kFull);
  CHECK(memory_per_gpu(small({full, block, "training.recompute_num_layers=3"}), 4, 1, 0).activations_bytes ==
        3 * kInput + 1 * kFull);
  // block N = L: every layer checkpointed, nothing whole to free: one layer rebuilt at a time on top of the inputs.
  CHECK(memory_per_gpu(small({full, block, "training.recompute_num_layers=4"}), 4, 1, 0).activations_bytes ==
        4 * kInput + 1 * kFull);
  // block N = 0 recomputes nothing: the memory of no recompute.
  CHECK(memory_per_gpu(small({full, block, "training.recompute_num_layers=0"}), 4, 1, 0).activations_bytes ==
        4 * kFull);
  // recompute_plan per chunk: PP 2 × V 2 over 8 layers = 2 chunks of 2 layers per stage; block N = 1 → 2 layers,
  // each chunk keeping one whole (no working layer); N = 2 checkpoints whole chunks (one working layer).
  const Scenario v2 = small({full, block, "training.recompute_num_layers=1", "model.num_layers=8",
                             "parallel.pipeline_model_parallel_size=2", "parallel.virtual_pipeline_model_parallel_size=2",
                             "parallel.context_parallel_size=1"});
  const RecomputePlan p = recompute_plan(v2, 4);
  CHECK(p.recomputed_layers == 2);
  CHECK(p.saved_inputs == 2);
  CHECK(p.full_layers == 2);
  CHECK(p.working_layers == 0);
  const RecomputePlan p2 = recompute_plan(small({full, block, "training.recompute_num_layers=2", "model.num_layers=8",
                                                 "parallel.pipeline_model_parallel_size=2",
                                                 "parallel.virtual_pipeline_model_parallel_size=2",
                                                 "parallel.context_parallel_size=1"}),
                                          4);
  CHECK(p2.saved_inputs == 4);
  CHECK(p2.full_layers == 0);
  CHECK(p2.working_layers == 1);
}

TEST_CASE("step: block recompute reruns the forward of N layers per stage, uniform of every layer",
          "[step][recompute]") {
  const std::string full = "training.recompute_granularity=full";
  const StepResult none = step_of(small({})), every = step_of(small({full}));
  const TimePs f = every.layer_forward_ps, b_rec = every.layer_backward_ps, b_plain = none.layer_backward_ps;
  REQUIRE(none.layer_forward_ps == f);
  // PP 1: the one stage also runs the output layer and loss; no pipeline message.
  const TimePs out = every.output_layer_forward_ps + every.output_layer_backward_ps;
  REQUIRE(every.pp_message_ps == 0);
  REQUIRE(b_rec > b_plain);
  // uniform: every layer recomputed whatever N, so the time is that of N = 1.
  const StepResult u2 = step_of(small({full, "training.recompute_num_layers=2"}));
  CHECK(u2.stage_microbatch_ps == every.stage_microbatch_ps);
  CHECK(u2.stage_microbatch_ps == 4 * (f + b_rec) + out);
  // block N = 1 of 4 layers (PP 1, no pipeline message): one layer pays the rerun, three the plain backward.
  const StepResult b1 = step_of(small({full, "training.recompute_method=block", "training.recompute_num_layers=1"}));
  CHECK(b1.stage_recomputed_layers == std::vector<int64_t>{1});
  CHECK(b1.layer_backward_no_recompute_ps == b_plain);
  CHECK(b1.stage_microbatch_ps == 1 * (f + b_rec) + 3 * (f + b_plain) + out);
  CHECK(b1.stage_microbatch_ps < every.stage_microbatch_ps);
  CHECK(b1.stage_microbatch_ps > none.stage_microbatch_ps);
  // Executed FLOPs: one recomputed layer, three plain ones.
  const double per_gpu = 2.0;  // TP 1 × CP 2 ranks share a layer's FLOPs
  const double expected = static_cast<double>(b1.num_microbatches) *
                          ((every.layer.phase_flops(Phase::forward) + every.layer.phase_flops(Phase::backward)) / per_gpu +
                           3 * b1.layer_no_recompute_flops / per_gpu) +
                          (every.executed_flops_per_gpu - static_cast<double>(every.num_microbatches) * 4 *
                                                              (every.layer.phase_flops(Phase::forward) +
                                                               every.layer.phase_flops(Phase::backward)) /
                                                              per_gpu);
  CHECK(b1.executed_flops_per_gpu == Approx(expected).epsilon(1e-12));
}

TEST_CASE("step: recompute_method and recompute_num_layers are checked as Megatron checks them", "[step][recompute]") {
  CHECK(error_of({"training.recompute_method=block"}).find(
            "training.recompute_method: recompute_method / recompute_num_layers apply to recompute_granularity full "
            "only, but it is none") != std::string::npos);
  CHECK(error_of({"training.recompute_granularity=selective", "training.recompute_num_layers=2"})
            .find("training.recompute_num_layers:") != std::string::npos);
  CHECK(error_of({"training.recompute_granularity=full", "training.recompute_num_layers=5"})
            .find("5 is outside 1 .. 4") != std::string::npos);
  CHECK(error_of({"training.recompute_granularity=full", "training.recompute_num_layers=0"})
            .find("0 is outside 1 .. 4") != std::string::npos);
  CHECK(error_of({"training.recompute_granularity=full", "training.recompute_method=block",
                  "training.recompute_num_layers=0"})
            .empty());
  CHECK(error_of({"training.recompute_method=some"}).find("use uniform or block") != std::string::npos);
}

TEST_CASE("step: full recompute without recompute_num_layers warns that Megatron-Core refuses it; null unsets a key",
          "[step][recompute]") {
  auto warnings = [](const std::vector<std::string>& overrides) {
    return validate_scenario(small(overrides), ValidationScope::placement).warnings;
  };
  auto has_warning = [](const std::vector<std::string>& w) {
    return std::any_of(w.begin(), w.end(), [](const std::string& x) {
      return x.find("recompute_granularity full without recompute_num_layers: simulated as recompute_method uniform "
                    "with recompute_num_layers 1") == 0 &&
             x.find("Megatron-Core raises unless both are set") != std::string::npos;
    });
  };
  CHECK(has_warning(warnings({"training.recompute_granularity=full"})));
  CHECK(!has_warning(warnings({"training.recompute_granularity=full", "training.recompute_method=uniform",
                               "training.recompute_num_layers=1"})));
  CHECK(!has_warning(warnings({"training.recompute_granularity=selective"})));
  // Uniform over groups of one layer is what the shorthand simulates: the same step either way.
  const auto shorthand = step_of(small({"training.recompute_granularity=full"}));
  const auto explicit_keys = step_of(small({"training.recompute_granularity=full", "training.recompute_method=uniform",
                                            "training.recompute_num_layers=1"}));
  CHECK(shorthand.step_ps == explicit_keys.step_ps);
  CHECK(shorthand.memory.activations_bytes == explicit_keys.memory.activations_bytes);
  // null (a Bridge dump's spelling) leaves a key unset, so a scenario that sets both can be switched to selective.
  const Scenario s = small({"training.recompute_granularity=selective", "training.recompute_method=null",
                            "training.recompute_num_layers=null"});
  CHECK(!s.training.recompute_num_layers);
  CHECK(error_of({"training.recompute_granularity=selective", "training.recompute_method=block"})
            .find("(on the command line: training.recompute_method=null training.recompute_num_layers=null)") !=
        std::string::npos);
}

TEST_CASE("step: block recompute of 0 layers costs what no recompute costs", "[step][recompute]") {
  // recompute_num_layers 0 with method block reruns no layer: it was charged the full recompute's backward for
  // every layer (time and executed FLOPs of uniform full recompute) while its memory was the no-recompute one's.
  const std::string full = "training.recompute_granularity=full", block = "training.recompute_method=block";
  const StepResult none = step_of(small({}));
  const StepResult zero = step_of(small({full, block, "training.recompute_num_layers=0"}));
  const StepResult all = step_of(small({full, block, "training.recompute_num_layers=4"}));
  CHECK(zero.stage_microbatch_ps == none.stage_microbatch_ps);
  CHECK(zero.step_ps == none.step_ps);
  CHECK(zero.executed_flops_per_gpu == none.executed_flops_per_gpu);
  CHECK(zero.memory.activations_bytes == none.memory.activations_bytes);
  CHECK(all.stage_microbatch_ps > none.stage_microbatch_ps);  // not vacuous: recomputing costs time
  CHECK(all.executed_flops_per_gpu > none.executed_flops_per_gpu);
}
