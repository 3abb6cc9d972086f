// Whole training step: parameter count, model FLOPs, memory model, layer schedule (TP collectives, recompute,
// the ordering contract).
#include <cmath>
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "small_step_scenario.hpp"
#include "death_test.hpp"
#include "test_util.hpp"
#include "hcpsim/step/layer_builder.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/core/schedule_hazards.hpp"
#include "hcpsim/step/training_model.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/sim/collective_model.hpp"
#include "hcpsim/sim/cost_model.hpp"
#include "hcpsim/step/training_step.hpp"
#include "hcpsim/oracles/cpu_executor.hpp"
#include "hcpsim/gpu/execution_plan.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;
using hcpsim::test::small;
using hcpsim::test::step_of;


TEST_CASE("step: parameter count of a small model equals the closed form", "[step]") {
  const ParameterCounts p = parameter_counts(small());
  CHECK(p.padded_vocab == 1024);                         // 1000 rounded up to a multiple of 128
  CHECK(p.attention_per_layer == 64.0 * (4 * 16 + 2 * 32) + 4 * 16 * 64);  // 12288
  CHECK(p.mlp_per_layer == 3.0 * 64 * 256);              // 49152 (gated: three GEMMs)
  CHECK(p.norms_per_layer == 128);
  CHECK(p.embedding == 1024.0 * 64);
  CHECK(p.output_layer == 0);                            // tied
  CHECK(p.total == 188736);                              // 2·61568 + 65536 + 64
  const ParameterCounts untied = parameter_counts(small({"model.untie_embeddings_and_output_weights=true"}));
  CHECK(untied.total == 188736 + 65536);
  CHECK(padded_vocab_size(128256, 8) == 129024);         // 128256 → multiple of 1024
}

TEST_CASE("step: a model without vocab_size names the key", "[step]") {
  Scenario s = small({"model.vocab_size=null"});
  try {
    parameter_counts(s);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("model.vocab_size") != std::string::npos);
  }
}

TEST_CASE("step: Megatron model FLOPs in both conventions match a hand computation", "[step]") {
  const Scenario s = small();
  // 12·B·s·L·h² = 12·4·256·2·4096 = 100663296; bracket: (1 + 2/4 + f·256/64)·1 + (256/64)·1.5 + 1024/(2·2·64).
  CHECK(megatron_model_flops(s, 4, FlopsConvention::megatron_full_attention) == 100663296.0 * 15.5);
  CHECK(megatron_model_flops(s, 4, FlopsConvention::megatron_causal) == 100663296.0 * 13.5);
  // The projections and MLP term equals 6 × the GEMM FLOPs per token: 2·(QKV 64·128 + proj 64·64 + MLP 3·64·256).
  const double per_token_gemm = 2.0 * (64 * 128 + 64 * 64 + 3 * 64 * 256);
  const Scenario no_attn = small({"model.attn_mask_type=causal"});
  const double attention_causal = 12.0 * 4 * 256 * 2 * 4096 * (0.5 * 256 / 64);
  const double logits = 6.0 * 4 * 256 * 64 * 1024;
  CHECK(megatron_model_flops(no_attn, 4, FlopsConvention::megatron_causal) ==
        Approx(6.0 * 4 * 256 * 2 * per_token_gemm / 2 + attention_causal + logits).epsilon(1e-12));
}

TEST_CASE("step: model FLOPs of packed sequences count each sequence's own attention", "[step][thd]") {
  // Lengths 100 and 28 (multiples of 2·cp = 4, no padding): tokens 128, Σ L² = 10000 + 784 = 10784.
  // 12·B·L·h² = 12·4·2·4096 = 393216; bracket: 128·((1 + 2/4)·1 + (256/64)·1.5 + 1024/(2·2·64)) + f·10784/64.
  const Scenario s = small({"model.qkv_format=thd", "model.packed_sequence_lengths=[100, 28]", "model.seq_length=128"});
  CHECK(megatron_model_flops(s, 4, FlopsConvention::megatron_causal) == Approx(393216.0 * (128 * 11.5 + 0.5 * 10784 / 64.0)));
  CHECK(megatron_model_flops(s, 4, FlopsConvention::megatron_full_attention) ==
        Approx(393216.0 * (128 * 11.5 + 10784 / 64.0)));
  // Megatron's own formula on the packed length would count 128² = 16384 pairs of attention, more than Σ L².
  const Scenario packed_as_one = small({"model.seq_length=128"});
  CHECK(megatron_model_flops(packed_as_one, 4, FlopsConvention::megatron_causal) >
        megatron_model_flops(s, 4, FlopsConvention::megatron_causal));
}

