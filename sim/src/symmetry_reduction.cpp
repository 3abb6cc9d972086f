#include "symmetry_reduction.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "hcpsim/core/cp_variant.hpp"

namespace hcpsim::sim {

namespace detail {

namespace {

// A link shared by concurrent ring messages must have this relative headroom above the sum of their route
// minimum capacities, so that no rounding of the max-min arithmetic can make it a bottleneck.
// Source: far above double rounding (~1e-16 relative per operation), far below any real headroom.
constexpr double kShadowMargin = 1e-9;

size_t link_index(int64_t l) { return static_cast<size_t>(l); }

}  // namespace

ShadowLinks::ShadowLinks(const Topology& topology, bool enabled) : topology_(topology) {
  if (!enabled) return;
  links_.resize(topology.links().size());
  for (size_t l = 0; l < links_.size(); ++l) {
    const TopologyLink& tl = topology.links()[l];
    links_[l].capacity = tl.bandwidth_bytes_per_s;
    links_[l].nvlink = tl.link_class == LinkClass::nvlink;
  }
}

std::vector<LinkUsage> ShadowLinks::usage() const {
  std::vector<LinkUsage> u;
  u.reserve(links_.size());
  for (const Link& l : links_) u.push_back(l.usage);
  return u;
}

void ShadowLinks::not_exact(const std::string& why) {
  if (exact_) note_ = why;
  exact_ = false;
}

double ShadowLinks::min_capacity(const std::vector<int64_t>& route) const {
  double c = std::numeric_limits<double>::infinity();
  for (int64_t l : route) c = std::min(c, links_[link_index(l)].capacity);
  return c;
}

void ShadowLinks::start(FlowRecord* flows, int64_t images, TimePs now_ps) {
  for (int64_t a = 0; a <= images; ++a) {
    FlowRecord& rec = flows[a];
    rec.start_ps = now_ps;
    const double mincap = min_capacity(rec.route);
    for (int64_t l : rec.route) {
      Link& link = links_[link_index(l)];
      ++link.count;
      link.mincap_sum += mincap;
      if (link.nvlink)
        not_exact(fmt::format("ring message {}→{} crosses NVLink link {}", rec.src_cp_rank, rec.dst_cp_rank, l));
      if (link.count > 1 && !(link.mincap_sum < link.capacity * (1 - kShadowMargin)))
        not_exact(fmt::format("link {} carries {} concurrent ring messages without headroom at t = {} ps", l,
                              link.count, now_ps));
      if (a == 0) continue;  // the representative's flow is in the flow network's usage
      if (link.image_count++ == 0) link.busy_since = now_ps;
      link.usage.bytes += rec.bytes;
      ++link.usage.flows;
    }
  }
}

void ShadowLinks::end(FlowRecord* flows, int64_t images, TimePs now_ps) {
  for (int64_t a = 0; a <= images; ++a) {
    FlowRecord& rec = flows[a];
    rec.drained_ps = now_ps;
    const double mincap = min_capacity(rec.route);
    for (int64_t l : rec.route) {
      Link& link = links_[link_index(l)];
      --link.count;
      link.mincap_sum -= mincap;
      if (link.count == 0) link.mincap_sum = 0;  // no drift from the float sums
      if (a == 0) continue;
      if (--link.image_count == 0) link.usage.busy_ps += now_ps - link.busy_since;
    }
  }
}

}  // namespace detail

std::string symmetry_reduction_blocker(CpCommType cp_comm_type, int64_t a2a_size, int64_t p2p_size,
                                       const ClusterSpec& cluster, const std::vector<int64_t>& gpu_of_cp_rank) {
  if (!cp_variant(cp_comm_type).symmetric_a2a_groups) return "cp_comm_type has no a2a level";
  if (a2a_size < 2) return "A < 2 (nothing to reduce)";
  if (!cluster.topology.vertices.empty()) return "explicit topology (its symmetry is not known)";
  if (cluster.fabric.kind != FabricSpec::Kind::rail_optimized) return "fabric is not rail-optimised";
  if (cluster.nics_per_node != 0 && cluster.nics_per_node != cluster.gpus_per_node) return "not one NIC per GPU";
  if (cluster.gpus_per_node != a2a_size) return "A != gpus_per_node (an a2a group is not one whole node)";
  if (static_cast<int64_t>(gpu_of_cp_rank.size()) != a2a_size * p2p_size) return "placement size != A*P";
  // Class position a must be GPU a (rail a) of the node that holds the whole class.
  const CpSymmetryClasses classes = CpLayout::a2a_group_classes(a2a_size, p2p_size);
  for (size_t g = 0; g < gpu_of_cp_rank.size(); ++g) {
    const auto rank = static_cast<int64_t>(g);
    const int64_t pos = classes.position(rank);
    const int64_t gpu = gpu_of_cp_rank[g];
    const int64_t rep_gpu = gpu_of_cp_rank[static_cast<size_t>(classes.representative(rank))];
    if (gpu < 0 || gpu % cluster.gpus_per_node != pos || gpu - rep_gpu != pos)
      return fmt::format("cp rank {} is not on GPU {} of its a2a group's node", rank, pos);
  }
  return "";
}

std::vector<int64_t> symmetry_representatives(int64_t a2a_size, int64_t p2p_size) {
  return CpLayout::a2a_group_classes(a2a_size, p2p_size).representatives();
}

}  // namespace hcpsim::sim
