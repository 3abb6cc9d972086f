// verify and simulate as `hcpsim replay` runs them: the same library calls as the subcommands, results as
// golden fields and output digests.
#include <fmt/core.h>

#include <algorithm>
#include <cstring>

#include "app_common.hpp"
#include "hcpsim/core/fnv_hash.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/oracles/head_selection.hpp"
#include "hcpsim/oracles/verify.hpp"
#include "hcpsim/sim/attention_simulation.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "hcpsim/sim/trace_writer.hpp"
#include "replay.hpp"
#include "verify_setup.hpp"

namespace hcpsim::app {
namespace {

uint64_t hash_tensor(const HostTensor& t, uint64_t h) {
  for (int64_t i = 0; i < t.elements(); ++i) {
    const double v = t.data()[i];
    h = fnv1a64(reinterpret_cast<const unsigned char*>(&v), sizeof v, h);
  }
  return h;
}

}  // namespace

ReplayVerify replay_verify(const Scenario& s, int threads) {
  validate_scenario(s, ValidationScope::attention);
  check_verifiable(s);
  const CpCommType t = buildable_types(s).front();
  const auto full_shape = attention_shape(s);
  const auto layout = cp_layout_for(s, t);
  const HeadSelection sel = select_heads(full_shape, layout.a2a_size(), s.oracle.heads);
  Schedule sched = build_schedule(t, layout, sel.shape);
  if (s.oracle.inject) {
    const auto fault = parse_fault_kind(*s.oracle.inject);
    if (!fault)
      throw InputError(s.loc("oracle.inject"), "oracle.inject", "unknown fault injector '" + *s.oracle.inject + "'",
                       "use one of the names printed by 'hcpsim verify --inject list'");
    sched = inject_fault(sched, *fault);
  }
  const VerifyOptions opt = verify_options(sel, full_shape, s.oracle.seed, s.oracle.input_distribution, s.oracle.dtype, threads);
  const VerifyRun run = verify_schedule_run(sched, opt);
  ReplayVerify out;
  out.pass = run.report.pass;
  out.result = to_string(run.report.verdict);
  for (const auto& e : run.report.tensors) out.rel_l2[e.tensor == "softmax_lse" ? "lse" : e.tensor] = e.rel_l2_err;
  uint64_t h = kFnvOffsetBasis;
  for (const HostTensor* t2 : {&run.hcp.out, &run.hcp.softmax_lse, &run.hcp.dq, &run.hcp.dk, &run.hcp.dv})
    h = hash_tensor(*t2, h);
  out.digest = fmt::format("{:016x}", h);
  return out;
}

std::vector<std::string> replay_simulate_fields() {
  return {"backward_ps",          "bwd_inter_node_bytes", "bwd_inter_node_messages", "bwd_intra_node_bytes",
          "bwd_intra_node_messages", "forward_ps",         "fwd_inter_node_bytes",    "fwd_inter_node_messages",
          "fwd_intra_node_bytes", "fwd_intra_node_messages", "max_exposed_comm_ps",   "max_peak_memory_bytes",
          "total_ps"};
}

ReplaySimulate replay_simulate(const Scenario& s) {
  const auto report = validate_scenario(s, ValidationScope::placement);
  const CpCommType t = buildable_types(s).front();
  // The digest covers the summary's event and flow counts, which only the full run gives.
  const auto r = sim::simulate_attention(s, t, report.data_parallel_size, Topology::from_cluster(s.cluster), {},
                                         "the replay digest covers the full run's summary")
                     .result;
  ReplaySimulate out;
  auto& v = out.values;
  v["forward_ps"] = r.forward_ps;
  v["backward_ps"] = r.backward_ps;
  v["total_ps"] = r.total_ps;
  int64_t exposed = 0, peak = 0;
  for (const auto& rs : r.ranks) {
    exposed = std::max<int64_t>(exposed, rs.exposed_comm_ps);
    peak = std::max(peak, rs.peak_memory_bytes);
  }
  v["max_exposed_comm_ps"] = exposed;
  v["max_peak_memory_bytes"] = peak;
  for (Phase ph : {Phase::forward, Phase::backward}) {
    const std::string p = ph == Phase::forward ? "fwd_" : "bwd_";
    for (sim::LinkLevel lv : {sim::LinkLevel::intra_node, sim::LinkLevel::inter_node}) {
      const auto& m = r.message_totals(ph, lv);
      v[p + sim::to_string(lv) + "_messages"] = m.count;
      v[p + sim::to_string(lv) + "_bytes"] = m.bytes;
    }
  }
  const std::string summary = sim::summary_json(r);
  out.digest = fmt::format("{:016x}", fnv1a64(summary));
  return out;
}

}  // namespace hcpsim::app
