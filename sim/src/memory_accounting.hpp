#pragma once
// Private to sim/: memory accounting of the simulated ranks — which buffers are live, the live bytes, and their
// peaks over the run and per phase. alloc and free change a rank's live memory when they start (simulator.hpp).

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim_context.hpp"

namespace hcpsim::sim::detail {

/// Memory of one rank.
struct RankMemory {
  std::vector<char> live;  ///< per buffer: currently allocated
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
  std::array<int64_t, kPhaseCount> phase_peak_bytes{};  ///< peak reached by allocs of each phase
  int64_t input_bytes = 0;                              ///< bytes of RankProgram::inputs buffers
  /// With SimOptions::record_timeline: every alloc and free in run order, with the live bytes right after it
  /// (TimelineEntry::live_bytes, memory_change); empty otherwise.
  std::vector<std::pair<OpIndex, int64_t>> changes;
};

/// Memory of every rank (only executed ranks are tracked; an image's entry stays empty).
class MemoryAccounting {
 public:
  explicit MemoryAccounting(const SimContext& ctx);

  /// Makes the RankProgram::inputs buffers of `rank` live from t = 0 (one buffer bound twice is live once).
  /// HCPSIM_ASSERT on an input without a buffer or with a buffer id out of range.
  void bind_inputs(int64_t rank);
  /// Alloc op i of `rank` starts: its buffer becomes live. HCPSIM_ASSERT if it already is.
  void allocate(int64_t rank, OpIndex i);
  /// Free op i of `rank` starts: its buffer becomes dead. HCPSIM_ASSERT if it already is.
  void release(int64_t rank, OpIndex i);

  [[nodiscard]] const RankMemory& of(int64_t rank) const { return ranks_[index_of(rank)]; }

 private:
  const SimContext& ctx_;
  std::vector<RankMemory> ranks_;  ///< indexed by cp rank
};

}  // namespace hcpsim::sim::detail
