// The symmetry reduction of the whole-step layer simulation (training_step.hpp, docs/simulator.md "Symmetry
// reduction of the whole-step layer"): the reduced layer run gives every number of the full run, and a layer
// the reduction does not apply to is simulated in full and says why.
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "small_step_scenario.hpp"
#include "../sim/sim_compare.hpp"
#include "hcpsim/step/layer_builder.hpp"
#include "hcpsim/sim/attention_simulation.hpp"
#include "hcpsim/step/training_step.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;
using hcpsim::test::small;
using hcpsim::sim::test::same_bits;
using hcpsim::sim::test::require_same_links_and_flows;

namespace {

// The small model with 8 query and 8 KV heads (an a2a over the 8 GPUs of a DGX node needs heads divisible by 8),
// CP = 16 on 2 DGX H100 nodes, S = 512 (divisible by 2·CP).
Scenario hcp_small(const std::vector<std::string>& more) {
  std::vector<std::string> o = {"model.num_attention_heads=8", "model.num_query_groups=8", "model.kv_channels=16",
                                "model.hidden_size=128",       "model.seq_length=512",    "cluster.nodes=2",
                                "parallel.context_parallel_size=16"};
  o.insert(o.end(), more.begin(), more.end());
  return small(o);
}

StepResult step(const Scenario& s, const std::string& full_run_reason = "") {
  const auto report = validate_scenario(s, ValidationScope::placement);
  return simulate_step(s, s.parallel.cp_comm_type.front(), report.data_parallel_size,
                       Topology::from_cluster(s.cluster), {}, full_run_reason);
}

void require_same_messages(const MessageTable& a, const MessageTable& b) {
  for (size_t ph = 0; ph < a.size(); ++ph)
    for (size_t lv = 0; lv < a[ph].size(); ++lv) {
      REQUIRE(a[ph][lv].count == b[ph][lv].count);
      REQUIRE(a[ph][lv].bytes == b[ph][lv].bytes);
    }
}

/// Every result of the layer simulation a caller can read, except event_count, network_recomputes,
/// simulated_ranks and the order of SimResult::flows (docs/simulator.md).
void require_same_layer(const SimResult& a, const SimResult& b) {
  REQUIRE(a.forward_ps == b.forward_ps);
  REQUIRE(a.backward_start_ps == b.backward_start_ps);
  REQUIRE(a.backward_ps == b.backward_ps);
  REQUIRE(a.total_ps == b.total_ps);
  REQUIRE(a.busiest_cp_rank == b.busiest_cp_rank);
  REQUIRE(a.node_count == b.node_count);
  for (size_t ph = 0; ph < a.flops.size(); ++ph) REQUIRE(same_bits(a.flops[ph], b.flops[ph]));
  require_same_messages(a.messages, b.messages);
  REQUIRE(a.ranks.size() == b.ranks.size());
  for (size_t g = 0; g < a.ranks.size(); ++g) {
    INFO("layer rank " << g);
    const RankStats &x = a.ranks[g], &y = b.ranks[g];
    REQUIRE(x.cp_rank == y.cp_rank);
    REQUIRE(x.node == y.node);
    REQUIRE(x.gpu == y.gpu);
    REQUIRE(x.end_ps == y.end_ps);
    REQUIRE(x.compute_busy_ps == y.compute_busy_ps);
    REQUIRE(x.comm_busy_ps == y.comm_busy_ps);
    REQUIRE(x.exposed_comm_ps == y.exposed_comm_ps);
    REQUIRE(x.compute_kernel_ps == y.compute_kernel_ps);
    for (size_t ph = 0; ph < x.time_breakdown.size(); ++ph)
      for (TimePs TimeBreakdown::*f : {&TimeBreakdown::attention_kernel_ps, &TimeBreakdown::merge_correction_ps,
                                       &TimeBreakdown::copy_ps, &TimeBreakdown::other_compute_ps,
                                       &TimeBreakdown::comm_slowdown_ps, &TimeBreakdown::exposed_comm_ps})
        REQUIRE(x.time_breakdown[ph].*f == y.time_breakdown[ph].*f);
    REQUIRE(x.input_bytes == y.input_bytes);
    REQUIRE(x.peak_memory_bytes == y.peak_memory_bytes);
    REQUIRE(x.phase_peak_memory_bytes == y.phase_peak_memory_bytes);
    REQUIRE(x.final_memory_bytes == y.final_memory_bytes);
    require_same_messages(x.messages_sent, y.messages_sent);
  }
  require_same_links_and_flows(a, b);
  REQUIRE(a.timeline.size() == b.timeline.size());
  for (size_t k = 0; k < a.timeline.size(); ++k) {
    INFO("timeline entry " << k);
    REQUIRE(a.timeline[k].cp_rank == b.timeline[k].cp_rank);
    REQUIRE(a.timeline[k].op_index == b.timeline[k].op_index);
    REQUIRE(a.timeline[k].start_ps == b.timeline[k].start_ps);
    REQUIRE(a.timeline[k].end_ps == b.timeline[k].end_ps);
    REQUIRE(a.timeline[k].live_bytes == b.timeline[k].live_bytes);
  }
}

/// Every StepResult field (the layer's results with require_same_layer).
void require_same_step(const StepResult& a, const StepResult& b) {
  require_same_layer(a.layer, b.layer);
  REQUIRE(a.a2a_size == b.a2a_size);
  REQUIRE(a.p2p_size == b.p2p_size);
  REQUIRE(a.stage_recomputed_layers == b.stage_recomputed_layers);
  for (TimePs StepResult::*f :
       {&StepResult::layer_forward_ps, &StepResult::layer_backward_ps, &StepResult::layer_exposed_comm_ps,
        &StepResult::layer_backward_no_recompute_ps, &StepResult::stage_microbatch_ps, &StepResult::pipeline_ps,
        &StepResult::dp_grad_reduce_exposed_ps, &StepResult::dp_param_gather_exposed_ps, &StepResult::optimizer_ps,
        &StepResult::step_ps})
    REQUIRE(a.*f == b.*f);
  for (double StepResult::*f : {&StepResult::layer_no_recompute_flops, &StepResult::tokens_per_s,
                                &StepResult::model_tflops_per_gpu, &StepResult::mfu, &StepResult::executed_flops_per_gpu})
    REQUIRE(same_bits(a.*f, b.*f));
  REQUIRE(same_bits(a.memory.cp_attention_buffers_bytes, b.memory.cp_attention_buffers_bytes));
  REQUIRE(same_bits(a.memory.total_bytes, b.memory.total_bytes));
}

const char* const kFull = "full simulation (symmetry reduction does not apply: a test asks for it)";

}  // namespace

