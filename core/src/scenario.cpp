#include "hcpsim/core/scenario.hpp"

#include <algorithm>

namespace hcpsim {

bool ModelConfig::has_sliding_window() const {
  if (!window_size) return false;
  return std::any_of(window_size->begin(), window_size->end(), [](int64_t w) { return w >= 0; });
}

std::vector<CpCommType> ParallelConfig::distinct_cp_comm_types() const {
  std::vector<CpCommType> out;
  for (CpCommType t : cp_comm_type)
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  return out;
}

SourceLoc Scenario::loc(const std::string& key) const {
  std::string k = key;
  while (!k.empty()) {
    auto it = locations.find(k);
    if (it != locations.end()) return it->second;
    auto dot = k.rfind('.');
    if (dot == std::string::npos) break;
    k.resize(dot);
  }
  SourceLoc file_only;
  file_only.file = source_path;
  return file_only;
}

}  // namespace hcpsim
