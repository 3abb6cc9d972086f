#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cmath>

#include "app_common.hpp"
#include "hcpsim/core/scenario_loader.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "hcpsim/sim/trace_writer.hpp"

namespace hcpsim::app {
namespace {

int cmd_simulate(const Common& c, const std::string& trace_path, const std::string& json_path) {
  Scenario s = load_scenario(c.scenario_path, c.overrides);
  const auto report = validate_scenario(s, ValidationScope::placement);
  const auto types = buildable_types(s);  // all validation before any output file is opened
  print_header(s);
  print_warnings(report);
  const auto shape = attention_shape(s);
  const auto& cl = s.cluster;
  const auto place = place_cp_group(s.parallel.order, sizes_of(s, report.data_parallel_size), cl.gpus_per_node);
  std::vector<int64_t> node_of;
  for (const auto& p : place) node_of.push_back(p.node);
  for (CpCommType t : types) {
    const auto layout = cp_layout_for(s, t);
    const auto sched = build_schedule(t, layout, shape);
    const auto r = sim::simulate(sched, cl, node_of);
    fmt::print("\nsimulate {} [A={}, P={}] on {} x {} ({}), one attention layer per TP rank, contention-free\n",
               to_string(t), layout.a2a_size(), layout.p2p_size(), cl.nodes, cl.gpus_per_node, cl.gpu.name);
    fmt::print("  forward  {:>12}   backward {:>12}   total {:>12}   ({} ps total)\n", human_time_ps(r.forward_ps),
               human_time_ps(r.backward_ps), human_time_ps(r.total_ps), r.total_ps);
    const double fwd_f = r.phase_flops(Phase::forward), bwd_f = r.phase_flops(Phase::backward);
    fmt::print("  attention FLOPs: forward {:.6g}, backward {:.6g} (all CP ranks of one TP rank)\n", fwd_f, bwd_f);
    for (Phase ph : {Phase::forward, Phase::backward}) {
      for (sim::LinkLevel lv : {sim::LinkLevel::intra_node, sim::LinkLevel::inter_node}) {
        const auto& m = r.message_totals(ph, lv);
        fmt::print("  {:<8} {:<10} messages {:>5}  bytes {:>14} ({})\n", to_string(ph), sim::to_string(lv), m.count,
                   m.bytes, human_bytes(static_cast<double>(m.bytes)));
      }
    }
    fmt::print("  {:>7} {:>5} {:>12} {:>12} {:>12} {:>14}\n", "cp_rank", "node", "compute", "comm", "exposed",
               "peak memory");
    for (const auto& rs : r.ranks)
      fmt::print("  {:>7} {:>5} {:>12} {:>12} {:>12} {:>14}\n", rs.cp_rank, rs.node, human_time_ps(rs.compute_busy_ps),
                 human_time_ps(rs.comm_busy_ps), human_time_ps(rs.exposed_comm_ps),
                 human_bytes(static_cast<double>(rs.peak_memory_bytes)));
    const double layers = static_cast<double>(s.model.num_layers);
    fmt::print("  x num_layers {}: attention forward {}, backward {} per micro-batch (layers run one after another)\n",
               s.model.num_layers, human_time_ps(static_cast<int64_t>(std::llround(static_cast<double>(r.forward_ps) * layers))),
               human_time_ps(static_cast<int64_t>(std::llround(static_cast<double>(r.backward_ps) * layers))));
    const std::string suffix = types.size() > 1 ? "." + to_string(t) : "";
    if (!trace_path.empty()) {
      sim::write_chrome_trace(trace_path + suffix, r);
      fmt::print("  wrote Chrome trace {}\n", trace_path + suffix);
    }
    if (!json_path.empty()) {
      sim::write_summary_json(json_path + suffix, r);
      fmt::print("  wrote summary {}\n", json_path + suffix);
    }
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_simulate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("simulate", "time one attention layer of the schedule on the cluster");
  auto common = std::make_shared<Common>();
  auto trace = std::make_shared<std::string>();
  auto json = std::make_shared<std::string>();
  add_scenario_args(cmd, *common);
  cmd->add_option("--trace", *trace, "write a Chrome trace (chrome://tracing, Perfetto)");
  cmd->add_option("--json", *json, "write a JSON summary");
  cmd->callback([&exit_code, common, trace, json] { exit_code = cmd_simulate(*common, *trace, *json); });
  return cmd;
}

}  // namespace hcpsim::app
