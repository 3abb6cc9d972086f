#include "hcpsim/sim/event_queue.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "hcpsim/core/error.hpp"

namespace hcpsim::sim {

namespace {
// The largest duration seconds_to_ps accepts: the int64 range is 9.22e18 ps = 9.22e6 s; the margin keeps
// llround from overflowing.
constexpr double kMaxSeconds = 9.2e6;
}  // namespace

TimePs seconds_to_ps(double seconds) {
  HCPSIM_ASSERT(std::isfinite(seconds), "duration must be finite, got " + std::to_string(seconds) + " s");
  HCPSIM_ASSERT(seconds >= 0, "duration must be >= 0, got " + std::to_string(seconds) + " s");
  HCPSIM_ASSERT(seconds < kMaxSeconds,
                "duration exceeds the int64 picosecond range: " + std::to_string(seconds) + " s");
  return static_cast<TimePs>(std::llround(seconds * kPsPerSecond));
}

double ps_to_us(TimePs ps) { return static_cast<double>(ps) / 1e6; }

EventId EventQueue::schedule_at(TimePs time_ps, int priority, Action action) {
  HCPSIM_ASSERT(time_ps >= now_ps_, "event scheduled in the past: " + std::to_string(time_ps) + " ps < now " +
                                        std::to_string(now_ps_) + " ps");
  HCPSIM_ASSERT(static_cast<bool>(action), "event without an action");
  const auto id = static_cast<EventId>(actions_.size());
  actions_.push_back(std::move(action));
  states_.push_back(State::pending);
  heap_.push(Entry{time_ps, priority, id});
  ++pending_count_;
  return id;
}

EventId EventQueue::schedule_after(TimePs delay_ps, int priority, Action action) {
  HCPSIM_ASSERT(delay_ps >= 0, "negative delay: " + std::to_string(delay_ps) + " ps");
  return schedule_at(now_ps_ + delay_ps, priority, std::move(action));
}

void EventQueue::reserve(int64_t events) {
  HCPSIM_ASSERT(events >= 0, "negative event reservation");
  actions_.reserve(static_cast<size_t>(events));
  states_.reserve(static_cast<size_t>(events));
}

void EventQueue::cancel(EventId id) {
  HCPSIM_ASSERT(id >= 0, "bad event id " + std::to_string(id));
  HCPSIM_ASSERT(id < static_cast<EventId>(states_.size()), "bad event id " + std::to_string(id));
  const auto index = static_cast<size_t>(id);
  HCPSIM_ASSERT(states_[index] == State::pending, "cancel of an event that is not pending: id " + std::to_string(id));
  states_[index] = State::cancelled;
  actions_[index] = nullptr;  // release captured state now; the heap entry is skipped when popped
  --pending_count_;
}

bool EventQueue::step() {
  while (!heap_.empty()) {
    const Entry top = heap_.top();
    heap_.pop();
    const auto index = static_cast<size_t>(top.seq);
    if (states_[index] == State::cancelled) continue;
    now_ps_ = top.time_ps;
    states_[index] = State::done;
    --pending_count_;
    Action action = std::move(actions_[index]);
    actions_[index] = nullptr;
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
