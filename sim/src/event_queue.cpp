#include "hcpsim/sim/event_queue.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"

namespace hcpsim::sim {

namespace {
// The largest duration seconds_to_ps accepts: the int64 range is 9.22e18 ps = 9.22e6 s; the margin keeps
// llround from overflowing.
constexpr double kMaxSeconds = 9.2e6;
// Bits of an event key holding the insertion sequence number (the priority takes the 16 bits above).
constexpr int kSeqBits = 48;
constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;
constexpr int64_t kSeqLimit = int64_t{1} << kSeqBits;
}  // namespace

TimePs seconds_to_ps(double seconds) {
  HCPSIM_ASSERT(std::isfinite(seconds), "duration must be finite, got " + std::to_string(seconds) + " s");
  HCPSIM_ASSERT(seconds >= 0, "duration must be >= 0, got " + std::to_string(seconds) + " s");
  // Inputs are range-checked when loaded (config/include/hcpsim/config/plausible_ranges.hpp), but extreme combinations of plausible
  // values (a slow GPU and a huge model) can still ask for a duration the clock cannot hold: an input error.
  if (seconds >= kMaxSeconds)
    throw InputError(SourceLoc{}, "simulation",
                     fmt::format("an op would last {:.3g} s, beyond the simulator's clock range of {:.3g} s (int64 "
                                 "picoseconds, about 106 days)",
                                 seconds, kMaxSeconds),
                     "check the cluster's rates (peak_bf16_TFLOP_per_s, bandwidths, latencies) and the model size");
  return static_cast<TimePs>(std::llround(seconds * kPsPerSecond));
}

EventId EventQueue::schedule_at(TimePs time_ps, int priority, Action action) {
  HCPSIM_ASSERT(time_ps >= now_ps_, "event scheduled in the past: " + std::to_string(time_ps) + " ps < now " +
                                        std::to_string(now_ps_) + " ps");
  HCPSIM_ASSERT(static_cast<bool>(action), "event without an action");
  HCPSIM_ASSERT(priority >= kMinPriority && priority <= kMaxPriority,
                "event priority out of range: " + std::to_string(priority));
  const auto id = static_cast<EventId>(window_begin_ + static_cast<int64_t>(slot_of_.size()));
  HCPSIM_ASSERT(id < kSeqLimit, "more than 2^48 events");
  int32_t slot = 0;
  if (free_slots_.empty()) {
    HCPSIM_ASSERT(actions_.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()), "too many events");
    slot = static_cast<int32_t>(actions_.size());
    actions_.push_back(std::move(action));
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    actions_[static_cast<size_t>(slot)] = std::move(action);
  }
  slot_of_.push_back(slot);
  const auto priority_rank = static_cast<uint64_t>(static_cast<int64_t>(priority) - kMinPriority);
  push_entry(Entry{time_ps, (priority_rank << kSeqBits) | static_cast<uint64_t>(id)});
  ++pending_count_;
  return id;
}

EventId EventQueue::schedule_after(TimePs delay_ps, int priority, Action action) {
  HCPSIM_ASSERT(delay_ps >= 0, "negative delay: " + std::to_string(delay_ps) + " ps");
  return schedule_at(now_ps_ + delay_ps, priority, std::move(action));
}

void EventQueue::cancel(EventId id) {
  HCPSIM_ASSERT(id >= 0, "bad event id " + std::to_string(id));
  HCPSIM_ASSERT(id < window_begin_ + static_cast<EventId>(slot_of_.size()), "bad event id " + std::to_string(id));
  HCPSIM_ASSERT(id >= window_begin_, "cancel of an event that is not pending: id " + std::to_string(id));
  const auto index = static_cast<size_t>(id - window_begin_);
  const int32_t slot = slot_of_[index];
  HCPSIM_ASSERT(slot >= 0, "cancel of an event that is not pending: id " + std::to_string(id));
  slot_of_[index] = kCancelled;
  actions_[static_cast<size_t>(slot)] = nullptr;  // release captured state now; the heap entry is skipped when popped
  free_slots_.push_back(slot);
  --pending_count_;
}

namespace {
/// Bucket of time t relative to base (t ≥ base): 0 if equal, else 1 + the index of the highest differing bit.
size_t bucket_of(TimePs t, TimePs base) {
  const auto diff = static_cast<uint64_t>(t) ^ static_cast<uint64_t>(base);
  return diff == 0 ? 0 : static_cast<size_t>(64 - std::countl_zero(diff));
}
}  // namespace

bool EventQueue::later_key(const Entry& x, const Entry& y) { return x.key > y.key; }

void EventQueue::push_entry(Entry e) {
  // With no entry left (the last ones may have been cancelled ones above now), restart the buckets at now, so
  // that every entry is ≥ base_ps_.
  if (entries_ == 0) base_ps_ = now_ps_;
  const size_t b = bucket_of(e.time_ps, base_ps_);
  buckets_[b].push_back(e);
  if (b == 0) std::push_heap(buckets_[0].begin(), buckets_[0].end(), later_key);
  else nonempty_ |= uint64_t{1} << (b - 1);
  ++entries_;
}

bool EventQueue::pop_entry(Entry& e) {
  if (entries_ == 0) return false;
  auto& zero = buckets_[0];
  if (zero.empty()) {
    const auto b = static_cast<size_t>(std::countr_zero(nonempty_)) + 1;  // the first non-empty bucket above 0
    auto& from = buckets_[b];
    TimePs base = from.front().time_ps;
    for (const Entry& x : from) base = std::min(base, x.time_ps);
    base_ps_ = base;
    nonempty_ &= ~(uint64_t{1} << (b - 1));
    for (const Entry& x : from) {  // all land below b
      const size_t to = bucket_of(x.time_ps, base);
      buckets_[to].push_back(x);
      if (to != 0) nonempty_ |= uint64_t{1} << (to - 1);
    }
    from.clear();
    std::make_heap(zero.begin(), zero.end(), later_key);
  }
  std::pop_heap(zero.begin(), zero.end(), later_key);
  e = zero.back();
  zero.pop_back();
  --entries_;
  return true;
}

void EventQueue::trim_window() {
  while (window_front_ < slot_of_.size() && slot_of_[window_front_] == kPopped) ++window_front_;
  // Drop the popped prefix once it is half the table (amortised O(1) per event: each id is moved at most once
  // per halving).
  if (window_front_ >= 4096 && window_front_ * 2 >= slot_of_.size()) {
    slot_of_.erase(slot_of_.begin(), slot_of_.begin() + static_cast<std::ptrdiff_t>(window_front_));
    window_begin_ += static_cast<int64_t>(window_front_);
    window_front_ = 0;
  }
}

bool EventQueue::step() {
  Entry top{};
  while (pop_entry(top)) {
    const auto index = static_cast<size_t>(static_cast<int64_t>(top.key & kSeqMask) - window_begin_);
    const int32_t slot = slot_of_[index];
    slot_of_[index] = kPopped;
    if (index == window_front_) trim_window();
    if (slot == kCancelled) continue;
    now_ps_ = top.time_ps;
    --pending_count_;
    Action action = std::move(actions_[static_cast<size_t>(slot)]);
    actions_[static_cast<size_t>(slot)] = nullptr;
    free_slots_.push_back(slot);
    action();
    return true;
  }
  return false;
}

int64_t EventQueue::run() {
  int64_t count = 0;
  while (step()) ++count;
  return count;
}

}  // namespace hcpsim::sim