TEST_CASE("step: memory per GPU of a small model equals the closed form", "[step]") {
  const Scenario s = small();
  const MemoryBreakdown m = memory_per_gpu(s, 4, 1, 1000);
  CHECK(m.parameters_per_gpu == 188736);
  CHECK(m.weights_bytes == 188736.0 * 2);
  CHECK(m.gradients_bytes == 188736.0 * 4);
  CHECK(m.optimizer_bytes == 188736.0 * 12 / 8);  // distributed optimizer over DP·CP = 4·2
  // t = 128 tokens per GPU: attention 2·16384 + 32768 (QKV) + 16384 (out) + 2048 (lse); MLP 2·16384 + 131072 + 65536.
  CHECK(m.activations_per_layer_bytes == 83968 + 229376);
  CHECK(m.activations_bytes == 2.0 * 313344);
  CHECK(m.output_layer_activations_bytes == 128.0 * 1024 * (2 + 4));
  CHECK(m.cp_attention_buffers_bytes == 1000);
  CHECK(m.total_bytes == 377472.0 + 754944 + 283104 + 626688 + 786432 + 1000 + 3e9);
  CHECK(m.fits);
  const MemoryBreakdown plain = memory_per_gpu(small({"parallel.use_distributed_optimizer=false"}), 4, 1, 0);
  CHECK(plain.optimizer_bytes == 188736.0 * 12);  // 18 bytes / parameter in all without sharding
  // Sequence parallelism divides the norm regions by TP; TP divides everything else.
  const Scenario tp2 = small({"parallel.tensor_model_parallel_size=2", "parallel.sequence_parallel=true"});
  CHECK(activation_bytes_per_layer(tp2) == 313344.0 / 2);
  const Scenario tp2_nosp = small({"parallel.tensor_model_parallel_size=2"});
  CHECK(activation_bytes_per_layer(tp2_nosp) == 313344.0 / 2 + 4 * 16384 / 2);
  // Pipeline: the worst stage is reported. Without CP a layer saves 2 × 313344 = 626688 B (256 tokens). PP 2, one
  // layer per stage, m = 4: the first stage holds min(PP, m) = 2 micro-batches (1253376 B), the last one micro-batch
  // plus the logits, 256 tokens × 1024 (padded vocab) × (2 + 4) B = 1572864 B, so the last stage is the worse.
  const Scenario pp2 = small({"parallel.pipeline_model_parallel_size=2", "parallel.context_parallel_size=1",
                              "model.global_batch_size=16", "parallel.virtual_pipeline_model_parallel_size=1"});
  const MemoryBreakdown last = memory_per_gpu(pp2, 4, 4, 0);
  CHECK(last.in_flight_microbatches == 1);
  CHECK(last.output_layer_activations_bytes == 256.0 * 1024 * 6);
  CHECK(last.activations_bytes == 626688.0);
  // PP 4 over 8 layers (2 per stage), m = 4: the first stage's 4 × 2 × 626688 = 5013504 B of activations outweigh
  // the last stage's 2 × 626688 + 1572864 = 2826240 B, so the first stage is reported and holds no logits.
  const Scenario pp4 = small({"parallel.pipeline_model_parallel_size=4", "parallel.context_parallel_size=1",
                              "model.num_layers=8", "model.global_batch_size=16"});
  const MemoryBreakdown first = memory_per_gpu(pp4, 4, 4, 0);
  CHECK(first.in_flight_microbatches == 4);
  CHECK(first.output_layer_activations_bytes == 0);
  CHECK(first.activations_bytes == 4 * 2 * 626688.0);
  // Interleaving (V = 2): the first stage warms up (PP − 1)·2 + (V − 1)·PP = 10 chunk micro-batches, so 11 chunks
  // of 1/V of the stage are in flight: 5.5 micro-batches' worth (= PP + (PP − 1)/V) with m = 8. Megatron caps the
  // warm-up at m·V chunks: with m = 4 all 8 chunks, 4 micro-batches' worth.
  const Scenario pp4v2 = small({"parallel.pipeline_model_parallel_size=4", "parallel.context_parallel_size=1",
                                "model.num_layers=8", "model.global_batch_size=16",
                                "parallel.virtual_pipeline_model_parallel_size=2"});
  CHECK(memory_per_gpu(pp4v2, 4, 8, 0).in_flight_microbatches == 5.5);
  CHECK(memory_per_gpu(pp4v2, 4, 4, 0).in_flight_microbatches == 4);
  // A middle stage: PP 4, V 1, decoder_first_pipeline_num_layers 1 and last 1 over 8 layers: stages 1, 3, 3, 1.
  // Stage 1 holds PP − 1 = 3 micro-batches of 3 layers (9 layer-activations) against stage 0's 4 × 1: stage 1.
  const Scenario uneven = small({"parallel.pipeline_model_parallel_size=4", "parallel.context_parallel_size=1",
                                 "model.num_layers=8", "model.global_batch_size=16",
                                 "parallel.decoder_first_pipeline_num_layers=1",
                                 "parallel.decoder_last_pipeline_num_layers=1"});
  const MemoryBreakdown mid = memory_per_gpu(uneven, 4, 4, 0);
  CHECK(mid.pipeline_stage == 1);
  CHECK(mid.stage_layers == 3);
  CHECK(mid.in_flight_microbatches == 3);
  CHECK(mid.activations_bytes == 3 * 3 * 626688.0);
}

TEST_CASE("step: training.fp8 stores the linear layers' inputs in FP8 and caches FP8 weight copies", "[step][fp8]") {
  // small(), t = 128: the four GEMM inputs (QKV 8192, projection 8192, fc1 8192, fc2 32768 elements) drop from 2 B
  // to 1 B: 313344 − (8192 + 8192 + 8192 + 32768) = 256000 B per layer.
  const Scenario fp8 = small({"training.fp8=true"});
  CHECK(activation_bytes_per_layer(fp8) == 313344.0 - 57344);
  const MemoryBreakdown m = memory_per_gpu(fp8, 4, 1, 0);
  // The FP8 weight and its transpose: 2 B per linear-layer weight, 2 layers x 61440 (attention 12288 + MLP 49152).
  CHECK(m.fp8_weight_copies_bytes == 2 * 61440.0 * 2);
  CHECK(m.total_bytes == m.weights_bytes + m.fp8_weight_copies_bytes + m.gradients_bytes + m.optimizer_bytes +
                             m.activations_bytes + m.output_layer_activations_bytes + m.cp_attention_buffers_bytes +
                             m.framework_overhead_bytes);
  CHECK(memory_per_gpu(small(), 4, 1, 0).fp8_weight_copies_bytes == 0);
}