TEST_CASE("step: the layer's representatives have build_layer_schedule's programs, the others none", "[step]") {
  const Scenario s = hcp_small({"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[8,2]"});
  const Schedule full = build_layer_schedule(s, CpCommType::a2a_p2p);
  const Schedule reps = build_layer_schedule_ranks(s, CpCommType::a2a_p2p, {0, 8});
  REQUIRE(reps.ranks.size() == 16);
  for (size_t r = 0; r < reps.ranks.size(); ++r) {
    INFO("layer rank " << r);
    REQUIRE(reps.ranks[r].rank == static_cast<int64_t>(r));
    REQUIRE(reps.ranks[r].cp_rank == static_cast<int64_t>(r));
    const bool rep = r == 0 || r == 8;
    REQUIRE(reps.ranks[r].ops.size() == (rep ? full.ranks[r].ops.size() : 0));
    if (!rep) continue;
    REQUIRE(reps.ranks[r].ops.size() > 50);  // GEMMs, norms and the attention in between
    for (size_t i = 0; i < full.ranks[r].ops.size(); ++i) {
      REQUIRE(reps.ranks[r].ops[i].label == full.ranks[r].ops[i].label);
      REQUIRE(reps.ranks[r].ops[i].deps == full.ranks[r].ops[i].deps);
      REQUIRE(same_bits(reps.ranks[r].ops[i].flops, full.ranks[r].ops[i].flops));
    }
  }
}

