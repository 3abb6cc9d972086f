// FP8 recipes and FP8 parameters in the whole-step model: the current-scaling (tensorwise) kernels and TP amax
// reductions of the layer schedule, FP8 primary weights in memory and in the DP parameter all-gather, against hand
// computations on the small model of small_step_scenario.hpp; the loader's and importers' keys.
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "small_step_scenario.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/step/layer_builder.hpp"
#include "hcpsim/step/training_model.hpp"
#include "hcpsim/step/training_step.hpp"

using namespace hcpsim;
using hcpsim::test::small;
using hcpsim::test::step_of;

namespace {

struct Fp8Ops {
  int64_t count = 0, bytes = 0, amax_reductions = 0;
};

// The FP8 ops ("FP8 ..." labels) of CP rank 0 of a layer schedule in phase `ph`.
Fp8Ops fp8_ops(const Scenario& s, Phase ph) {
  const Schedule layer = build_layer_schedule(s, CpCommType::p2p);
  Fp8Ops out;
  for (const Op& op : layer.ranks.front().ops) {
    if (op.phase != ph || op.label.str().rfind("FP8 ", 0) != 0) continue;
    if (op.label.str().rfind("FP8 amax all-reduce", 0) == 0) {
      ++out.amax_reductions;
      continue;
    }
    ++out.count;
    out.bytes += op.bytes;
  }
  return out;
}

}  // namespace

TEST_CASE("fp8: current scaling adds an amax pass before each cast, as TE's quantize_impl runs it", "[step][fp8]") {
  // small(): t = 128 tokens per CP rank, h = 64, QKV width 4·16 + 2·(16 + 16) = 128, projection input 64,
  // fc2 input 256, fc1 output 512; bf16 (2 B).
  const Scenario delayed = small({"training.fp8=true"});
  const Scenario current = small({"training.fp8=true", "training.fp8_recipe=tensorwise"});
  // Delayed, forward: QKV and fc1 inputs after their norms: transposes 128·64·(1 + 1) B each; projection and fc2
  // inputs: cast-transposes 128·64·4 and 128·256·4 B.
  const Fp8Ops df = fp8_ops(delayed, Phase::forward);
  CHECK(df.count == 4);
  CHECK(df.bytes == 2 * 16384 + 32768 + 131072);
  // Current scaling, forward: the norm kernels give BF16 with the amax, so QKV and fc1 get full cast-transposes
  // (+128·64·2 B each) and a scale kernel; projection and fc2 inputs get an amax pass (128·64·2, 128·256·2 B) and a
  // scale kernel before their casts.
  const Fp8Ops cf = fp8_ops(current, Phase::forward);
  CHECK(cf.count == 4 + 6);
  CHECK(cf.bytes == df.bytes + 16384 + 16384 + 16384 + 65536);
  CHECK(cf.amax_reductions == 0);  // TP = 1
  // Backward: the four output-grad cast-transposes (fc2 and projection 128·64·4, fc1 128·512·4, QKV 128·128·4)
  // each get an amax pass (2 B per element) and a scale kernel.
  const Fp8Ops db = fp8_ops(delayed, Phase::backward), cb = fp8_ops(current, Phase::backward);
  CHECK(db.count == 4);
  CHECK(db.bytes == 32768 + 262144 + 32768 + 65536);
  CHECK(cb.count == 4 + 8);
  CHECK(cb.bytes == db.bytes + 16384 + 131072 + 16384 + 32768);
  // The extra kernels sit on the compute stream: the layer takes longer, the model FLOPs stay.
  const sim::StepResult rd = step_of(delayed), rc = step_of(current);
  CHECK(rc.layer_forward_ps > rd.layer_forward_ps);
  CHECK(rc.layer_backward_ps > rd.layer_backward_ps);
  CHECK(rc.model_flops == rd.model_flops);
  // Without FP8 the recipe changes nothing.
  CHECK(step_of(small({"training.fp8_recipe=tensorwise"})).step_ps == step_of(small()).step_ps);
}

