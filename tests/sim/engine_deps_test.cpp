// The engine starts an op when its stream predecessor and every entry of its Op::deps have finished. It counts
// the unfinished deps down instead of polling them, so a miscount shows here as an op that starts too early or
// never (deadlock): one op depends on ops of all three streams and lists one of them twice.

#include <map>
#include <string>
#include <utility>

#include "catch_compat.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "sim_test_util.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;
namespace t = hcpsim::sim::test;

namespace {

// Two ranks on one node. Rank 1 sends 1e6 B to rank 0 at t = 0. Rank 0 (copies of [1, 500, 1, 1000] bf16
// buffers, 3 µs launch + bytes / 1e12 B/s each):
//   c1    compute  2e6 B       [0, 5) µs
//   p1    cp       7e6 B       [0, 10) µs
//   recv  comm     1e6 B from rank 1: 5 µs software + 1e6 / 1e11 s + 1 µs NVLink = [0, 16) µs
//   join  compute  1e6 B, deps {p1, recv, p1, c1}: after the last of them, recv → [16, 20) µs
//   tail  cp       1e6 B, deps {join, join}: after join (its stream predecessor p1 ended at 10) → [20, 24) µs
// Counting p1 once but counting it down twice would start join at 10 µs (when p1 ends); counting it twice but
// down once would never start it.
Schedule three_stream_join() {
  Schedule s = t::empty_schedule(1, 2);
  {
    t::ProgramWriter w(s.ranks[0]);
    const BufferId x = w.input("x", 500, 1, 1000);
    const BufferId y = w.declare("y", 500, 1, 1000);
    const BufferId z = w.declare("z", 500, 1, 1000);
    const BufferId u = w.declare("u", 500, 1, 1000);
    const BufferId xr = w.declare("x_recv", 500, 1, 1000);
    w.alloc(y);
    w.alloc(z, Stream::cp);
    w.alloc(u, Stream::cp);
    const OpIndex a = w.alloc(xr, Stream::comm);
    const OpIndex c1 = w.copy(y, x, 2'000'000, Stream::compute, {}, "c1");
    const OpIndex p1 = w.copy(z, x, 7'000'000, Stream::cp, {}, "p1");
    const OpIndex recv = w.add(SendRecvOp{-1, 1, {}, {xr}, 0, 7}, Stream::comm, {a}, "recv");
    const OpIndex join = w.copy(y, z, 1'000'000, Stream::compute, {p1, recv, p1, c1}, "join");
    w.copy(u, x, 1'000'000, Stream::cp, {join, join}, "tail");
  }
  {
    t::ProgramWriter w(s.ranks[1]);
    const BufferId x = w.input("x", 500, 1, 1000);
    w.add(SendRecvOp{0, -1, {x}, {}, 7, 0}, Stream::comm, {}, "send", Phase::forward, 0, 1'000'000);
  }
  return s;
}

// (start, end) in ps of every op, by "rank label".
std::map<std::string, std::pair<TimePs, TimePs>> op_times(const SimResult& r) {
  std::map<std::string, std::pair<TimePs, TimePs>> times;
  for (const TimelineEntry& e : r.timeline) times[std::to_string(e.cp_rank) + " " + e.label] = {e.start_ps, e.end_ps};
  return times;
}

}  // namespace

TEST_CASE("sim: an op waits for every dep entry, on every stream, duplicates included", "[sim][engine]") {
  SimOptions options;
  options.share_gpu_between_kernels = false;  // every stream at full speed: durations are the cost model's
  const Schedule s = three_stream_join();
  const SimResult r = simulate(s, t::round_cluster(1, 8), {0, 0}, options);
  const auto times = op_times(r);
  using Span = std::pair<TimePs, TimePs>;
  REQUIRE(times.at("0 c1") == Span{0, 5'000'000});
  REQUIRE(times.at("0 p1") == Span{0, 10'000'000});
  REQUIRE(times.at("0 recv") == Span{0, 16'000'000});
  REQUIRE(times.at("1 send") == Span{0, 16'000'000});
  REQUIRE(times.at("0 join") == Span{16'000'000, 20'000'000});
  REQUIRE(times.at("0 tail") == Span{20'000'000, 24'000'000});
  REQUIRE(r.ranks[0].end_ps == 24'000'000);
  REQUIRE(r.total_ps == 24'000'000);

  SECTION("a schedule its builder checked gives the same run without the second check") {
    SimOptions checked = options;
    checked.schedule_checked = true;
    const SimResult again = simulate(s, t::round_cluster(1, 8), {0, 0}, checked);
    REQUIRE(again.total_ps == r.total_ps);
    REQUIRE(again.event_count == r.event_count);
    REQUIRE(op_times(again) == times);
  }
}
