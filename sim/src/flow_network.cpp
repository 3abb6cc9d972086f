#include "hcpsim/sim/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"

namespace hcpsim::sim {

namespace {
size_t ix(int64_t i) { return static_cast<size_t>(i); }
}  // namespace

FlowNetwork::FlowNetwork(EventQueue& queue, std::vector<double> capacities_bytes_per_s, int completion_priority,
                         int recompute_priority)
    : queue_(queue),
      capacity_(std::move(capacities_bytes_per_s)),
      completion_priority_(completion_priority),
      recompute_priority_(recompute_priority) {
  for (size_t l = 0; l < capacity_.size(); ++l)
    HCPSIM_ASSERT(std::isfinite(capacity_[l]) && capacity_[l] > 0, fmt::format("link {}: capacity must be > 0", l));
  link_flows_.resize(capacity_.size());
  usage_.resize(capacity_.size());
  busy_since_.assign(capacity_.size(), 0);
  link_dirty_.assign(capacity_.size(), 0);
  link_seen_.assign(capacity_.size(), 0);
}

int64_t FlowNetwork::start_flow(const std::vector<int64_t>& route, int64_t bytes, Done on_drained) {
  HCPSIM_ASSERT(bytes >= 0, "negative flow size");
  const auto id = static_cast<int64_t>(flows_.size());
  flows_.push_back(Flow{});
  flow_seen_.push_back(0);
  Flow& f = flows_.back();
  f.links = route;
  f.remaining_bytes = static_cast<double>(bytes);
  f.updated_ps = queue_.now();
  f.on_drained = std::move(on_drained);
  for (int64_t l : route) {
    HCPSIM_ASSERT(l >= 0 && ix(l) < capacity_.size(), fmt::format("flow {}: link {} out of range", id, l));
    usage_[ix(l)].bytes += bytes;
    ++usage_[ix(l)].flows;
  }
  if (route.empty() || bytes == 0) {
    f.drain_event = queue_.schedule_at(queue_.now(), completion_priority_, [this, id] { drained(id); });
    return id;
  }
  f.active = true;
  for (int64_t l : route) {
    link_flows_[ix(l)].push_back(id);  // ids grow, so each list stays ascending
    link_active_change(l, +1);
  }
  mark_dirty(route);
  return id;
}

double FlowNetwork::rate(int64_t flow) const { return flows_.at(ix(flow)).rate; }

void FlowNetwork::link_active_change(int64_t link, int delta) {
  const size_t n = link_flows_[ix(link)].size();
  if (delta > 0 && n == 1) busy_since_[ix(link)] = queue_.now();
  if (delta < 0 && n == 0) usage_[ix(link)].busy_ps += queue_.now() - busy_since_[ix(link)];
}

void FlowNetwork::mark_dirty(const std::vector<int64_t>& links) {
  for (int64_t l : links) {
    if (link_dirty_[ix(l)]) continue;
    link_dirty_[ix(l)] = 1;
    dirty_links_.push_back(l);
  }
  if (!recompute_pending_) {
    recompute_pending_ = true;
    queue_.schedule_at(queue_.now(), recompute_priority_, [this] { recompute(); });
  }
}

void FlowNetwork::drained(int64_t id) {
  Flow& f = flows_[ix(id)];
  f.drain_event = -1;
  f.remaining_bytes = 0;
  if (f.active) {
    f.active = false;
    for (int64_t l : f.links) {
      auto& v = link_flows_[ix(l)];
      v.erase(std::lower_bound(v.begin(), v.end(), id));
      link_active_change(l, -1);
    }
    mark_dirty(f.links);
  }
  Done done = std::move(f.on_drained);
  f.on_drained = nullptr;
  done();
}

void FlowNetwork::recompute() {
  recompute_pending_ = false;
  ++recomputes_;
  // 1. The affected component: flows and links reachable from the dirty links through shared links.
  std::vector<int64_t> comp_links;
  std::vector<int64_t> comp_flows;
  std::vector<int64_t> stack = dirty_links_;
  for (int64_t l : dirty_links_) {
    link_dirty_[ix(l)] = 0;
    link_seen_[ix(l)] = 1;
  }
  dirty_links_.clear();
  while (!stack.empty()) {
    const int64_t l = stack.back();
    stack.pop_back();
    comp_links.push_back(l);
    for (int64_t fid : link_flows_[ix(l)]) {
      if (flow_seen_[ix(fid)]) continue;
      flow_seen_[ix(fid)] = 1;
      comp_flows.push_back(fid);
      for (int64_t l2 : flows_[ix(fid)].links) {
        if (link_seen_[ix(l2)]) continue;
        link_seen_[ix(l2)] = 1;
        stack.push_back(l2);
      }
    }
  }
  std::sort(comp_links.begin(), comp_links.end());
  std::sort(comp_flows.begin(), comp_flows.end());
  for (int64_t l : comp_links) link_seen_[ix(l)] = 0;
  for (int64_t fid : comp_flows) flow_seen_[ix(fid)] = 0;

  // 2. Bring every affected flow's remaining bytes up to now at its old rate.
  const TimePs now = queue_.now();
  for (int64_t fid : comp_flows) {
    Flow& f = flows_[ix(fid)];
    const double elapsed_s = static_cast<double>(now - f.updated_ps) / kPsPerSecond;
    f.remaining_bytes = std::max(0.0, f.remaining_bytes - f.rate * elapsed_s);
    f.updated_ps = now;
  }

  // 3. Progressive filling over the component.
  std::vector<double> cap(comp_links.size());
  std::vector<int64_t> unfrozen(comp_links.size());
  for (size_t i = 0; i < comp_links.size(); ++i) {
    cap[i] = capacity_[ix(comp_links[i])];
    unfrozen[i] = static_cast<int64_t>(link_flows_[ix(comp_links[i])].size());
  }
  auto pos = [&comp_links](int64_t l) {
    return static_cast<size_t>(std::lower_bound(comp_links.begin(), comp_links.end(), l) - comp_links.begin());
  };
  std::vector<double> new_rate(comp_flows.size(), -1);
  auto fpos = [&comp_flows](int64_t fid) {
    return static_cast<size_t>(std::lower_bound(comp_flows.begin(), comp_flows.end(), fid) - comp_flows.begin());
  };
  size_t left = comp_flows.size();
  while (left > 0) {
    size_t best = comp_links.size();
    double best_share = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < comp_links.size(); ++i) {
      if (unfrozen[i] == 0) continue;
      const double share = std::max(0.0, cap[i]) / static_cast<double>(unfrozen[i]);
      if (share < best_share) {
        best_share = share;
        best = i;
      }
    }
    HCPSIM_ASSERT(best < comp_links.size(), "progressive filling found no bottleneck");
    HCPSIM_ASSERT(best_share > 0, fmt::format("link {}: fair share is 0", comp_links[best]));
    for (int64_t fid : link_flows_[ix(comp_links[best])]) {
      const size_t fp = fpos(fid);
      if (new_rate[fp] >= 0) continue;
      new_rate[fp] = best_share;
      --left;
      for (int64_t l2 : flows_[ix(fid)].links) {
        const size_t p = pos(l2);
        cap[p] -= best_share;
        --unfrozen[p];
      }
    }
  }

  // 4. Reschedule the drains of flows whose rate changed.
  for (size_t i = 0; i < comp_flows.size(); ++i) {
    Flow& f = flows_[ix(comp_flows[i])];
    if (f.drain_event >= 0 && new_rate[i] == f.rate) continue;
    if (f.drain_event >= 0) queue_.cancel(f.drain_event);
    f.rate = new_rate[i];
    const TimePs delay = seconds_to_ps(f.remaining_bytes / f.rate);
    const int64_t fid = comp_flows[i];
    f.drain_event = queue_.schedule_at(now + delay, completion_priority_, [this, fid] { drained(fid); });
  }
}

}  // namespace hcpsim::sim
