#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cmath>

#include "app_common.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "report/validate_json.hpp"

namespace hcpsim::app {
namespace {

int cmd_validate(const Common& c, bool show_schedule, const std::string& json_path) {
  Scenario s;
  ValidationReport report;
  try {
    s = load_scenario(c.scenario_path, c.overrides);
    report = validate_scenario(s, ValidationScope::placement);
  } catch (const InputError& e) {
    // The JSON carries the verdict too; the error still goes to stderr with exit 2 as without --json.
    if (!json_path.empty()) write_validate_error_json(json_path, c.scenario_path, e);
    throw;
  }
  if (!json_path.empty()) write_validate_json(json_path, s, report, c.overrides);
  print_header(s);
  const auto& cl = s.cluster;
  fmt::print("  parallel: tensor_model_parallel_size={} context_parallel_size={} pipeline_model_parallel_size={} "
             "data_parallel_size={} order={}\n",
             s.parallel.tensor_model_parallel_size, s.parallel.context_parallel_size,
             s.parallel.pipeline_model_parallel_size, report.data_parallel_size, s.parallel.order);
  fmt::print("  cluster: {} x {} GPUs ({}{}), {} used\n", cl.nodes, cl.gpus_per_node, cl.gpu.name,
             cl.preset.empty() ? "" : ", preset " + cl.preset,
             s.parallel.tensor_model_parallel_size * s.parallel.context_parallel_size *
                 s.parallel.pipeline_model_parallel_size * report.data_parallel_size);
  for (CpCommType t : s.parallel.distinct_cp_comm_types()) {
    print_layout(s, t, report.data_parallel_size);
    if (show_schedule) {
      if (t == CpCommType::all_gather) {
        fmt::print("  (no schedule listing: the all_gather builder is not in this version)\n");
        continue;
      }
      const auto sched = build_schedule(t, cp_layout_for(s, t), attention_shape(s));
      fmt::print("\nschedule ({}; one attention layer per TP rank, forward then backward):", to_string(t));
      print_schedule(sched);
    }
  }
  for (const auto& [t, choice] : report.attention_backends)
    fmt::print("  attention backend ({}): {} ({})\n", to_string(t), to_string(choice.kernel), choice.reason);
  print_warnings(report);
  fmt::print("\nvalid: {}\n", s.name);
  return kExitOk;
}

}  // namespace

CLI::App* add_validate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("validate", "check a scenario against Megatron/TE rules and print the CP layout");
  auto common = std::make_shared<Common>();
  auto show_schedule = std::make_shared<bool>(false);
  auto json_path = std::make_shared<std::string>();
  add_scenario_args(cmd, *common);
  cmd->add_flag("--schedule", *show_schedule, "also print every rank's schedule ops");
  cmd->add_option("--json", *json_path, "also write the scenario, layouts and verdict (or the error) as JSON");
  cmd->callback([&exit_code, common, show_schedule, json_path] {
    exit_code = cmd_validate(*common, *show_schedule, *json_path);
  });
  return cmd;
}

}  // namespace hcpsim::app
