#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/sim/event_queue.hpp"

using hcpsim::sim::EventQueue;
using hcpsim::sim::seconds_to_ps;
using hcpsim::sim::TimePs;

namespace {

/// An event a random test scheduled: its time, priority, id (its insertion index in the test) and the queue's
/// handle for it.
struct QueuedEvent {
  TimePs time;
  int priority;
  int64_t id;
  hcpsim::sim::EventId handle = -1;
};

/// The events that ran, in run order (`order` lists their ids), must be the sort of those events by (time,
/// priority, id). @return how many ran.
size_t require_key_order(const std::vector<QueuedEvent>& events, const std::vector<int64_t>& order) {
  std::vector<QueuedEvent> ran;
  for (int64_t id : order) ran.push_back(events[static_cast<size_t>(id)]);
  std::vector<QueuedEvent> sorted = ran;
  std::sort(sorted.begin(), sorted.end(), [](const QueuedEvent& x, const QueuedEvent& y) {
    if (x.time != y.time) return x.time < y.time;
    if (x.priority != y.priority) return x.priority < y.priority;
    return x.id < y.id;
  });
  for (size_t i = 0; i < ran.size(); ++i) REQUIRE(ran[i].id == sorted[i].id);
  return ran.size();
}

/// A random test's queue and its bookkeeping: every event scheduled (by insertion index), whether each ran (1)
/// or was cancelled (2), and the order they ran in.
struct RandomRun {
  EventQueue q;
  std::vector<QueuedEvent> events;
  std::vector<char> done;
  std::vector<int64_t> order;

  /// Schedules an event at (t, priority) that records its run, then calls `then` (which may add and cancel).
  void add(TimePs t, int priority, const std::function<void()>& then) {
    const auto id = static_cast<int64_t>(events.size());
    const hcpsim::sim::EventId handle = q.schedule_at(t, priority, [this, id, then] {
      order.push_back(id);
      done[static_cast<size_t>(id)] = 1;
      then();
    });
    REQUIRE(handle >= 0);
    events.push_back(QueuedEvent{t, priority, id, handle});
    done.push_back(0);
  }
  /// Cancels event `id` unless it ran or was cancelled. @return whether it cancelled it.
  bool cancel(size_t id) {
    if (done[id] != 0) return false;
    q.cancel(events[id].handle);
    done[id] = 2;
    return true;
  }
  [[nodiscard]] size_t cancelled() const { return static_cast<size_t>(std::count(done.begin(), done.end(), 2)); }
};

}  // namespace

