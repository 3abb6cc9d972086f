#include <fmt/core.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "admission.hpp"
#include "app_common.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/plan/plan.hpp"
#include "report/diff_json.hpp"

namespace hcpsim::app {
namespace {

struct DiffArgs {
  std::string a;
  std::vector<std::string> rest;  ///< [B.yaml] [overrides…]
  std::vector<std::string> both;  ///< --both KEY=VALUE (repeatable): overrides of both sides, before B's own
  std::string max_memory;         ///< --max-memory text; empty: the machine's default (admission.hpp)
  std::string json;               ///< --json FILE; empty: none
};

std::string value_text(const sim::DiffRow& r, double v) {
  if (r.unit == "s") return human_time_ps(static_cast<int64_t>(std::llround(v * 1e12)));
  if (r.unit == "B") return human_bytes(v);
  if (r.unit == "GB") return fmt::format("{:.2f} GB", v / 1e9);
  if (r.unit == "count") return fmt::format("{:.0f}", v);
  return fmt::format("{:.1f} {}", v, r.unit);
}

std::string delta_text(const sim::DiffRow& r) {
  const double d = r.delta();
  const std::string sign = d > 0 ? "+" : (d < 0 ? "-" : "");
  // A memory change below 0.005 GB would print as "-0.00 GB" next to a non-zero percentage: in MB instead.
  if (r.unit == "GB" && std::fabs(d) < 5e6) return sign + fmt::format("{:.2f} MB", std::fabs(d) / 1e6);
  return sign + value_text(r, std::fabs(d));
}

/// The relative change as a percentage with one decimal; three where one would print 0.0% for a change (the row is
/// listed because it changed), and "+<0.001%" / "-<0.001%" below that.
std::string change_text(const sim::DiffRow& r) {
  if (r.a == 0) return "new";
  const double pct = 100.0 * r.delta() / std::fabs(r.a);
  if (std::fabs(pct) >= 0.05) return fmt::format("{:+.1f}%", pct);
  if (std::fabs(pct) >= 0.0005) return fmt::format("{:+.3f}%", pct);
  return pct > 0 ? "+<0.001%" : "-<0.001%";
}

int cmd_diff(const DiffArgs& args) {
  std::string b_path = args.a;
  std::vector<std::string> overrides;
  size_t first = 0;
  if (!args.rest.empty() && args.rest[0].find('=') == std::string::npos) {
    b_path = args.rest[0];
    first = 1;
  }
  if (first == 0 && args.rest.size() == first)
    throw InputError(SourceLoc{}, "", "diff needs a second side: a scenario B or overrides of A",
                     "run 'hcpsim diff A.yaml B.yaml' or 'hcpsim diff A.yaml key=value ...'");
  // --both first, then B's own: B's override of the same key wins, as a later override does in Megatron-Bridge.
  overrides = args.both;
  overrides.insert(overrides.end(), args.rest.begin() + static_cast<std::ptrdiff_t>(first), args.rest.end());
  const Scenario sa = load_scenario(args.a, args.both);
  const Scenario sb = load_scenario(b_path, overrides);
  check_requested_outputs({{args.json, "--json", "diff JSON"}});
  const uint64_t max_memory = max_memory_limit(args.max_memory);
  // Before either is simulated.
  admit_simulation(sa, validate_scenario(sa, ValidationScope::placement).data_parallel_size, max_memory,
                   "diff (scenario A)");
  admit_simulation(sb, validate_scenario(sb, ValidationScope::placement).data_parallel_size, max_memory,
                   "diff (scenario B)");
  const sim::PlanOption a = sim::evaluate_scenario(sa);
  const sim::PlanOption b = sim::evaluate_scenario(sb);
  // The layout each side resolved to, DP and the micro-batches included: a TP or CP change moves DP (it fills the
  // cluster) and with it the micro-batches per iteration, which the step time and the DP collectives follow.
  auto layout = [](const sim::PlanOption& o) {
    return fmt::format("{}, DP {}, {} micro-batch{} per iteration", o.label, o.data_parallel_size,
                       o.step.num_microbatches, o.step.num_microbatches == 1 ? "" : "es");
  };
  std::string a_desc = args.a;
  for (const auto& o : args.both) a_desc += " " + o;
  fmt::print("diff A: {} ({}, {})\n", sa.name, a_desc, layout(a));
  std::string b_desc = b_path;
  for (const auto& o : overrides) b_desc += " " + o;
  fmt::print("     B: {} ({}, {})\n", sb.name, b_desc, layout(b));
  const auto rows = sim::diff_rows(a, b);
  if (!args.json.empty())
    write_diff_json(args.json, DiffSide{&sa, args.a, args.both, &a}, DiffSide{&sb, b_path, overrides, &b}, rows);
  size_t changed = 0;
  for (const auto& r : rows) changed += r.relative() > 0 ? 1 : 0;
  if (changed == 0) {
    fmt::print("no change: the two configurations simulate identically ({} quantities compared)\n", rows.size());
    return kExitOk;
  }
  fmt::print("{} of {} quantities changed, largest relative difference first (A -> B); layer messages are the simulated "
             "layer's TP and CP messages of one micro-batch, the recomputed forward counted as backward:\n",
             changed, rows.size());
  fmt::print("  {:<44} {:>14} {:>14} {:>15} {:>8}\n", "quantity", "A", "B", "B - A", "change");
  for (const auto& r : rows) {
    if (r.relative() == 0) continue;
    fmt::print("  {:<44} {:>14} {:>14} {:>15} {:>8}\n", r.name, value_text(r, r.a), value_text(r, r.b),
               delta_text(r), change_text(r));
  }
  if (a.step.memory.fits != b.step.memory.fits)
    fmt::print("memory: A {} but B {}\n", a.step.memory.fits ? "fits" : "does not fit",
               b.step.memory.fits ? "fits" : "does not fit");
  return kExitOk;
}

}  // namespace

CLI::App* add_diff_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("diff", "simulate two configurations and show what changed, largest first");
  auto a = std::make_shared<DiffArgs>();
  cmd->add_option("A", a->a, "scenario A (YAML)")->required();
  cmd->add_option("B_or_overrides", a->rest,
                  "scenario B, or overrides applied to A to make B (a B file followed by overrides: they apply to B)");
  cmd->add_option("--both", a->both,
                  "an override applied to both A and B, before B's own (repeatable), e.g. --both cluster.nodes=1 "
                  "--both parallel.context_parallel_size=8")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_max_memory_option(cmd, a->max_memory);
  add_quiet_flag(cmd);
  cmd->add_option("--json", a->json, "also write both sides and every compared quantity (SI units) as JSON");
  cmd->callback([&exit_code, a] { exit_code = cmd_diff(*a); });
  return cmd;
}

}  // namespace hcpsim::app