TEST_CASE("step: full recompute lowers activation memory and adds the layer's forward FLOPs", "[step]") {
  const Scenario none = small();
  const Scenario full = small({"training.recompute_granularity=full"});
  const Scenario selective = small({"training.recompute_granularity=selective"});
  CHECK(activation_bytes_per_layer(full) == 128.0 * 64 * 2);  // only the layer input
  const MemoryBreakdown mn = memory_per_gpu(none, 4, 1, 0), mf = memory_per_gpu(full, 4, 1, 0);
  CHECK(mf.activations_bytes == 2 * 16384.0 + 313344);  // two layer inputs + the layer being recomputed
  CHECK(mf.activations_bytes < mn.activations_bytes);

  const Schedule ln = build_layer_schedule(none, CpCommType::p2p);
  const Schedule lf = build_layer_schedule(full, CpCommType::p2p);
  const Schedule ls = build_layer_schedule(selective, CpCommType::p2p);
  CHECK(lf.total_flops(Phase::forward) == ln.total_flops(Phase::forward));
  CHECK(lf.total_flops(Phase::backward) == Approx(ln.total_flops(Phase::backward) + ln.total_flops(Phase::forward)).epsilon(1e-14));
  // Selective recompute reruns only the CP attention forward.
  const Schedule attn = build_schedule(CpCommType::p2p, cp_layout_for(none, CpCommType::p2p), attention_shape(none));
  CHECK(ls.total_flops(Phase::backward) ==
        Approx(ln.total_flops(Phase::backward) + attn.total_flops(Phase::forward)).epsilon(1e-14));
  // The layer's forward GEMM FLOPs per CP rank: 2·t·(64·128 + 64·64 + 3·64·256), t = 128 tokens, 2 ranks.
  const double gemm_fwd = 2 * 2.0 * 128 * (64 * 128 + 64 * 64 + 3 * 64 * 256);
  CHECK(ln.total_flops(Phase::forward) == Approx(gemm_fwd + attn.total_flops(Phase::forward)).epsilon(1e-14));
  CHECK(ln.total_flops(Phase::backward) == Approx(2 * gemm_fwd + attn.total_flops(Phase::backward)).epsilon(1e-14));

  const StepResult rn = step_of(none), rf = step_of(full);
  CHECK(rf.layer_backward_ps > rn.layer_backward_ps);
  CHECK(rf.memory.activations_bytes < rn.memory.activations_bytes);
  CHECK(rf.model_flops == rn.model_flops);  // model FLOPs do not count recomputation
}

TEST_CASE("step: a TP=2 layer on one node moves exactly the expected collective bytes", "[step]") {
  // t·h = 256·64 = 16384 elements of 2 bytes per TP region. An all-reduce (reduce-scatter + all-gather over 2
  // GPUs) sends 4 messages of 16384 B; with sequence parallelism an all-gather or a reduce-scatter sends 2.
  // Forward: 2 all-reduces, or with SP 2 all-gathers + 2 reduce-scatters: 8 messages. Backward without SP: 2
  // all-reduces (8); with SP 2 all-gathers of output grads, 2 reduce-scatters of input grads and the 2 all-gathers
  // of the QKV and fc1 inputs for their wgrad GEMMs: 12. TP communication overlap (SP only) moves the same bytes
  // as ring exchanges of t/TP·h elements: one step per GEMM for TP = 2.
  for (const char* mode : {"none", "sp", "overlap"}) {
    const std::string m = mode;
    const Scenario s = small({"parallel.tensor_model_parallel_size=2", "parallel.context_parallel_size=1",
                              std::string("parallel.sequence_parallel=") + (m == "none" ? "false" : "true"),
                              std::string("parallel.tp_comm_overlap=") + (m == "overlap" ? "true" : "false")});
    const StepResult r = step_of(s);
    REQUIRE(r.layer.ranks.size() == 2);
    for (Phase ph : {Phase::forward, Phase::backward}) {
      const int64_t n = ph == Phase::backward && m != "none" ? 12 : 8;
      CHECK(r.layer.message_totals(ph, LinkLevel::intra_node).count == n);
      CHECK(r.layer.message_totals(ph, LinkLevel::intra_node).bytes == n * 16384);
      CHECK(r.layer.message_totals(ph, LinkLevel::inter_node).count == 0);
    }
  }
  // TP = 1: no TP collective at all; only the CP ring's messages.
  const StepResult r1 = step_of(small());
  const Schedule attn = build_schedule(CpCommType::p2p, cp_layout_for(small(), CpCommType::p2p), attention_shape(small()));
  int64_t attn_msgs = 0;
  for (const auto& rank : attn.ranks)
    for (const auto& op : rank.ops)
      if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) attn_msgs += sr->send_peer >= 0 ? 1 : 0;
  CHECK(r1.layer.message_totals(Phase::forward, LinkLevel::intra_node).count +
            r1.layer.message_totals(Phase::backward, LinkLevel::intra_node).count ==
        attn_msgs);
}

