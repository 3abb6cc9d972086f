#pragma once
/// The discrete-event engine of the simulator: integer picosecond time, a priority queue of events ordered by
/// (time_ps, priority, insertion_seq), and the one function that turns seconds into picoseconds.
///
/// Determinism (docs/architecture.md "Conventions"): no floating-point value ever decides an order. Durations are computed
/// in seconds by the cost model and rounded once, by seconds_to_ps(), into int64 picoseconds; from there on all
/// arithmetic is integer. Events with equal (time_ps, priority) run in insertion order (FIFO).

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

namespace hcpsim::sim {

/// Simulated time and durations: integer picoseconds (2^63 ps ≈ 106 days of simulated time).
using TimePs = int64_t;

/// Picoseconds per second. Source: SI prefix definition (pico = 10^-12).
constexpr double kPsPerSecond = 1e12;

/// Converts a duration in seconds to integer picoseconds, rounding to nearest (ties away from zero, llround).
/// This is the only place in hcpsim where simulated time is rounded: compute a duration in seconds as one
/// double expression (latency + bytes / bandwidth, flops / rate, …) and call this once.
/// @param seconds  finite, ≥ 0 and < 9.2e6 s (the int64 picosecond range); HCPSIM_ASSERT otherwise.
/// @return round(seconds · 10^12) in ps.
TimePs seconds_to_ps(double seconds);


/// Handle of a scheduled event, usable with EventQueue::cancel. Handles are the insertion sequence number.
using EventId = int64_t;

/// A discrete-event queue. Events are callbacks scheduled at an absolute time; run() pops them in order of
/// (time_ps, priority, insertion_seq) — lower first — and invokes them. A callback may schedule further events
/// (at times ≥ now()) and cancel pending ones. Single-threaded by design.
///
/// The event key is a total order over distinct events (insertion_seq is unique), so the execution order is a
/// pure function of the sequence of schedule() calls: two runs of the same program are identical.
/// Extension point: a flow-level network model reschedules a flow's completion when the sharing changes by
/// cancel()ing the old completion event and scheduling a new one.
class EventQueue {
 public:
  using Action = std::function<void()>;
  /// Range of event priorities (they are packed with the insertion sequence number into one 64-bit key).
  static constexpr int kMinPriority = -32768;
  /// Upper end of the priority range.
  static constexpr int kMaxPriority = 32767;

  /// Current simulated time: the time of the event being run, or of the last one run (0 before the first).
  [[nodiscard]] TimePs now() const { return now_ps_; }

  /// Schedules `action` at absolute time `time_ps` with `priority` (lower runs first among equal times).
  /// @param time_ps  ≥ now(); HCPSIM_ASSERT otherwise (time never goes backwards).
  /// @param priority  in [kMinPriority, kMaxPriority]; HCPSIM_ASSERT otherwise.
  /// @return the event's id (its insertion sequence number; at most 2^48 events per queue, HCPSIM_ASSERT).
  EventId schedule_at(TimePs time_ps, int priority, Action action);

  /// Schedules `action` at now() + delay_ps. @param delay_ps ≥ 0; HCPSIM_ASSERT otherwise.
  EventId schedule_after(TimePs delay_ps, int priority, Action action);


  /// Cancels a pending event: it is skipped when popped. Cancelling an event that already ran or was already
  /// cancelled is an error (HCPSIM_ASSERT), because it means the caller's bookkeeping is wrong.
  void cancel(EventId id);

  /// Runs events until the queue is empty. @return the number of events run (cancelled ones not counted).
  int64_t run();

  /// Runs the single next pending (non-cancelled) event. @return false if there was none.
  bool step();

  /// True if no pending (non-cancelled) event remains.
  [[nodiscard]] bool empty() const { return pending_count_ == 0; }

  /// Number of pending (non-cancelled) events.
  [[nodiscard]] int64_t pending() const { return pending_count_; }

 private:
  /// A heap entry: the event's time and key = (priority − kMinPriority) · 2^48 + insertion sequence number, so
  /// that (time_ps, key) orders events exactly as (time_ps, priority, insertion_seq).
  struct Entry {
    TimePs time_ps;
    uint64_t key;
  };
  /// Binary-heap order of bucket 0 (std::push_heap keeps the greatest first): a larger key runs later.
  static bool later_key(const Entry& x, const Entry& y);
  void push_entry(Entry e);
  /// Removes the earliest entry into `e`. @return false if there is none.
  bool pop_entry(Entry& e);

  /// Pending events (and cancelled ones not yet popped) in a radix heap over time (event times never go below
  /// the last popped time): bucket 0 holds the entries at exactly base_ps_, as a binary heap on key; bucket
  /// b ≥ 1 those whose highest bit differing from base_ps_ is bit b − 1. Popping refills bucket 0 from the first
  /// non-empty bucket, so each entry moves a few times through sequential memory instead of sifting through a
  /// heap of every pending event.
  std::array<std::vector<Entry>, 65> buckets_;
  /// Bit b − 1 set when bucket b ≥ 1 holds an entry: popping finds the next bucket to refill from in one
  /// instruction instead of testing the buckets one by one.
  uint64_t nonempty_ = 0;
  TimePs base_ps_ = 0;
  int64_t entries_ = 0;
  /// Actions of pending events, in slots reused once an event ran or was cancelled (memory follows the pending
  /// events, not all events ever scheduled).
  std::vector<Action> actions_;
  std::vector<int32_t> free_slots_;
  /// By EventId − window_begin_: the slot of a pending event, kCancelled (its entry not yet popped) or kPopped,
  /// for the ids from the oldest one whose entry may still be popped to the newest (the window). Dropping the
  /// ids before it keeps the table at the span of the pending events instead of one entry per event ever
  /// scheduled (millions in a run at CP = 4096).
  std::vector<int32_t> slot_of_;
  int64_t window_begin_ = 0;
  /// Index in slot_of_ of the oldest id that is still pending (or cancelled, its entry not yet popped).
  size_t window_front_ = 0;
  /// Moves the window past the ids that ran, and drops them from the table once they are half of it.
  void trim_window();

  /// The id's entry was popped (it ran, or it was cancelled and skipped): only such ids leave the window.
  static constexpr int32_t kPopped = -1;
  static constexpr int32_t kCancelled = -2;
  int64_t pending_count_ = 0;
  TimePs now_ps_ = 0;
};

}  // namespace hcpsim::sim
