#include "hcpsim/sim/simulation_cost.hpp"

#include <algorithm>

#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/sim/attention_simulation.hpp"
#include "hcpsim/sim/simulator.hpp"

namespace hcpsim::sim {

namespace {

// Measured on the Release build (docs/robustness.md "Admission control" lists the runs): peak RSS of `simulate`
// per schedule op (the Op itself, 160 bytes with its interned label and in-place deps, its flow records, and the
// simulator's per-op state: ~240 bytes on p2p rings); with a timeline (--trace) each op also keeps its entries and
// the trace document, ~13x more (~3100 bytes); per
// sequence token (every rank's IoBindings list one int64 per row of its 9 tensors, and the step model); and the
// process's fixed part (binary, scenario, topology). Each constant rounds its measurement up by 25-35%.
constexpr double kBytesPerOp = 320;
constexpr double kBytesPerOpTimeline = 4000;
constexpr double kBytesPerToken = 96;
constexpr double kBaseBytes = 16.0 * 1024 * 1024;
constexpr double kEventsPerOp = 1.25;
/// Wall seconds per estimated op without a timeline, from the best of 3 recorded in bench/RESULTS.md ("Huge pages for
/// the heap", 2-core build host): a2a+p2p [8, 256] 0.82 µs (4.59e6 ops, 3.78 s), [8, 512] 1.06 µs (1.82e7 ops,
/// 19.3 s), plain p2p CP = 512 0.61 µs (1.82e7 ops, 11.1 s); 1.5 µs covers the largest with the host's usual 1.5x
/// variation (3 µs, used before the compact op storage and huge pages, printed 2-5x the measured times).
constexpr double kSecondsPerOp = 1.5e-6;
constexpr double kSecondsPerOpTimeline = 3e-5;

}  // namespace

double schedule_ops_per_rank(CpCommType cp_comm_type, int64_t a2a, int64_t p2p) {
  const double P = static_cast<double>(p2p);
  switch (cp_comm_type) {
    case CpCommType::all_gather: return 57;
    case CpCommType::a2a: return a2a >= 2 ? 52 : 28;
    case CpCommType::p2p: return p2p >= 2 ? 23 * P + 23 : 28;
    case CpCommType::a2a_p2p:
      if (a2a < 2) return p2p >= 2 ? 23 * P + 23 : 28;  // degenerates to p2p
      return p2p >= 2 ? 23 * P + 47 : 52;               // degenerates to a2a
  }
  return 23 * P + 47;
}

SimulationCost estimate_simulation_cost(CpCommType cp_comm_type, int64_t a2a, int64_t p2p, int64_t seq_length,
                                        bool timeline) {
  SimulationCost c;
  c.ops = static_cast<double>(a2a) * static_cast<double>(p2p) * schedule_ops_per_rank(cp_comm_type, a2a, p2p);
  c.events = kEventsPerOp * c.ops;
  c.bytes = (timeline ? kBytesPerOpTimeline : kBytesPerOp) * c.ops + kBytesPerToken * static_cast<double>(seq_length) +
            kBaseBytes;
  c.seconds = (timeline ? kSecondsPerOpTimeline : kSecondsPerOp) * c.ops;
  return c;
}

SimulationCost estimate_layer_timeline_cost(const Scenario& scenario) {
  SimulationCost worst;
  const auto tp = static_cast<double>(scenario.parallel.tensor_model_parallel_size);
  const double attention_runs = scenario.training.recompute_granularity == RecomputeGranularity::full ? 2 : 1;
  for (CpCommType t : scenario.parallel.distinct_cp_comm_types()) {
    const CpLayout layout = cp_layout_for(scenario, t);
    SimulationCost c;
    c.ops = tp * static_cast<double>(layout.a2a_size()) * static_cast<double>(layout.p2p_size()) *
            (attention_runs * schedule_ops_per_rank(t, layout.a2a_size(), layout.p2p_size()) + kLayerOpsPerRank);
    c.events = kEventsPerOp * c.ops;
    c.bytes = kBytesPerOpTimeline * c.ops;
    c.seconds = kSecondsPerOpTimeline * c.ops;
    if (c.bytes > worst.bytes) worst = c;
  }
  return worst;
}

SimulationCost estimate_simulate_cost(const Scenario& scenario, int64_t data_parallel_size, bool timeline,
                                      bool layer_timeline) {
  const std::vector<int64_t> gpus = cp_group_gpus(scenario, data_parallel_size);
  const auto tp = static_cast<double>(scenario.parallel.tensor_model_parallel_size);
  const double attention_runs = scenario.training.recompute_granularity == RecomputeGranularity::none ? 1 : 2;
  const bool step = scenario.model.vocab_size.has_value();
  SimulationCost worst;
  for (CpCommType t : scenario.parallel.distinct_cp_comm_types()) {
    const CpLayout layout = cp_layout_for(scenario, t);
    const int64_t a = layout.a2a_size(), p = layout.p2p_size();
    const double per_rank = schedule_ops_per_rank(t, a, p);
    const bool symmetric = symmetry_reduction_blocker(t, a, p, scenario.cluster, gpus).empty();
    // Executed GPUs: the P representatives when the reduction runs (attention: no timeline; layer: TP = 1 and
    // no --step-trace, as step/training_step.cpp decides), else every GPU.
    const double all = static_cast<double>(a) * static_cast<double>(p);
    const double attention_ops = (symmetric && !timeline ? static_cast<double>(p) : all) * per_rank;
    const double layer_ops =
        step ? (symmetric && !layer_timeline && tp == 1 ? static_cast<double>(p) : tp * all) *
                   (attention_runs * per_rank + kLayerOpsPerRank)
             : 0.0;
    const double attention_bytes = (timeline ? kBytesPerOpTimeline : kBytesPerOp) * attention_ops;
    const double layer_bytes = (layer_timeline ? kBytesPerOpTimeline : kBytesPerOp) * layer_ops;
    SimulationCost c;
    c.ops = attention_ops + layer_ops;
    c.events = kEventsPerOp * c.ops;
    // The attention's timeline stays while the layer runs (the traces are written at the end); otherwise the two
    // simulations hold their ops one after the other.
    c.bytes = (timeline || layer_timeline ? attention_bytes + layer_bytes : std::max(attention_bytes, layer_bytes)) +
              kBytesPerToken * static_cast<double>(scenario.model.seq_length) + kBaseBytes;
    c.seconds = (timeline ? kSecondsPerOpTimeline : kSecondsPerOp) * attention_ops +
                (layer_timeline ? kSecondsPerOpTimeline : kSecondsPerOp) * layer_ops;
    if (c.bytes > worst.bytes) worst = c;
  }
  return worst;
}

}  // namespace hcpsim::sim