TEST_CASE("step: TP communication overlap splits GEMMs into ring-exchange chunks and hides the collectives",
          "[step][tp_overlap]") {
  const std::vector<std::string> base{"parallel.tensor_model_parallel_size=4", "parallel.context_parallel_size=1",
                                      "parallel.sequence_parallel=true", "model.seq_length=8192",
                                      "model.num_attention_heads=32", "model.num_query_groups=8",
                                      "model.kv_channels=128", "model.hidden_size=4096", "model.ffn_hidden_size=14336"};
  auto with = [&](bool overlap) {
    auto o = base;
    o.push_back(std::string("parallel.tp_comm_overlap=") + (overlap ? "true" : "false"));
    return small(o);
  };
  // Llama3-8B's layer at 8192 tokens (the small model's GEMMs are too short to hide anything). QKV projection:
  // TP 4 chunks of t/TP = 2048 rows, 3 ring steps of 2048·4096 elements (2 B) between them.
  const Schedule l = build_layer_schedule(with(true), CpCommType::p2p);
  int64_t chunks = 0, steps = 0;
  for (const auto& op : l.ranks[0].ops) {
    if (op.label.str().rfind("QKV projection (chunk ", 0) == 0) {
      ++chunks;
      CHECK(std::get<GemmOp>(op.payload).m == 2048);
    }
    if (op.label.str().rfind("QKV projection ring exchange ", 0) == 0) {
      ++steps;
      CHECK(op.bytes == 2048 * 4096 * 2);
      const auto& sr = std::get<SendRecvOp>(op.payload);
      CHECK(sr.send_peer == 1);  // TP rank 0 sends to TP rank 1 and receives from TP rank 3
      CHECK(sr.recv_peer == 3);
    }
  }
  CHECK(chunks == 4);
  CHECK(steps == 3);
  // With FP8, TE casts before it gathers (layernorm_linear.py: the norm writes FP8; base.py
  // grad_output_preprocess: the output grad is cast, then gathered): the ring exchanges that gather move
  // 1 B per value, the ring reduce-scatters of the GEMM outputs keep 2 B.
  auto fp8 = base;
  fp8.push_back("parallel.tp_comm_overlap=true");
  fp8.push_back("training.fp8=true");
  const Schedule l8 = build_layer_schedule(small(fp8), CpCommType::p2p);
  int64_t gathers = 0, reduces = 0;
  for (const auto& op : l8.ranks[0].ops) {
    if (op.kind() != OpKind::send_recv) continue;
    if (op.label.str().find("ring exchange") != std::string::npos) {
      ++gathers;
      CHECK(op.bytes == 2048 * 4096 * 1);
    } else if (op.label.str().find("ring reduce-scatter") != std::string::npos) {
      ++reduces;
      CHECK(op.bytes == 2048 * 4096 * 2);
    }
  }
  CHECK(gathers == 4 * 3);  // QKV and fc1 forward, projection and fc2 dgrad: 3 steps each
  CHECK(reduces == 2 * 3);  // projection and fc2 forward
  // Without the overlap, NCCL's SP all-gathers move the same FP8 bytes: TP 2 on the small model, t·h = 16384
  // values: each all-gather sends one message of 8192 B (FP8) where a reduce-scatter sends 16384 B (BF16).
  const StepResult sp8 = step_of(small({"parallel.tensor_model_parallel_size=2", "parallel.context_parallel_size=1",
                                        "parallel.sequence_parallel=true", "training.fp8=true"}));
  const StepResult sp16 = step_of(small({"parallel.tensor_model_parallel_size=2", "parallel.context_parallel_size=1",
                                         "parallel.sequence_parallel=true"}));
  // Forward: 2 all-gathers and 2 reduce-scatters of 2 messages each (delayed scaling, the default recipe, adds no
  // amax all-reduce); FP8 halves the gathers' bytes only.
  const MessageTotals f8 = sp8.layer.message_totals(Phase::forward, LinkLevel::intra_node);
  const MessageTotals f16 = sp16.layer.message_totals(Phase::forward, LinkLevel::intra_node);
  CHECK(f8.count == f16.count);
  CHECK(f16.bytes == 8 * 16384);
  CHECK(f8.bytes == 4 * 8192 + 4 * 16384);
  // The layer is faster with the overlap and exposes less communication.
  const StepResult on = step_of(with(true)), off = step_of(with(false));
  CHECK(on.layer_forward_ps < off.layer_forward_ps);
  CHECK(on.layer_exposed_comm_ps < off.layer_exposed_comm_ps);
  // Megatron's rule: the overlap needs sequence parallelism.
  auto o = base;
  o[2] = "parallel.sequence_parallel=false";
  o.push_back("parallel.tp_comm_overlap=true");
  try {
    small(o);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("parallel.tp_comm_overlap: TP communication overlap needs sequence_parallel") !=
          std::string::npos);
  }
}

TEST_CASE("step: the iteration composes layers, micro-batches, pipeline bubble and DP collectives", "[step]") {
  const Scenario s = small();
  const StepResult r = step_of(s);
  CHECK(r.world_size == 8);
  CHECK(r.data_parallel_size == 4);
  CHECK(r.num_microbatches == 1);
  CHECK(r.layers_per_stage == 2);
  CHECK(r.stage_microbatch_ps == 2 * (r.layer_forward_ps + r.layer_backward_ps) + r.output_layer_forward_ps +
                                     r.output_layer_backward_ps);
  CHECK(r.pipeline_ps == r.stage_microbatch_ps);
  CHECK(r.step_ps == r.pipeline_ps + r.dp_grad_reduce_exposed_ps + r.dp_param_gather_exposed_ps + r.optimizer_ps);
  // DP·CP = 8 GPUs of one node: ring reduce-scatter of 4-byte gradients over NVLink.
  CHECK(r.dp_grad_reduce_ps == collective_estimate(CollectiveOp::reduce_scatter, 188736.0 * 4, std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, s.cluster).ps());
  CHECK(r.model_tflops_per_gpu == Approx(r.model_flops / (static_cast<double>(r.step_ps) * 1e-12 * 8) / 1e12));
  CHECK(r.mfu == Approx(r.model_tflops_per_gpu * 1e12 / s.cluster.gpu.peak_bf16_flops_per_s));
  // Pipeline parallelism: (m + (PP−1)/V) stage times, plus the activation messages between stages.
  const Scenario pp = small({"parallel.pipeline_model_parallel_size=2", "model.global_batch_size=8"});
  const StepResult rp = step_of(pp);
  CHECK(rp.num_microbatches == 4);  // DP = 8/(2·2) = 2
  CHECK(rp.pipeline_bubble_fraction == 0.25);
  CHECK(rp.pipeline_ps == static_cast<TimePs>(static_cast<double>(rp.stage_microbatch_ps) * 5 + 0.5));
  // Determinism: the same scenario gives the same numbers.
  const StepResult again = step_of(s);
  CHECK(again.step_ps == r.step_ps);
  CHECK(again.memory.total_bytes == r.memory.total_bytes);
}