TEST_CASE("sim: events with equal time and priority run in insertion order (FIFO)", "[sim]") {
  EventQueue q;
  std::vector<int> order;
  for (int i = 0; i < 8; ++i) q.schedule_at(100, 0, [&order, i] { order.push_back(i); });
  REQUIRE(q.pending() == 8);
  REQUIRE(q.run() == 8);
  REQUIRE(order == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  REQUIRE(q.now() == 100);
  REQUIRE(q.empty());
}

TEST_CASE("sim: events are ordered by time, then priority, then insertion", "[sim]") {
  EventQueue q;
  std::vector<std::string> order;
  auto rec = [&order](std::string s) { return [&order, s] { order.push_back(s); }; };
  q.schedule_at(20, 0, rec("t20 p0 a"));
  q.schedule_at(10, 1, rec("t10 p1 a"));
  q.schedule_at(10, 0, rec("t10 p0 a"));
  q.schedule_at(10, 1, rec("t10 p1 b"));
  q.schedule_at(5, 9, rec("t5 p9"));
  q.schedule_at(10, 0, rec("t10 p0 b"));
  q.run();
  REQUIRE(order == std::vector<std::string>{"t5 p9", "t10 p0 a", "t10 p0 b", "t10 p1 a", "t10 p1 b", "t20 p0 a"});
}

TEST_CASE("sim: an event scheduled for now from a callback runs after the events already queued for now", "[sim]") {
  EventQueue q;
  std::vector<int> order;
  q.schedule_at(7, 0, [&] {
    order.push_back(1);
    q.schedule_after(0, 0, [&] { order.push_back(3); });
  });
  q.schedule_at(7, 0, [&] { order.push_back(2); });
  q.run();
  REQUIRE(order == std::vector<int>{1, 2, 3});
  REQUIRE(q.now() == 7);
}

TEST_CASE("sim: a cancelled event never runs and is not counted", "[sim]") {
  EventQueue q;
  std::vector<int> order;
  q.schedule_at(1, 0, [&] { order.push_back(1); });
  const auto id = q.schedule_at(2, 0, [&] { order.push_back(2); });
  q.schedule_at(3, 0, [&] { order.push_back(3); });
  q.cancel(id);
  REQUIRE(q.pending() == 2);
  REQUIRE(q.run() == 2);
  REQUIRE(order == std::vector<int>{1, 3});
  REQUIRE(q.now() == 3);
}

TEST_CASE("sim: events in reused slots keep insertion order and get fresh handles", "[sim]") {
  // A and B take action slots 0 and 1; A is cancelled, B runs and both slots are free again when B schedules C,
  // D and E for the same time. The free list hands C slot 1 and D slot 0, so a queue that ordered equal keys by
  // slot would run D first; C's handle must not equal B's or A's (a reused slot is not a reused handle), and
  // cancelling C by it must work.
  EventQueue q;
  std::vector<char> order;
  hcpsim::sim::EventId b = -1, c = -1, d = -1;
  const hcpsim::sim::EventId a = q.schedule_at(1, 0, [&] { order.push_back('A'); });
  b = q.schedule_at(1, 0, [&] {
    order.push_back('B');
    c = q.schedule_at(2, 0, [&] { order.push_back('C'); });
    d = q.schedule_at(2, 0, [&] { order.push_back('D'); });
    q.schedule_at(2, 0, [&] { order.push_back('E'); });
  });
  q.cancel(a);
  REQUIRE(q.step());
  REQUIRE(order == std::vector<char>{'B'});
  REQUIRE(c != b);
  REQUIRE(c != a);
  REQUIRE(d != a);
  REQUIRE(q.pending() == 3);
  REQUIRE(q.run() == 3);
  REQUIRE(order == std::vector<char>{'B', 'C', 'D', 'E'});
  // The same again with C cancelled through its handle: D and E still run in insertion order.
  order.clear();
  q.schedule_at(3, 0, [&] {
    c = q.schedule_at(4, 0, [&] { order.push_back('C'); });
    q.schedule_at(4, 0, [&] { order.push_back('D'); });
  });
  REQUIRE(q.step());
  q.cancel(c);
  REQUIRE(q.run() == 1);
  REQUIRE(order == std::vector<char>{'D'});
}

TEST_CASE("sim: long runs keep ids valid while the queue drops the ids that ran", "[sim]") {
  // 50000 events run one after the other (each schedules the next), far more than the queue keeps ids for, while
  // an event scheduled first at the far end stays pending the whole time and one more is cancelled near the end
  // by an id from long before: the run order, the pending count and both ids must come out right. Then a second
  // stretch without any long-pending event lets the queue drop its old ids, and a late cancel still works.
  EventQueue q;
  std::vector<int64_t> ran;
  int64_t chain = 0;
  const hcpsim::sim::EventId last = q.schedule_at(1'000'000, 0, [&] { ran.push_back(-1); });
  const hcpsim::sim::EventId victim = q.schedule_at(999'999, 0, [&] { ran.push_back(-2); });
  std::function<void()> step = [&] {
    ran.push_back(chain);
    if (++chain < 50000) q.schedule_after(1, 0, step);
    if (chain == 40000) q.cancel(victim);
  };
  q.schedule_at(0, 0, step);
  REQUIRE(q.pending() == 3);
  REQUIRE(q.run() == 50001);
  REQUIRE(ran.size() == 50001);
  for (int64_t i = 0; i < 50000; ++i) REQUIRE(ran[static_cast<size_t>(i)] == i);
  REQUIRE(ran.back() == -1);
  REQUIRE(q.now() == 1'000'000);
  REQUIRE(last >= 0);
  // Second stretch: nothing stays pending, so old ids leave the table; a pending event made late is still
  // cancellable by its id and an event scheduled after it still runs.
  chain = 0;
  ran.clear();
  hcpsim::sim::EventId late = -1;
  std::function<void()> step2 = [&] {
    ran.push_back(chain);
    if (++chain < 30000) q.schedule_after(1, 0, step2);
    if (chain == 29990) late = q.schedule_after(100, 0, [&] { ran.push_back(-3); });
    if (chain == 29995) q.cancel(late);
  };
  q.schedule_after(0, 0, step2);
  REQUIRE(q.run() == 30000);
  REQUIRE(ran.size() == 30000);
  REQUIRE(ran.back() == 29999);
  REQUIRE(q.empty());
}

TEST_CASE("sim: random schedules and cancels run in (time, priority, insertion) order", "[sim]") {
  // Per seed: 500 events at t = 0..199 ps with priority −2..2, 150 random cancels, and while running, each
  // callback schedules another event at now + 1..50 ps (until 1500 more) and may cancel a random pending one.
  // Every insertion lies after the running event, so the run order must be the sort of all events that were
  // not cancelled by (time, priority, id), ids being the insertion indices 0, 1, 2, …. Cancelled events free
  // their queue slots for later events, so handles are reused while the run goes on.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    // Random values from the seed: the splitmix-based mix of (seed, draw index).
    auto next = [seed, k = uint64_t{0}](uint64_t n) mutable { return hcpsim::ecmp_hash(seed, k++, 0) % n; };
    RandomRun run;
    int64_t budget = 1500;
    auto cancel_one = [&] { run.cancel(static_cast<size_t>(next(run.events.size()))); };
    std::function<void()> then = [&] {
      if (budget-- > 0) run.add(run.q.now() + 1 + static_cast<TimePs>(next(50)), static_cast<int>(next(5)) - 2, then);
      if (next(4) == 0) cancel_one();
    };
    for (int i = 0; i < 500; ++i) run.add(static_cast<TimePs>(next(200)), static_cast<int>(next(5)) - 2, then);
    for (int i = 0; i < 150; ++i) cancel_one();
    run.q.run();
    INFO("seed " << seed);
    const size_t ran = require_key_order(run.events, run.order);
    REQUIRE(ran > 1000);
    REQUIRE(run.cancelled() > 0);
    REQUIRE(ran + run.cancelled() == run.events.size());  // every event ran or was cancelled, none both
    REQUIRE(run.q.empty());
  }
}

TEST_CASE("sim: many thousands of pending events and cancels run in order while old ids are dropped", "[sim]") {
  // Per seed: 3000 events, then every event schedules one or two more at now + 1..5000 ps (until 60000 in all),
  // so thousands are pending at once, and cancels a random earlier event a third of the time: the queue drops
  // the ids of popped events in batches while pending and cancelled ones sit after them. The run order must be
  // the sort by (time, priority, id) of the events not cancelled.
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto next = [seed, k = uint64_t{0}](uint64_t n) mutable { return hcpsim::ecmp_hash(seed, k++, 11) % n; };
    RandomRun run;
    std::function<void()> then = [&] {
      const int more = 1 + static_cast<int>(next(2));
      for (int m = 0; m < more && run.events.size() < 60000; ++m)
        run.add(run.q.now() + 1 + static_cast<TimePs>(next(5000)), static_cast<int>(next(3)) - 1, then);
      const auto victim = static_cast<size_t>(next(run.events.size()));
      if (next(3) == 0) run.cancel(victim);
    };
    for (int i = 0; i < 3000; ++i) run.add(static_cast<TimePs>(next(5000)), static_cast<int>(next(3)) - 1, then);
    run.q.run();
    INFO("seed " << seed);
    const size_t ran = require_key_order(run.events, run.order);
    REQUIRE(run.events.size() == 60000);
    REQUIRE(run.cancelled() > 1000);
    REQUIRE(ran + run.cancelled() == run.events.size());
    REQUIRE(run.q.empty());
  }
}

