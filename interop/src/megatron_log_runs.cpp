// Splitting a log that several runs wrote to into its runs (megatron_log.hpp, megatron_log_runs).
#include <algorithm>
#include <sstream>

#include "hcpsim/interop/megatron_log.hpp"

namespace hcpsim {

std::vector<LogRunRange> megatron_log_runs(const std::string& bytes) {
  std::vector<LogRunRange> runs;
  std::istringstream in(bytes);
  std::string line;
  int number = 0;
  int start = 1;
  bool world = false;
  bool args = false;
  while (std::getline(in, line)) {
    ++number;
    const bool is_world = line.find("using world size: ") != std::string::npos;
    const bool is_args = line.find("-- arguments --") != std::string::npos;
    if ((is_world && (world || args)) || (is_args && args)) {
      runs.push_back({start, number - 1});
      start = number;
      world = args = false;
    }
    world = world || is_world;
    args = args || is_args;
  }
  runs.push_back({start, std::max(number, start)});
  return runs;
}

void add_throughput_report(MegatronLog& log, const ThroughputReport& t) {
  auto& reports = log.throughput;
  // Megatron counts iterations from 1: 0 is a line that gave no `iteration N`, which says nothing about a resume.
  if (!reports.empty() && t.iteration > 0 && reports.back().iteration > 0 && t.iteration <= reports.back().iteration) {
    log.resumed_at.push_back(t);
    reports.erase(std::remove_if(reports.begin(), reports.end(),
                                 [&](const ThroughputReport& r) { return r.iteration >= t.iteration; }),
                  reports.end());
  }
  reports.push_back(t);
}

}  // namespace hcpsim
