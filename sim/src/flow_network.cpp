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
  link_cap_.assign(capacity_.size(), 0);
  link_unfrozen_.assign(capacity_.size(), 0);
  link_share_.assign(capacity_.size(), 0);
}

int64_t FlowNetwork::start_flow(const std::vector<int64_t>& route, int64_t bytes, Done on_drained) {
  HCPSIM_ASSERT(bytes >= 0, "negative flow size");
  const int64_t id = flows_started_++;
  int64_t slot = 0;
  if (free_slots_.empty()) {
    slot = static_cast<int64_t>(flows_.size());
    flows_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  Flow& f = flows_[ix(slot)];
  f.id = id;
  f.remaining_bytes = static_cast<double>(bytes);
  f.rate = 0;
  f.updated_ps = queue_.now();
  f.links.assign(route.begin(), route.end());
  f.on_drained = std::move(on_drained);
  for (int64_t l : route) {
    HCPSIM_ASSERT(l >= 0 && ix(l) < capacity_.size(), fmt::format("flow {}: link {} out of range", id, l));
    usage_[ix(l)].bytes += bytes;
    ++usage_[ix(l)].flows;
  }
  if (route.empty() || bytes == 0) {
    f.drain_event = queue_.schedule_at(queue_.now(), completion_priority_, [this, slot] { drained(slot); });
    return id;
  }
  f.active = true;
  for (int64_t l : route) {
    link_flows_[ix(l)].push_back(LinkFlow{id, slot});  // ids grow, so each list stays ascending
    link_active_change(l, +1);
  }
  mark_dirty(route);
  return id;
}

double FlowNetwork::rate(int64_t flow) const {
  for (const Flow& f : flows_)
    if (f.id == flow) return f.rate;
  return 0;
}

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

void FlowNetwork::drained(int64_t slot) {
  Flow& f = flows_[ix(slot)];
  const int64_t id = f.id;
  f.drain_event = -1;
  f.remaining_bytes = 0;
  if (f.active) {
    f.active = false;
    // Only the links where other flows remain need a recomputation: on a link left empty no rate can change.
    still_shared_.clear();
    for (int64_t l : f.links) {
      auto& v = link_flows_[ix(l)];
      v.erase(std::lower_bound(v.begin(), v.end(), id, [](const LinkFlow& x, int64_t y) { return x.id < y; }));
      link_active_change(l, -1);
      if (!v.empty()) still_shared_.push_back(l);
    }
    if (!still_shared_.empty()) mark_dirty(still_shared_);
  }
  Done done = std::move(f.on_drained);
  f.on_drained = nullptr;
  f.id = -1;
  free_slots_.push_back(slot);
  done();
}

void FlowNetwork::recompute() {
  recompute_pending_ = false;
  ++recomputes_;
  // 1. The affected flows and links: everything reachable from the dirty links through shared links, split
  // into connected components (a breadth-first search from each dirty link not reached yet).
  batch_links_.clear();
  batch_flows_.clear();
  for (int64_t l : dirty_links_) link_dirty_[ix(l)] = 0;
  for (int64_t seed : dirty_links_) {
    if (link_seen_[ix(seed)]) continue;
    const size_t links_begin = batch_links_.size();
    const size_t flows_begin = batch_flows_.size();
    link_seen_[ix(seed)] = 1;
    batch_links_.push_back(seed);
    for (size_t next = links_begin; next < batch_links_.size(); ++next) {
      for (const LinkFlow& lf : link_flows_[ix(batch_links_[next])]) {
        Flow& f = flows_[ix(lf.slot)];
        if (f.batch_state != 0) continue;
        f.batch_state = 1;
        batch_flows_.push_back(lf);
        for (int64_t l2 : f.links) {
          if (link_seen_[ix(l2)]) continue;
          link_seen_[ix(l2)] = 1;
          batch_links_.push_back(l2);
        }
      }
    }
    // 2–3. Remaining bytes up to now, then progressive filling of this component.
    fill_component(links_begin, batch_links_.size(), flows_begin, batch_flows_.size());
  }
  dirty_links_.clear();
  for (int64_t l : batch_links_) link_seen_[ix(l)] = 0;

  // 4. Reschedule the drains of flows whose rate changed, in flow id order (the order of the events' insertion
  // sequence numbers, which break ties between drains in the same picosecond).
  std::sort(batch_flows_.begin(), batch_flows_.end(),
            [](const LinkFlow& x, const LinkFlow& y) { return x.id < y.id; });
  const TimePs now = queue_.now();
  for (const LinkFlow& lf : batch_flows_) {
    Flow& f = flows_[ix(lf.slot)];
    const bool changed = f.batch_state == 3;
    f.batch_state = 0;
    if (f.drain_event >= 0 && !changed) continue;
    if (f.drain_event >= 0) queue_.cancel(f.drain_event);
    const TimePs delay = seconds_to_ps(f.remaining_bytes / f.rate);
    const int64_t slot = lf.slot;
    f.drain_event = queue_.schedule_at(now + delay, completion_priority_, [this, slot] { drained(slot); });
  }
}

void FlowNetwork::fill_component(size_t links_begin, size_t links_end, size_t flows_begin, size_t flows_end) {
  // Bring every flow's remaining bytes up to now at its old rate.
  const TimePs now = queue_.now();
  for (size_t i = flows_begin; i < flows_end; ++i) {
    Flow& f = flows_[ix(batch_flows_[i].slot)];
    const double elapsed_s = static_cast<double>(now - f.updated_ps) / kPsPerSecond;
    f.remaining_bytes = std::max(0.0, f.remaining_bytes - f.rate * elapsed_s);
    f.updated_ps = now;
  }

  // One flow alone on every link of its route (each link once): the filling's first round picks the link with
  // the smallest capacity / 1 and freezes the flow at that share, so its rate is its route's minimum capacity,
  // the same double, taken without the heap.
  if (flows_end - flows_begin == 1 && links_end - links_begin == flows_[ix(batch_flows_[flows_begin].slot)].links.size()) {
    Flow& f = flows_[ix(batch_flows_[flows_begin].slot)];
    double share = std::numeric_limits<double>::infinity();
    for (size_t i = links_begin; i < links_end; ++i) share = std::min(share, capacity_[ix(batch_links_[i])]);
    f.batch_state = share == f.rate ? 2 : 3;
    f.rate = share;
    return;
  }

  // Progressive filling. The heap holds (fair share, link) of every link with unfrozen flows, smallest share
  // first and, among equal shares, the lowest link id: the link a scan in id order would pick. An entry is
  // current when its share equals the link's present one; older entries are skipped when they surface.
  auto later = [](const ShareEntry& x, const ShareEntry& y) {
    if (x.share != y.share) return x.share > y.share;
    return x.link > y.link;
  };
  heap_.clear();
  for (size_t i = links_begin; i < links_end; ++i) {
    const int64_t l = batch_links_[i];
    link_cap_[ix(l)] = capacity_[ix(l)];
    link_unfrozen_[ix(l)] = static_cast<int64_t>(link_flows_[ix(l)].size());
    if (link_unfrozen_[ix(l)] == 0) continue;
    const double share = std::max(0.0, link_cap_[ix(l)]) / static_cast<double>(link_unfrozen_[ix(l)]);
    link_share_[ix(l)] = share;
    heap_.push_back(ShareEntry{share, l});
  }
  std::make_heap(heap_.begin(), heap_.end(), later);
  size_t left = flows_end - flows_begin;
  while (left > 0) {
    HCPSIM_ASSERT(!heap_.empty(), "progressive filling found no bottleneck");
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const ShareEntry top = heap_.back();
    heap_.pop_back();
    const int64_t best = top.link;
    if (link_unfrozen_[ix(best)] == 0 || top.share != link_share_[ix(best)]) continue;  // outdated entry
    const double best_share = top.share;
    HCPSIM_ASSERT(best_share > 0, fmt::format("link {}: fair share is 0", best));
    // Freeze the link's unfrozen flows in id order, each taking its share off every link of its route.
    changed_links_.clear();
    for (const LinkFlow& lf : link_flows_[ix(best)]) {
      Flow& f = flows_[ix(lf.slot)];
      if (f.batch_state != 1) continue;
      f.batch_state = best_share == f.rate ? 2 : 3;
      f.rate = best_share;
      --left;
      for (int64_t l2 : f.links) {
        link_cap_[ix(l2)] -= best_share;
        --link_unfrozen_[ix(l2)];
        if (link_seen_[ix(l2)] == 1) {
          link_seen_[ix(l2)] = 2;
          changed_links_.push_back(l2);
        }
      }
    }
    // The new shares of the links this round touched (a share is only read between rounds).
    for (int64_t l : changed_links_) {
      link_seen_[ix(l)] = 1;
      if (link_unfrozen_[ix(l)] == 0) continue;
      const double share = std::max(0.0, link_cap_[ix(l)]) / static_cast<double>(link_unfrozen_[ix(l)]);
      if (share == link_share_[ix(l)]) continue;  // its current entry is still in the heap
      link_share_[ix(l)] = share;
      heap_.push_back(ShareEntry{share, l});
      std::push_heap(heap_.begin(), heap_.end(), later);
    }
  }
}

}  // namespace hcpsim::sim
