#include "diff_json.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "../app_common.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/config/scenario_yaml.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/io/provenance.hpp"

namespace hcpsim::app {
namespace {

// ordered: the keys stay in the documented order (README, "diff --json").
using json = nlohmann::ordered_json;

json side_json(const DiffSide& s) {
  const sim::PlanOption& o = *s.option;
  return json{{"name", s.scenario->name},
              {"path", s.path},
              {"overrides", s.overrides},
              {"option", o.label},
              {"cp_comm_type", to_string(o.cp_comm_type)},
              {"a2a_size", o.a2a_size},
              {"p2p_size", o.p2p_size},
              {"tp", o.tp},
              {"cp", o.cp},
              {"data_parallel_size", o.data_parallel_size},
              {"step_time_s", static_cast<double>(o.step.step_ps) * 1e-12},
              {"memory_per_gpu_bytes", std::llround(o.step.memory.total_bytes)},
              {"capacity_bytes", std::llround(o.step.memory.capacity_bytes)},
              {"fits", o.step.memory.fits},
              {"scenario_digest", content_digest(to_yaml(*s.scenario))}};
}

// The row's unit in the report: memory rows carry bytes (the text prints them as GB).
std::string json_unit(const std::string& unit) { return unit == "GB" || unit == "B" ? "bytes" : unit; }

}  // namespace

void write_diff_json(const std::string& path, const DiffSide& a, const DiffSide& b,
                     const std::vector<sim::DiffRow>& rows) {
  json j;
  j["a"] = side_json(a);
  j["b"] = side_json(b);
  size_t changed = 0;
  json out_rows = json::array();
  for (const auto& r : rows) {
    const double rel = r.relative();
    changed += rel > 0 ? 1 : 0;
    out_rows.push_back({{"group", r.group},
                        {"quantity", r.name},
                        {"unit", json_unit(r.unit)},
                        {"a", r.a},
                        {"b", r.b},
                        {"delta", r.delta()},
                        {"relative", std::isfinite(rel) ? json(rel) : json(nullptr)}});
  }
  j["compared"] = rows.size();
  j["changed"] = changed;
  j["rows"] = std::move(out_rows);
  write_output_file(path, with_provenance(j.dump(), scenario_provenance(*b.scenario, b.overrides)), "diff JSON",
                    "--json");
}

}  // namespace hcpsim::app