TEST_CASE("fp8: with sequence parallelism current scaling reduces the amax over TP", "[step][fp8]") {
  // TE sets the TP group as the amax reduction group of column-parallel inputs (QKV, fc1) and of row-parallel
  // output grads (projection, fc2) under sequence parallelism: 2 in the forward, 2 in the backward, each a 4-byte
  // amax per rank (one all-gather message per peer at TP = 2).
  const std::vector<std::string> tp2{"parallel.tensor_model_parallel_size=2", "parallel.context_parallel_size=1",
                                     "parallel.sequence_parallel=true", "training.fp8=true"};
  std::vector<std::string> cs = tp2;
  cs.push_back("training.fp8_recipe=tensorwise");
  const Scenario current = small(cs), delayed = small(tp2);
  CHECK(fp8_ops(current, Phase::forward).amax_reductions == 2);
  CHECK(fp8_ops(current, Phase::backward).amax_reductions == 2);
  CHECK(fp8_ops(delayed, Phase::forward).amax_reductions == 0);
  const sim::StepResult rc = step_of(current), rd = step_of(delayed);
  for (Phase ph : {Phase::forward, Phase::backward}) {
    const auto c = rc.layer.message_totals(ph, sim::LinkLevel::intra_node);
    const auto d = rd.layer.message_totals(ph, sim::LinkLevel::intra_node);
    CHECK(c.count == d.count + 2 * 2);  // 2 reductions x 2 ranks, one message each
    CHECK(c.bytes == d.bytes + 2 * 2 * 4);
  }
}

TEST_CASE("fp8: fp8_param_gather keeps linear weights in FP8 and gathers them in FP8", "[step][fp8]") {
  // small(): 2 layers x 61440 linear weights (attention 12288 + MLP 49152), norms 128 per layer, embedding 65536
  // (tied), final norm 64: 188736 parameters per GPU, 122880 of them linear.
  const Scenario cached = small({"training.fp8=true"});
  const Scenario primary = small({"training.fp8=true", "training.fp8_param_gather=true"});
  const MemoryBreakdown mc = memory_per_gpu(cached, 4, 1, 0), mp = memory_per_gpu(primary, 4, 1, 0);
  REQUIRE(mc.parameters_per_gpu == 188736);
  CHECK(mc.weights_bytes == 188736.0 * 2);
  CHECK(mc.fp8_weight_copies_bytes == 122880.0 * 2);
  CHECK(mp.fp8_parameters_per_gpu == 122880);
  CHECK(mp.weights_bytes == (188736.0 - 122880) * 2 + 122880);  // BF16 rest + FP8 linear weights
  CHECK(mp.fp8_weight_copies_bytes == 122880);                 // their transposes
  CHECK(mc.total_bytes - mp.total_bytes == 122880.0 * 2);
  CHECK(mp.total_bytes == mp.weights_bytes + mp.fp8_weight_copies_bytes + mp.gradients_bytes + mp.optimizer_bytes +
                              mp.activations_bytes + mp.output_layer_activations_bytes + mp.cp_attention_buffers_bytes +
                              mp.framework_overhead_bytes);
  // The distributed optimizer's parameter all-gather moves (65856 · 2 + 122880) B instead of 188736 · 2 B.
  const sim::StepResult rc = step_of(cached), rp = step_of(primary);
  CHECK(rp.dp_param_gather_ps < rc.dp_param_gather_ps);
  CHECK(rp.dp_grad_reduce_ps == rc.dp_grad_reduce_ps);  // gradients stay in params_dtype
}

TEST_CASE("fp8: the loader refuses unknown or unmodelled recipes and FP8 parameters without FP8", "[step][fp8][config]") {
  auto error_of = [](const std::vector<std::string>& overrides) {
    try {
      small(overrides);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string mx = error_of({"training.fp8=true", "training.fp8_recipe=mxfp8"});
  CHECK(mx.find("training.fp8_recipe") != std::string::npos);
  CHECK(mx.find("not modelled") != std::string::npos);
  CHECK(mx.find("use delayed or tensorwise") != std::string::npos);
  CHECK(error_of({"training.fp8=true", "training.fp8_recipe=hybrid"}).find("unknown value 'hybrid'") != std::string::npos);
  const std::string no_fp8 = error_of({"training.fp8_param_gather=true"});
  CHECK(no_fp8.find("training.fp8_param_gather") != std::string::npos);
  CHECK(no_fp8.find("set training.fp8: true") != std::string::npos);
  const std::string no_dist =
      error_of({"training.fp8=true", "training.fp8_param_gather=true", "parallel.use_distributed_optimizer=false"});
  CHECK(no_dist.find("distributed optimizer") != std::string::npos);
  CHECK(error_of({"training.fp8=true", "training.fp8_recipe=tensorwise", "training.fp8_param_gather=true"}).empty());
}