TEST_CASE("sim: events spread over the whole clock run in order (every radix bucket in use)", "[sim]") {
  // Times from 0 to about 2^62 ps, so that entries land in the high buckets of the queue's radix heap (the
  // bucket of an entry is the highest bit in which its time differs from the last popped time) and are
  // refilled from there down; each event may schedule another one a random power of two later and cancel a
  // pending one. The run order must be the sort by (time, priority, id) of the events not cancelled.
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    auto next = [seed, k = uint64_t{0}](uint64_t n) mutable { return hcpsim::ecmp_hash(seed, k++, 7) % n; };
    constexpr TimePs kLimit = TimePs{1} << 62;
    RandomRun run;
    int64_t budget = 1000;
    std::function<void()> then = [&] {
      const TimePs delay = static_cast<TimePs>(1 + next(7)) << next(60);
      if (budget-- > 0 && delay < kLimit - run.q.now())
        run.add(run.q.now() + delay, static_cast<int>(next(3)) - 1, then);
      const auto victim = next(run.events.size());
      if (next(3) == 0) run.cancel(victim);
    };
    for (int i = 0; i < 300; ++i)
      run.add(static_cast<TimePs>(next(1 << 20)) << next(41), static_cast<int>(next(3)) - 1, then);
    run.q.run();
    INFO("seed " << seed);
    const size_t ran = require_key_order(run.events, run.order);
    REQUIRE(ran > 500);
    REQUIRE(run.q.now() > (TimePs{1} << 55));  // the high buckets were reached
    REQUIRE(run.cancelled() > 0);
    REQUIRE(ran + run.cancelled() == run.events.size());
    REQUIRE(run.q.empty());
  }
}

