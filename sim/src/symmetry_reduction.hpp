#pragma once
// Private to sim/: the run-time side of the symmetry reduction (simulator.hpp, docs/simulator.md "Symmetry
// reduction") — which ranks stand for which, and the link accounting and exactness check of the image messages
// that the executed ring messages stand for.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hcpsim/core/cp_layout.hpp"

#include "hcpsim/sim/flow_network.hpp"
#include "hcpsim/sim/simulator.hpp"

namespace hcpsim::sim::detail {

/// The classes of identical ranks in a run: in a reduced run the layout's symmetry classes (its a2a groups,
/// CpLayout::symmetry_classes) with their representatives executed, size = A; in a full run every rank is its own
/// class, size 1, and is executed.
struct SymmetryClasses {
  /// A full run.
  SymmetryClasses() = default;
  /// A reduced run over `classes`.
  explicit SymmetryClasses(CpSymmetryClasses classes)
      : size(classes.class_size()), classes_(std::move(classes)), reduced_(true) {}

  int64_t size = 1;  ///< ranks per class

  [[nodiscard]] int64_t representative(int64_t rank) const {
    return reduced_ ? classes_.representative(rank) : rank;
  }
  [[nodiscard]] bool represented(int64_t rank) const { return representative(rank) == rank; }
  /// The image of `rank` at class position a (the member of its class at position a).
  [[nodiscard]] int64_t image(int64_t rank, int64_t a) const { return reduced_ ? classes_.image(rank, a) : rank; }

 private:
  CpSymmetryClasses classes_;
  bool reduced_ = false;
};

/// The image messages of a reduced run on the links: they are not in the flow network, so their bytes, flows and
/// busy time are accounted here, and every start is checked against the exactness condition. Disabled (no
/// state, nothing to add) in a full run.
class ShadowLinks {
 public:
  /// @param enabled  true in a symmetry-reduced run.
  ShadowLinks(const Topology& topology, bool enabled);

  /// The representative's flow flows[0] and its images flows[1 … images] start at now_ps.
  /// Exactness check (docs/simulator.md): over the routes of all A class positions, every link must carry
  /// either one active flow, or flows whose route minimum capacities sum to less than its capacity (with a
  /// 1e-9 relative margin). Then max-min fairness gives every such flow exactly its route's minimum capacity,
  /// whichever equal-cost spine ECMP picked for it, so an image drains when its representative does.
  void start(FlowRecord* flows, int64_t images, TimePs now_ps);
  /// The representative's flow drained at now_ps: so do its images (the exactness check holds them to the same
  /// rate).
  void end(FlowRecord* flows, int64_t images, TimePs now_ps);

  /// Records that the reduced run may differ from the full one (the first reason is kept).
  void not_exact(const std::string& why);

  [[nodiscard]] bool exact() const { return exact_; }
  /// Why the run is not exact (empty when exact()).
  [[nodiscard]] const std::string& note() const { return note_; }
  /// The image messages' usage per link, in link id order (empty when disabled).
  [[nodiscard]] std::vector<LinkUsage> usage() const;

 private:
  /// Smallest link capacity of a route (the rate the flow gets when nothing else limits it).
  [[nodiscard]] double min_capacity(const std::vector<int64_t>& route) const;

  const Topology& topology_;
  /// What the exactness check and the images' accounting keep per link, in one cache line (start and end touch
  /// every link of every image route: one miss per link instead of one per array).
  struct alignas(64) Link {
    LinkUsage usage;          ///< the image messages' bytes, flows and busy time
    TimePs busy_since = 0;    ///< start of the current image-busy interval
    double mincap_sum = 0;    ///< sum of the route minimum capacities of the active ring messages
    double capacity = 0;      ///< bytes/s
    int32_t count = 0;        ///< active ring messages over all class positions
    int32_t image_count = 0;  ///< active image messages
    bool nvlink = false;
  };
  std::vector<Link> links_;  ///< by link id (empty when disabled)
  bool exact_ = true;
  std::string note_;
};

}  // namespace hcpsim::sim::detail
