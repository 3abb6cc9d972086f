#include "check_log_json.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "hcpsim/io/output_file.hpp"

namespace hcpsim::app {
namespace {

// ordered: the keys stay in the documented order (README, "check-log --json").
using json = nlohmann::ordered_json;

json world_json(const std::optional<WorldSizeReport>& world) {
  if (!world) return nullptr;
  const WorldSizeReport& w = *world;
  json hier = nullptr;
  if (w.hierarchical_sizes) hier = *w.hierarchical_sizes;
  return json{{"line", w.line},
              {"world_size", w.world_size},
              {"data_parallel_size", w.data_parallel_size},
              {"context_parallel_size", w.context_parallel_size ? json(*w.context_parallel_size) : json(nullptr)},
              {"reports_hierarchical", w.reports_hierarchical},
              {"hierarchical_context_parallel_sizes", hier},
              {"tensor_model_parallel_size", w.tensor_model_parallel_size},
              {"pipeline_model_parallel_size", w.pipeline_model_parallel_size}};
}

json arguments_json(const MegatronLog& log, const std::optional<MegatronConfig>& args) {
  if (log.arguments_begin_line == 0) return nullptr;
  json j{{"begin_line", log.arguments_begin_line},
         {"end_line", log.arguments_end_line},
         {"count", log.arguments.size()},
         {"interpreted", args.has_value()}};
  if (args) {
    j["cp_comm_type"] = args->cp_comm_type;
    j["context_parallel_size"] = args->context_parallel_size;
    j["hierarchical_context_parallel_sizes"] =
        args->hierarchical_context_parallel_sizes ? json(*args->hierarchical_context_parallel_sizes) : json(nullptr);
  }
  return j;
}

json throughput_json(const MegatronLog& log) {
  if (log.throughput.empty())
    return json{{"iterations", 0}, {"max_tflops_per_gpu", nullptr}, {"max_line", nullptr}};
  const auto mx = std::max_element(log.throughput.begin(), log.throughput.end(),
                                   [](const auto& a, const auto& b) { return a.tflops_per_gpu < b.tflops_per_gpu; });
  json resumed = json::array();
  for (const ThroughputReport& r : log.resumed_at) resumed.push_back(r.line);
  return json{{"iterations", log.throughput.size()},
              {"max_tflops_per_gpu", mx->tflops_per_gpu},
              {"max_line", mx->line},
              {"resumed_lines", resumed}};
}

/// One run's report, without the log path and the provenance.
json run_json(const CheckLogReport& r) {
  const bool clean = r.findings.empty();
  json j;
  j["result"] = clean ? "clean" : "findings";
  j["exit_code"] = clean ? 0 : 1;
  j["world"] = world_json(r.log->world);
  j["arguments"] = arguments_json(*r.log, *r.arguments);
  j["throughput"] = throughput_json(*r.log);
  j["gpu_peak"] = {{"tflops_per_gpu", r.peak.tflops}, {"fp8_tflops_per_gpu", r.peak.fp8_tflops}, {"source", r.peak.source}, {"assumed", r.peak.assumed}};
  j["model"] = {{"status", r.model.status},
                {"predicted_tflops_per_gpu",
                 r.model.predicted_tflops_per_gpu ? json(*r.model.predicted_tflops_per_gpu) : json(nullptr)},
                {"convention", r.model.convention},
                {"convention_identified", r.model.convention_identified},
                {"summary", r.model.summary}};
  j["warnings"] = r.warnings;
  j["findings"] = json::array();
  for (const auto& f : r.findings) j["findings"].push_back({{"line", f.line}, {"message", f.message}, {"quote", f.quote}});
  return j;
}

}  // namespace

void write_check_log_json(const std::string& path, const std::vector<CheckLogReport>& runs) {
  const CheckLogReport& last = runs.back();
  json j;
  j["log"] = last.log_path;
  const json last_json = run_json(last);
  for (const auto& item : last_json.items()) j[item.key()] = item.value();
  if (runs.size() > 1) {
    json findings = json::array();
    json per_run = json::array();
    for (const CheckLogReport& r : runs) {
      const json one = run_json(r);
      for (const auto& f : one.at("findings")) findings.push_back(f);
      json entry{{"first_line", r.lines.first_line}, {"last_line", r.lines.last_line}};
      for (const auto& item : one.items())
        if (item.key() != "exit_code") entry[item.key()] = item.value();
      per_run.push_back(entry);
    }
    j["result"] = findings.empty() ? "clean" : "findings";
    j["exit_code"] = findings.empty() ? 0 : 1;
    j["findings"] = findings;
    j["runs"] = per_run;
  }
  const Provenance provenance = last.provenance ? *last.provenance : make_provenance("", {}, 0);
  write_output_file(path, with_provenance(j.dump(), provenance), "check-log JSON", "--json");
}

void write_check_log_error_json(const std::string& path, const std::string& log_path, const InputError& error) {
  const json j = {{"log", log_path},
                  {"result", "error"},
                  {"exit_code", 2},
                  {"error",
                   {{"message", error.what()}, {"key", error.key()}, {"problem", error.problem()}, {"fix", error.fix()}}}};
  write_output_file(path, j.dump(2) + "\n", "check-log JSON", "--json");
}

}  // namespace hcpsim::app