TEST_CASE("sim: events scheduled after a run that ended on cancelled events keep their order", "[sim]") {
  // The run ends at t = 5 after skipping the cancelled event at t = 100; new events at 6 and 50 (earlier than
  // the skipped one) must still run in time order.
  EventQueue q;
  std::vector<int> order;
  q.schedule_at(5, 0, [&] { order.push_back(5); });
  q.cancel(q.schedule_at(100, 0, [&] { order.push_back(100); }));
  REQUIRE(q.run() == 1);
  REQUIRE(q.now() == 5);
  q.schedule_at(50, 0, [&] { order.push_back(50); });
  q.schedule_at(6, 0, [&] { order.push_back(6); });
  REQUIRE(q.run() == 2);
  REQUIRE(order == std::vector<int>{5, 6, 50});
}

TEST_CASE("sim: seconds_to_ps rounds once to the nearest picosecond", "[sim]") {
  REQUIRE(seconds_to_ps(0) == 0);
  REQUIRE(seconds_to_ps(1) == 1'000'000'000'000);
  REQUIRE(seconds_to_ps(1e-6) == 1'000'000);
  // 0.4 ps rounds down, 0.6 ps rounds up.
  REQUIRE(seconds_to_ps(0.4e-12) == 0);
  REQUIRE(seconds_to_ps(0.6e-12) == 1);
  // A latency sum is rounded as a whole: 5 µs + 1 µs + 1e6 B / 1e11 B/s = 16 µs; the double sum is within
  // 1e-20 s of 1.6e-5 s, far below half a picosecond.
  REQUIRE(seconds_to_ps(5e-6 + 1e-6 + 1e6 / 1e11) == 16'000'000);
  // bytes / bandwidth that is not a whole number of ps: 1 B at 3e11 B/s = 3.333... ps → 3 ps.
  REQUIRE(seconds_to_ps(1.0 / 3e11) == 3);
  // 2 B at 3e11 B/s = 6.666... ps → 7 ps.
  REQUIRE(seconds_to_ps(2.0 / 3e11) == 7);
  // One hour fits (3.6e15 ps).
  REQUIRE(seconds_to_ps(3600) == 3'600'000'000'000'000);
}