TEST_CASE("step: the symmetry-reduced layer equals the full layer at TP = 1 (a2a+p2p, a2a, recompute kinds)",
          "[step]") {
  const std::vector<std::vector<std::string>> shapes = {
      // [8, 2] on 2 nodes, full recompute: the ring crosses the nodes on every rail.
      {"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[8,2]",
       "training.recompute_granularity=full"},
      // selective recompute (the attention forward again), no recompute at all.
      {"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[8,2]",
       "training.recompute_granularity=selective"},
      // block recompute of 1 of the 2 layers: the layer without recompute is simulated too.
      {"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[8,2]",
       "training.recompute_granularity=full", "training.recompute_method=block", "training.recompute_num_layers=1"},
      // plain a2a over one node (CP = 8).
      {"parallel.cp_comm_type=a2a", "parallel.context_parallel_size=8", "cluster.nodes=1"},
  };
  for (const auto& o : shapes) {
    const Scenario s = hcp_small(o);
    INFO(o.front() << " " << o.back());
    const StepResult reduced = step(s);
    const StepResult full = step(s, "a test asks for it");
    const int64_t p = reduced.p2p_size;
    REQUIRE(reduced.a2a_size == 8);
    REQUIRE(reduced.layer_simulation_note ==
            "symmetry reduction: simulated " + std::to_string(p) + " representative GPU" + (p == 1 ? "" : "s") +
                " (a2a_rank 0), each standing for its 8 a2a peers; exact");
    REQUIRE(reduced.layer.symmetry_reduced);
    REQUIRE(reduced.layer.simulated_ranks == p);
    REQUIRE(full.layer_simulation_note == kFull);
    REQUIRE_FALSE(full.layer.symmetry_reduced);
    REQUIRE(full.layer.simulated_ranks == 8 * p);
    // Not vacuous: the layer takes time, computes and moves bytes in the node (the a2a).
    REQUIRE(full.layer_forward_ps > 0);
    REQUIRE(full.layer.message_totals(Phase::forward, LinkLevel::intra_node).bytes > 0);
    if (p > 1) REQUIRE(full.layer.message_totals(Phase::backward, LinkLevel::inter_node).bytes > 0);
    require_same_step(reduced, full);
    REQUIRE(reduced.layer.event_count < full.layer.event_count);
  }
}

TEST_CASE("step: a layer the reduction does not apply to is simulated in full and says why", "[step]") {
  struct Case {
    std::vector<std::string> overrides;
    std::string note;
  };
  const std::vector<Case> cases = {
      // TP = 2: a2a groups of 4 GPUs, two per node, coupled by the TP collectives.
      {{"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[4,2]",
        "parallel.context_parallel_size=8", "parallel.tensor_model_parallel_size=2", "parallel.sequence_parallel=true"},
       "full simulation (symmetry reduction does not apply: TP = 2: the TP collectives couple the a2a groups of a "
       "node, which the reduction does not execute as images)"},
      // Plain p2p: no a2a level (every ring position runs its own causal sections).
      {{"parallel.cp_comm_type=p2p"}, "full simulation (symmetry reduction does not apply: cp_comm_type has no a2a level)"},
      // An a2a group of 4 GPUs at TP = 1: not a whole node.
      {{"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[4,4]"},
       "full simulation (symmetry reduction does not apply: A != gpus_per_node (an a2a group is not one whole node))"},
  };
  for (const Case& c : cases) {
    INFO(c.note);
    const Scenario s = hcp_small(c.overrides);
    const StepResult fallback = step(s);
    const StepResult full = step(s, "a test asks for it");
    REQUIRE(fallback.layer_simulation_note == c.note);
    REQUIRE_FALSE(fallback.layer.symmetry_reduced);
    REQUIRE(fallback.layer.simulated_ranks == static_cast<int64_t>(fallback.layer.ranks.size()));
    REQUIRE(full.layer_simulation_note == kFull);
    REQUIRE(fallback.layer_forward_ps > 0);
    require_same_step(fallback, full);
    REQUIRE(fallback.layer.event_count == full.layer.event_count);
  }
}

