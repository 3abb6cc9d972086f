#pragma once
// Checks of a written Chrome trace that a viewer relies on (tests/sim/trace_flow_test.cpp, tests/step/
// step_trace_test.cpp): flow arrows pair up inside slices of their threads, alloc/free are counters, not slices, and
// each GPU's memory counter peaks at the simulator's peak.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch_compat.hpp"
#include "hcpsim/sim/simulator.hpp"

namespace hcpsim::test {

/// What check_trace_viewer_form counted.
struct TraceFormCounts {
  size_t arrows = 0;    ///< "s"/"f" pairs
  size_t counters = 0;  ///< "C" events
  size_t slices = 0;    ///< "X" events
};

/// Every flow start ("s") has exactly one finish ("f", "bp": "e") with its id and cat, both at a ts inside an "X"
/// slice of their own (pid, tid); no "X" slice has cat alloc or free; per GPU of `r` its "memory" counter
/// (id "gpu <g>") reaches r's peak_memory_bytes at its maximum (GPUs that hold memory), and `arrows` messages of r
/// are drawn (all flows with both ops).
inline TraceFormCounts check_trace_viewer_form(const nlohmann::json& trace, const sim::SimResult& r) {
  using Thread = std::pair<int64_t, int64_t>;
  std::map<Thread, std::vector<std::pair<double, double>>> slices;
  std::map<int64_t, std::vector<nlohmann::json>> starts, finishes;
  std::map<std::string, int64_t> counter_max;
  TraceFormCounts n;
  for (const auto& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "X") {
      ++n.slices;
      REQUIRE(e.at("cat") != "alloc");
      REQUIRE(e.at("cat") != "free");
      const double ts = e.at("ts"), dur = e.at("dur");
      slices[{e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()}].emplace_back(ts, ts + dur);
    } else if (ph == "s") {
      starts[e.at("id").get<int64_t>()].push_back(e);
    } else if (ph == "f") {
      REQUIRE(e.at("bp") == "e");
      finishes[e.at("id").get<int64_t>()].push_back(e);
    } else if (ph == "C") {
      ++n.counters;
      REQUIRE(e.at("name") == "memory");
      const std::string id = e.at("id");
      const int64_t v = e.at("args").at("allocated_bytes");
      counter_max[id] = counter_max.count(id) ? std::max(counter_max[id], v) : v;
    }
  }
  const auto inside_a_slice = [&slices](const nlohmann::json& e) {
    const auto it = slices.find({e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()});
    if (it == slices.end()) return false;
    const double ts = e.at("ts");
    for (const auto& [a, b] : it->second)
      if (a <= ts && ts <= b) return true;
    return false;
  };
  REQUIRE(starts.size() == finishes.size());
  for (const auto& [id, s] : starts) {
    INFO("flow id " << id);
    REQUIRE(s.size() == 1);
    REQUIRE(finishes.count(id) == 1);
    REQUIRE(finishes[id].size() == 1);
    const nlohmann::json& f = finishes[id].front();
    REQUIRE(s.front().at("cat") == f.at("cat"));
    REQUIRE(s.front().at("ts").get<double>() <= f.at("ts").get<double>());
    REQUIRE(inside_a_slice(s.front()));
    REQUIRE(inside_a_slice(f));
    ++n.arrows;
  }
  size_t drawable = 0;
  for (const sim::FlowRecord& f : r.flows) drawable += f.src_op >= 0 && f.dst_op >= 0 ? 1 : 0;
  REQUIRE(n.arrows == drawable);
  for (const sim::RankStats& rank : r.ranks) {
    const std::string id = "gpu " + std::to_string(rank.gpu);
    INFO(id);
    if (rank.peak_memory_bytes == 0) continue;
    REQUIRE(counter_max.count(id) == 1);
    REQUIRE(counter_max[id] == rank.peak_memory_bytes);
  }
  return n;
}

}  // namespace hcpsim::test