TEST_CASE("step: scenario keys of the whole step load and their rules hold", "[step]") {
  const Scenario s = small({"training.fp8=true", "training.framework_overhead_GB=2.5",
                            "parallel.virtual_pipeline_model_parallel_size=null"});
  CHECK(s.training.fp8);
  CHECK(s.training.framework_overhead_bytes == 2.5e9);
  CHECK(s.model.gated_linear_unit);
  auto error_of = [](const std::vector<std::string>& o) {
    try {
      small(o);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of({"model.global_batch_size=6"}).find("model.global_batch_size") != std::string::npos);
  CHECK(error_of({"model.global_batch_size=6"}).find("multiple of 4") != std::string::npos);
  CHECK(error_of({"training.fp8=true", "cluster.preset=dgx-a100"}).find("training.fp8") != std::string::npos);
  CHECK(error_of({"parallel.virtual_pipeline_model_parallel_size=2"}).find("pipeline_model_parallel_size > 1") !=
        std::string::npos);
  CHECK(error_of({"training.recompute_granularity=some"}).find("none, selective, full") != std::string::npos);
  CHECK(error_of({"parallel.pipeline_model_parallel_size=4", "parallel.context_parallel_size=1"})
            .find("not divisible by pipeline_model_parallel_size") != std::string::npos);
  CHECK(error_of({"training.recompute"}).find("key.path=value") != std::string::npos);
}

TEST_CASE("step: FP8 GEMMs run at the FP8 peak; model FLOPs do not change", "[step]") {
  // Large enough MLP GEMMs to be compute-bound (t = 4096 tokens, h = 2048, ffn = 8192).
  const std::vector<std::string> big{"model.hidden_size=2048", "model.ffn_hidden_size=8192", "model.seq_length=8192"};
  std::vector<std::string> big_fp8 = big;
  big_fp8.push_back("training.fp8=true");
  const StepResult bf16 = step_of(small(big));
  const StepResult fp8 = step_of(small(big_fp8));
  CHECK(fp8.layer_forward_ps < bf16.layer_forward_ps);
  CHECK(fp8.model_flops == bf16.model_flops);
  const Schedule l8 = build_layer_schedule(small({"training.fp8=true"}), CpCommType::p2p);
  int64_t fp8_gemms = 0, gemms = 0;
  for (const auto& op : l8.ranks[0].ops)
    if (const auto* g = std::get_if<GemmOp>(&op.payload)) {
      ++gemms;
      fp8_gemms += g->fp8 ? 1 : 0;
    }
  CHECK(gemms == 12);  // 4 forward (QKV, projection, fc1, fc2) + 8 backward (dgrad and wgrad of each)
  CHECK(fp8_gemms == gemms);
  // gemm_ps: launch + max(flops / (peak · efficiency · shape factor), bytes / HBM).
  const GpuSpec& g = small().cluster.gpu;
  const double flops = 2.0 * 4096 * 4096 * 4096;
  CHECK(gemm_ps(GemmOp{4096, 4096, 4096, false}, 0, Dtype::bf16, g) ==
        seconds_to_ps(g.kernel_launch_overhead_s +
                      flops / (g.peak_bf16_flops_per_s * g.gemm_efficiency_bf16 *
                               gemm_shape_factor(4096, 4096, 4096, false, g))));
  CHECK(gemm_ps(GemmOp{4096, 4096, 4096, true}, 0, Dtype::bf16, g) ==
        seconds_to_ps(g.kernel_launch_overhead_s +
                      flops / (g.peak_fp8_flops_per_s * g.gemm_efficiency_fp8 *
                               gemm_shape_factor(4096, 4096, 4096, true, g))));
}

TEST_CASE("step: FP8 dgrad and wgrad GEMMs run with TE's split accumulator, forward GEMMs with fast accumulation",
          "[step][fp8][gemm]") {
  // TE pytorch/module/base.py: _2X_ACC_FPROP = False, _2X_ACC_DGRAD = _2X_ACC_WGRAD = True. Full recompute adds
  // a second forward in the backward phase, whose GEMMs are fprop GEMMs (fast).
  const Schedule l8 = build_layer_schedule(small({"training.fp8=true", "training.recompute_granularity=full"}),
                                           CpCommType::p2p);
  std::vector<std::string> split, fast;
  for (const auto& op : l8.ranks[0].ops)
    if (const auto* g = std::get_if<GemmOp>(&op.payload)) (g->split_accumulator ? split : fast).push_back(op.label);
  const std::vector<std::string> expected_fast{"QKV projection", "output projection", "MLP fc1", "MLP fc2",
                                               "recompute QKV projection", "recompute output projection",
                                               "recompute MLP fc1", "recompute MLP fc2"};
  const std::vector<std::string> expected_split{"MLP fc2 dgrad", "MLP fc2 wgrad", "MLP fc1 dgrad", "MLP fc1 wgrad",
                                                "output projection dgrad", "output projection wgrad", "QKV dgrad",
                                                "QKV wgrad"};
  CHECK(fast == expected_fast);
  CHECK(split == expected_split);
  // Without FP8 the flag is never set (BF16 GEMMs have no accumulation modes).
  const Schedule l16 = build_layer_schedule(small(), CpCommType::p2p);
  for (const auto& op : l16.ranks[0].ops)
    if (const auto* g = std::get_if<GemmOp>(&op.payload)) CHECK_FALSE(g->split_accumulator);
}

TEST_CASE("cost model: a split-accumulator FP8 GEMM takes fp8_split_accumulator_slowdown times longer", "[step][gemm]") {
  // H100 preset: 1978.9 TFLOP/s FP8, efficiency 1.75 · 780 / 1978.9 (fast), slowdown 1.15 (pytorch/ao #2377:
  // fast accumulation 1.1-1.2x). An 8192^3 GEMM has shape factor 1: fast 2·8192^3 / (1.75 · 780e12) s, split
  // 1.15x that, each plus the 3 µs launch.
  const GpuSpec g = cluster_preset("dgx-h100", 1)->gpu;
  REQUIRE(g.fp8_split_accumulator_slowdown == 1.15);
  const double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  const double fast_s = flops / (1.75 * 780e12);
  CHECK(static_cast<double>(gemm_ps(GemmOp{8192, 8192, 8192, true, false}, 0, Dtype::bf16, g)) ==
        Approx((3e-6 + fast_s) * 1e12).epsilon(1e-9));
  CHECK(static_cast<double>(gemm_ps(GemmOp{8192, 8192, 8192, true, true}, 0, Dtype::bf16, g)) ==
        Approx((3e-6 + 1.15 * fast_s) * 1e12).epsilon(1e-9));
  // The flag means nothing for a BF16 GEMM.
  CHECK(gemm_ps(GemmOp{8192, 8192, 8192, false, true}, 0, Dtype::bf16, g) ==
        gemm_ps(GemmOp{8192, 8192, 8192, false, false}, 0, Dtype::bf16, g));
  // Blackwell has no separate fast mode: the presets keep 1 there, and A100 has no FP8.
  CHECK(cluster_preset("dgx-b200", 1)->gpu.fp8_split_accumulator_slowdown == 1.0);
  CHECK(cluster_preset("dgx-h200", 1)->gpu.fp8_split_accumulator_slowdown == 1.15);
  // A scenario sets it (cluster.gpu.fp8_split_accumulator_slowdown) like any GPU rate.
  const Scenario s = small({"cluster.gpu.fp8_split_accumulator_slowdown=1.3"});
  CHECK(s.cluster.gpu.fp8_split_accumulator_slowdown == 1.3);
  // A speed-up is not a slowdown: below 1 is refused, naming the key and its range.
  const std::string e = hcpsim::test::input_error_of([] { return small({"cluster.gpu.fp8_split_accumulator_slowdown=0.8"}); });
  INFO(e);
  CHECK(e.find("cluster.gpu.fp8_split_accumulator_slowdown") != std::string::npos);
  CHECK(e.find("1 (no slowdown) to 10x") != std::string::npos);
}

TEST_CASE("step: training.fp8 adds Transformer Engine's cast kernels with their bytes", "[step][fp8]") {
  // small(): t = 256 / CP 2 = 128 tokens per GPU, h = 64, QKV width 4·16 + 2·(16+16) = 128, projection input
  // 4·16 = 64, fc1 out 2·256 = 512, fc2 in 256. Forward: transposes after the two fused norms (2 B per element),
  // cast-transposes of the projection and fc2 inputs (4 B); backward: cast-transposes of the four output grads.
  const Schedule l8 = build_layer_schedule(small({"training.fp8=true"}), CpCommType::p2p);
  std::vector<std::pair<std::string, int64_t>> casts;
  for (const auto& op : l8.ranks[0].ops)
    if (op.kind() == OpKind::elementwise && op.label.str().rfind("FP8 ", 0) == 0) casts.emplace_back(op.label, op.bytes);
  const std::vector<std::pair<std::string, int64_t>> expected{
      {"FP8 transpose (QKV input)", 128 * 64 * 2},
      {"FP8 cast-transpose (projection input)", 128 * 64 * 4},
      {"FP8 transpose (fc1 input)", 128 * 64 * 2},
      {"FP8 cast-transpose (fc2 input)", 128 * 256 * 4},
      {"FP8 cast-transpose (fc2 output grad)", 128 * 64 * 4},
      {"FP8 cast-transpose (fc1 output grad)", 128 * 512 * 4},
      {"FP8 cast-transpose (projection output grad)", 128 * 64 * 4},
      {"FP8 cast-transpose (QKV output grad)", 128 * 128 * 4}};
  CHECK(casts == expected);
  // Without FP8 there are none.
  const Schedule l16 = build_layer_schedule(small(), CpCommType::p2p);
  for (const auto& op : l16.ranks[0].ops) CHECK(op.label.str().rfind("FP8 ", 0) != 0);
}

TEST_CASE("cost model: the GEMM shape factor against a hand computation", "[step][gemm]") {
  // H100: 132 SMs, 128 x 256 tiles, fill 384 K elements (BF16) or 768 (FP8). Reference 8192^3: 64 · 32 = 2048
  // tiles = 15.52 waves → 16 waves, q = 2048 / 2112; f(8192) = 8192 / 8576 (BF16), 8192 / 8960 (FP8).
  const GpuSpec g = cluster_preset("dgx-h100", 1)->gpu;
  REQUIRE(g.sm_count == 132);
  const double q_ref = 2048.0 / 2112.0;
  CHECK(gemm_shape_factor(8192, 8192, 8192, false, g) == Approx(1.0).epsilon(1e-12));
  CHECK(gemm_shape_factor(8192, 8192, 8192, true, g) == Approx(1.0).epsilon(1e-12));
  // 4096 x 4096 x 4096: 32 · 16 = 512 tiles → 4 waves of 132 (528), q = 512 / 528.
  CHECK(gemm_shape_factor(4096, 4096, 4096, false, g) ==
        Approx((512.0 / 528.0) / q_ref * (4096.0 / 4480.0) / (8192.0 / 8576.0)).epsilon(1e-12));
  CHECK(gemm_shape_factor(4096, 4096, 4096, true, g) ==
        Approx((512.0 / 528.0) / q_ref * (4096.0 / 4864.0) / (8192.0 / 8960.0)).epsilon(1e-12));
  // One tile (a 128 x 256 output) on 132 SMs: q = 1 / 132; a tiny K is mostly fill.
  CHECK(gemm_shape_factor(100, 200, 64, false, g) == Approx((1.0 / 132.0) / q_ref * (64.0 / 448.0) / (8192.0 / 8576.0)));
  // Without an SM count there is no wave quantization, only the fill term.
  GpuSpec no_sms = g;
  no_sms.sm_count = 0;
  CHECK(gemm_shape_factor(100, 200, 8192, false, no_sms) == Approx(1.0).epsilon(1e-12));
  // Large FP8 GEMMs run 1.75x BF16 (the cuBLAS 12.9 figure the efficiencies come from); a 4096^3 FP8 GEMM less.
  const double bf16 = static_cast<double>(gemm_ps(GemmOp{8192, 8192, 8192, false}, 0, Dtype::bf16, g));
  const double fp8 = static_cast<double>(gemm_ps(GemmOp{8192, 8192, 8192, true}, 0, Dtype::bf16, g));
  CHECK(bf16 / fp8 == Approx(1.75).epsilon(2e-3));  // launch overhead aside
  const double bf16_small = static_cast<double>(gemm_ps(GemmOp{4096, 4096, 4096, false}, 0, Dtype::bf16, g));
  const double fp8_small = static_cast<double>(gemm_ps(GemmOp{4096, 4096, 4096, true}, 0, Dtype::bf16, g));
  CHECK(bf16_small / fp8_small < 1.70);
}

TEST_CASE("cost model: FP8 GEMM rates at M = 4096 against the published H800 measurements the fill is fitted on",
          "[step][gemm]") {
  // DeepGEMM PR #74 (H800 SXM, FP8, 128x128 tiles): TFLOP/s at M = 4096 for (N, K). The model's rate is
  // 2·M·N·K / (time − launch overhead); each point within 6% (the fit's worst is 5.3%).
  const GpuSpec g = cluster_preset("dgx-h100", 1)->gpu;
  struct Point {
    int64_t n, k;
    double tflops;
  };
  for (const Point& p : {Point{24576, 1536, 999}, Point{32768, 512, 591}, Point{7168, 16384, 1404},
                         Point{7168, 2048, 1031}}) {
    const double t = static_cast<double>(gemm_ps(GemmOp{4096, p.n, p.k, true}, 0, Dtype::bf16, g)) * 1e-12 -
                     g.kernel_launch_overhead_s;
    const double tflops = 2.0 * 4096 * static_cast<double>(p.n) * static_cast<double>(p.k) / t / 1e12;
    INFO("N " << p.n << " K " << p.k << ": predicted " << tflops << " published " << p.tflops);
    CHECK(std::abs(tflops / p.tflops - 1) < 0.06);
  }
}


TEST_CASE("step: grad_reduce_in_fp32 = false keeps main gradients and their DP reduction in params_dtype", "[step]") {
  // Megatron's default (fp32 main gradients, 4 B per parameter) against the performance recipes' bf16 (2 B).
  const Scenario fp32 = small();
  const Scenario bf16 = small({"parallel.grad_reduce_in_fp32=false"});
  REQUIRE(fp32.parallel.grad_reduce_in_fp32);
  REQUIRE_FALSE(bf16.parallel.grad_reduce_in_fp32);
  CHECK(main_grad_bytes_per_param(fp32) == 4.0);
  CHECK(main_grad_bytes_per_param(bf16) == 2.0);
  const StepResult a = step_of(fp32), b = step_of(bf16);
  REQUIRE(a.memory.parameters_per_gpu > 0);
  // Gradients: parameters per GPU × 4 B vs × 2 B; weights, optimizer and activations do not change.
  CHECK(a.memory.gradients_bytes == a.memory.parameters_per_gpu * 4.0);
  CHECK(b.memory.gradients_bytes == b.memory.parameters_per_gpu * 2.0);
  CHECK(a.memory.total_bytes - b.memory.total_bytes == a.memory.parameters_per_gpu * 2.0);
  CHECK(a.memory.optimizer_bytes == b.memory.optimizer_bytes);
  // The DP gradient reduce-scatter moves half the bytes, so it cannot take longer (its latency part is the same).
  CHECK(b.dp_grad_reduce_ps < a.dp_grad_reduce_ps);
  // Megatron-Bridge's spelling of the knob is accepted as an override and means the same.
  const Scenario alias = small({"ddp.grad_reduce_in_fp32=false"});
  CHECK_FALSE(alias.parallel.grad_reduce_in_fp32);
  CHECK(step_of(alias).memory.total_bytes == b.memory.total_bytes);
}

TEST_CASE("step: DP collectives run over the DP × CP group by Megatron's order, through its NICs", "[step]") {
  // TP 2, CP 2, DP 4 on two nodes, order tp-cp-dp-pp: the group of TP rank 0 is global ranks 2·c + 4·d =
  // 0, 2, …, 14: 4 ranks on each of 2 nodes, so the ring leaves each node through 4 NICs (4 · 48 GB/s, below
  // NVLink's 370.8).
  const Scenario s = small({"cluster.nodes=2", "parallel.tensor_model_parallel_size=2"});
  const StepResult r = step_of(s);
  REQUIRE(r.data_parallel_size == 4);
  const std::vector<int64_t> group{0, 2, 4, 6, 8, 10, 12, 14};
  const double grads = r.memory.parameters_per_gpu * 4;
  CHECK(r.dp_grad_reduce_ps == collective_estimate(CollectiveOp::reduce_scatter, grads, group, s.cluster).ps());
  CHECK(collective_estimate(CollectiveOp::reduce_scatter, 1e9, group, s.cluster).bus_bytes_per_s == Approx(4 * 48e9).epsilon(1e-12));
  CHECK(r.dp_param_gather_ps ==
        collective_estimate(CollectiveOp::all_gather, r.memory.parameters_per_gpu * 2, group, s.cluster).ps());
}

TEST_CASE("step: every layer schedule keeps the ordering contract (check_hazards)", "[step][hazards]") {
  // Every CP comm type, TP with and without sequence parallelism and TP communication overlap, every recompute
  // granularity and FP8. GemmOp and ElementwiseOp access no buffer; the TP collectives, the ring exchanges and the
  // spliced CP attention (twice with recompute) do. 8 heads and 4 groups so that TP 2 × A 2 divides them.
  const std::vector<std::vector<std::string>> cps{
      {"parallel.context_parallel_size=2", "parallel.cp_comm_type=p2p"},
      {"parallel.context_parallel_size=2", "parallel.cp_comm_type=a2a"},
      {"parallel.context_parallel_size=2", "parallel.cp_comm_type=all_gather"},
      {"parallel.context_parallel_size=4", "parallel.cp_comm_type=a2a+p2p",
       "parallel.hierarchical_context_parallel_sizes=[2,2]"}};
  const std::vector<std::vector<std::string>> tps{
      {"parallel.tensor_model_parallel_size=1"},
      {"parallel.tensor_model_parallel_size=2", "parallel.sequence_parallel=false"},
      {"parallel.tensor_model_parallel_size=2", "parallel.sequence_parallel=true"},
      {"parallel.tensor_model_parallel_size=2", "parallel.sequence_parallel=true", "parallel.tp_comm_overlap=true"}};
  const std::vector<std::string> extras{"training.recompute_granularity=full",
                                        "training.recompute_granularity=selective", "training.fp8=true",
                                        "model.gated_linear_unit=false"};
  int checked = 0;
  for (const auto& cp : cps) {
    for (const auto& tp : tps) {
      for (const auto& extra : extras) {
        std::vector<std::string> o{"model.num_attention_heads=8", "model.num_query_groups=4", extra};
        o.insert(o.end(), cp.begin(), cp.end());
        o.insert(o.end(), tp.begin(), tp.end());
        const Scenario s = small(o);
        const Schedule layer = build_layer_schedule(s, s.parallel.cp_comm_type.front());
        std::string text;
        for (const RankProgram& r : layer.ranks)
          if (const auto h = find_hazard(r); h && text.empty()) text = hazard_text(r, *h);
        INFO(cp[1] << " " << tp.back() << " " << extra << ": " << text);
        REQUIRE(text.empty());
        test::check_schedule(layer);
        ++checked;
      }
    }
  }
  REQUIRE(checked == 64);
}

TEST_CASE("step: a layer schedule says it is one, and the numeric executors refuse it at entry", "[step][schedule_kind]") {
  const Schedule layer = build_layer_schedule(small(), CpCommType::p2p);
  CHECK(layer.kind == ScheduleKind::layer);
  CHECK(numeric_run_blocker(layer).text().find("a layer schedule") != std::string::npos);
  CHECK(cpu_can_run(layer).problem == numeric_run_blocker(layer).problem);
  CHECK(gpu::gpu_can_run(layer).problem == numeric_run_blocker(layer).problem);
  CHECK_FALSE(cpu_can_run(layer).fix.empty());
  const Schedule attention = build_schedule(CpCommType::p2p, cp_layout_for(small(), CpCommType::p2p),
                                            attention_shape(small()));
  CHECK(attention.kind == ScheduleKind::attention);
  CHECK_FALSE(numeric_run_blocker(attention).blocked());
  CHECK_FALSE(cpu_can_run(attention).blocked());
  CHECK_FALSE(gpu::gpu_can_run(attention).blocked());
  // The invariant: timing-only ops belong to layer schedules only.
  Schedule mislabelled = layer;
  mislabelled.kind = ScheduleKind::attention;
  for (RankProgram& r : mislabelled.ranks) r.inputs.clear();  // (a layer's bindings hold no tokens to check first)
  const auto end = hcpsim::test::run_in_child([&] { mislabelled.check_invariants(); });
  REQUIRE(end.aborted);
  CHECK(end.stderr_text.find("in an attention schedule (layer schedules only)") != std::string::npos);
}