TEST_CASE("step: the layer wrapping simulate_attention's schedule equals the layer that builds its own", "[step]") {
  const std::vector<std::vector<std::string>> shapes = {
      // reduced attention and reduced layer: the representatives' programs are wrapped.
      {"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[8,2]",
       "training.recompute_granularity=full"},
      // block recompute: the first layer run wraps it, the run without recompute builds its own.
      {"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[8,2]",
       "training.recompute_granularity=full", "training.recompute_method=block", "training.recompute_num_layers=1"},
      // full attention and full layer (plain p2p).
      {"parallel.cp_comm_type=p2p", "training.recompute_granularity=selective"},
      // TP = 2: the attention is simulated for one TP rank, the layer wraps it for both.
      {"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[4,2]",
       "parallel.context_parallel_size=8", "parallel.tensor_model_parallel_size=2", "parallel.sequence_parallel=true"},
  };
  for (const auto& o : shapes) {
    const Scenario s = hcp_small(o);
    INFO(o.front() << " " << o.back());
    const auto report = validate_scenario(s, ValidationScope::placement);
    const CpCommType t = s.parallel.cp_comm_type.front();
    const Topology topology = Topology::from_cluster(s.cluster);
    for (const std::string reason : {"", "a test asks for it"}) {
      INFO("full run reason: '" << reason << "'");
      AttentionSimulation attention = simulate_attention(s, t, report.data_parallel_size, topology, {});
      REQUIRE_FALSE(attention.schedule.ranks.empty());
      // With a reason the layer runs in full, and a representatives-only attention schedule cannot be wrapped.
      const StepResult wrapped =
          simulate_step(s, t, report.data_parallel_size, topology, {}, reason, std::move(attention.schedule));
      require_same_step(wrapped, step(s, reason));
    }
  }
}

TEST_CASE("step: the schedules and every result are the same for any --threads (full, reduced, TP = 2)", "[step]") {
  const std::vector<std::vector<std::string>> shapes = {
      {"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[8,2]",
       "training.recompute_granularity=selective"},
      {"parallel.cp_comm_type=p2p", "training.recompute_granularity=full"},
      {"parallel.cp_comm_type=a2a+p2p", "parallel.hierarchical_context_parallel_sizes=[4,2]",
       "parallel.context_parallel_size=8", "parallel.tensor_model_parallel_size=2", "parallel.sequence_parallel=true"},
  };
  for (const auto& o : shapes) {
    const Scenario s = hcp_small(o);
    INFO(o.front() << " " << o.back());
    const CpCommType t = s.parallel.cp_comm_type.front();
    // The built programs, op by op: one rank per work item on 1 and on 3 threads (more threads than cores here).
    const Schedule one = build_layer_schedule(s, t, 1);
    const Schedule three = build_layer_schedule(s, t, 3);
    REQUIRE(one.ranks.size() == three.ranks.size());
    for (size_t r = 0; r < one.ranks.size(); ++r) {
      INFO("layer rank " << r);
      const RankProgram &x = one.ranks[r], &y = three.ranks[r];
      REQUIRE(x.rank == y.rank);
      // The bindings name the attention's buffers and carry no tokens (timing only).
      REQUIRE(x.inputs.size() == 4);
      REQUIRE(x.outputs.size() == 5);
      for (const std::vector<IoBinding>* bindings : {&x.inputs, &x.outputs, &y.inputs, &y.outputs})
        for (const IoBinding& b : *bindings) {
          REQUIRE(b.tokens.empty());
          REQUIRE(b.buffer >= 0);
        }
      REQUIRE(x.ops.size() > 50);
      REQUIRE(x.ops.size() == y.ops.size());
      REQUIRE(x.buffers.size() == y.buffers.size());
      for (size_t i = 0; i < x.ops.size(); ++i) {
        REQUIRE(x.ops[i].kind() == y.ops[i].kind());
        REQUIRE(x.ops[i].stream == y.ops[i].stream);
        REQUIRE(x.ops[i].phase == y.ops[i].phase);
        REQUIRE(x.ops[i].label == y.ops[i].label);
        REQUIRE(x.ops[i].deps == y.ops[i].deps);
        REQUIRE(x.ops[i].ring_step == y.ops[i].ring_step);
        REQUIRE(x.ops[i].bytes == y.ops[i].bytes);
        REQUIRE(same_bits(x.ops[i].flops, y.ops[i].flops));
      }
    }
    // The whole simulation (attention, layer, step) with SimOptions::threads 1 and 3.
    const auto report = validate_scenario(s, ValidationScope::placement);
    const Topology topology = Topology::from_cluster(s.cluster);
    SimOptions serial, parallel;
    serial.threads = 1;
    parallel.threads = 3;
    AttentionSimulation a1 = simulate_attention(s, t, report.data_parallel_size, topology, serial);
    AttentionSimulation a3 = simulate_attention(s, t, report.data_parallel_size, topology, parallel);
    require_same_layer(a1.result, a3.result);
    require_same_step(simulate_step(s, t, report.data_parallel_size, topology, serial, "", std::move(a1.schedule)),
                      simulate_step(s, t, report.data_parallel_size, topology, parallel, "", std::move(a3.schedule)));
  }
}
