#include "hcpsim/sim/simulator.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule_hazards.hpp"
#include "sim_engine.hpp"

namespace hcpsim::sim {

using detail::index_of;

const std::vector<int64_t>& SharedRoute::links() const {
  static const std::vector<int64_t> none;
  return links_ ? *links_ : none;
}

LinkClassUtilisation SimResult::link_class_utilisation(LinkClass c) const {
  LinkClassUtilisation u;
  double capacity_sum = 0;
  const double total_s = static_cast<double>(total_ps) / kPsPerSecond;
  for (const LinkStats& l : links) {
    if (l.link_class != c) continue;
    ++u.links;
    u.bytes += l.bytes;
    capacity_sum += l.bandwidth_bytes_per_s;
    if (total_s > 0)
      u.max_utilisation = std::max(u.max_utilisation, static_cast<double>(l.bytes) / (l.bandwidth_bytes_per_s * total_s));
  }
  if (capacity_sum > 0 && total_s > 0) u.mean_utilisation = static_cast<double>(u.bytes) / (capacity_sum * total_s);
  return u;
}

namespace {
bool less_busy(const RankStats& a, const RankStats& b) { return a.compute_busy_ps < b.compute_busy_ps; }
}  // namespace

const RankStats* SimResult::most_busy_rank() const {
  return ranks.empty() ? nullptr : &*std::max_element(ranks.begin(), ranks.end(), less_busy);
}

TimePs SimResult::critical_exposed_comm_ps() const {
  const RankStats* busiest = most_busy_rank();
  return busiest == nullptr ? 0 : total_ps - busiest->compute_busy_ps;
}

TimePs SimResult::load_imbalance_ps() const {
  const RankStats* busiest = most_busy_rank();
  if (busiest == nullptr) return 0;
  return busiest->compute_busy_ps - std::min_element(ranks.begin(), ranks.end(), less_busy)->compute_busy_ps;
}

SimResult simulate(const Schedule& schedule, const ClusterSpec& cluster, const Topology& topology,
                   const std::vector<int64_t>& gpu_of_cp_rank, const SimOptions& options) {
  if (options.symmetry_reduction) {
    const std::string blocker = symmetry_reduction_blocker(schedule.cp_comm_type, schedule.a2a_size,
                                                           schedule.p2p_size, cluster, gpu_of_cp_rank);
    HCPSIM_ASSERT(blocker.empty(), "symmetry reduction requested but it does not apply: " + blocker);
    HCPSIM_ASSERT(schedule.ranks.size() == gpu_of_cp_rank.size(), "schedule and placement disagree on CP");
    for (int64_t r : symmetry_representatives(schedule.a2a_size, schedule.p2p_size))
      HCPSIM_ASSERT(!schedule.ranks[index_of(r)].ops.empty(), fmt::format("representative cp rank {} has no ops", r));
  } else {
#ifdef NDEBUG
    if (!options.schedule_checked) schedule.check_invariants(options.threads);  // else its builder just did
#else
    schedule.check_invariants(options.threads);
    check_hazards(schedule);
#endif
  }
  HCPSIM_ASSERT(gpu_of_cp_rank.size() == schedule.ranks.size(),
                fmt::format("gpu_of_cp_rank has {} entries for {} cp ranks", gpu_of_cp_rank.size(),
                            schedule.ranks.size()));
  std::vector<int64_t> sorted = gpu_of_cp_rank;
  std::sort(sorted.begin(), sorted.end());
  HCPSIM_ASSERT(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "two cp ranks on one GPU");
  for (int64_t g : gpu_of_cp_rank) {
    HCPSIM_ASSERT(g >= 0, "negative GPU index");
    HCPSIM_ASSERT(g < topology.gpu_count(), fmt::format("GPU {} beyond the topology's {} GPUs", g, topology.gpu_count()));
  }
  detail::Engine engine(schedule, cluster, topology, gpu_of_cp_rank, options);
  return engine.run();
}

SimResult simulate(const Schedule& schedule, const ClusterSpec& cluster, const std::vector<int64_t>& node_of_cp_rank,
                   const SimOptions& options) {
  HCPSIM_ASSERT(node_of_cp_rank.size() == schedule.ranks.size(),
                fmt::format("node_of_cp_rank has {} entries for {} cp ranks", node_of_cp_rank.size(),
                            schedule.ranks.size()));
  ClusterSpec c = cluster;
  c.topology = ExplicitTopology{};
  std::vector<int64_t> next_slot;
  std::vector<int64_t> gpus;
  for (int64_t n : node_of_cp_rank) {
    HCPSIM_ASSERT(n >= 0, "negative node index");
    if (index_of(n) >= next_slot.size()) next_slot.resize(index_of(n) + 1, 0);
    HCPSIM_ASSERT(next_slot[index_of(n)] < c.gpus_per_node, fmt::format("more than {} cp ranks on node {}",
                                                                       c.gpus_per_node, n));
    gpus.push_back(n * c.gpus_per_node + next_slot[index_of(n)]++);
  }
  c.nodes = std::max<int64_t>(c.nodes, static_cast<int64_t>(next_slot.size()));
  const Topology topology = Topology::from_cluster(c);
  return simulate(schedule, c, topology, gpus, options);
}

std::vector<int64_t> cp_rank_nodes(const std::string& order, const ParallelSizes& sizes, int64_t gpus_per_node) {
  std::vector<int64_t> nodes;
  for (const CpRankPlacement& p : place_cp_group(order, sizes, gpus_per_node)) nodes.push_back(p.node);
  return nodes;
}

std::vector<int64_t> cp_rank_gpus(const std::string& order, const ParallelSizes& sizes, int64_t gpus_per_node) {
  std::vector<int64_t> gpus;
  for (const CpRankPlacement& p : place_cp_group(order, sizes, gpus_per_node)) gpus.push_back(p.global_rank);
  return gpus;
}

}  // namespace hcpsim::sim
