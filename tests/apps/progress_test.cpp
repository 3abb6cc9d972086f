// The progress display's line format and ETA arithmetic (apps/hcpsim/progress.hpp), with an injected clock.
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../../apps/hcpsim/progress.hpp"
#include "catch_compat.hpp"

using namespace hcpsim::app;

namespace {

/// Everything written to a temporary FILE.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c = std::fgetc(f); c != EOF; c = std::fgetc(f)) s += static_cast<char>(c);
  return s;
}

}  // namespace

TEST_CASE("apps: progress ETA is elapsed x remaining / done", "[apps]") {
  REQUIRE(eta_seconds(10.0, 1, 4) == 30.0);
  REQUIRE(eta_seconds(10.0, 4, 4) == 0.0);
  REQUIRE(eta_seconds(10.0, 0, 4) < 0);  // unknown before the first unit
  REQUIRE(eta_seconds(3.0, 3, 5) == 2.0);
  REQUIRE(display_duration(12.34) == "12.3 s");
  REQUIRE(display_duration(245) == "4 min 05 s");
  REQUIRE(display_duration(3720) == "1 h 02 min");
}

TEST_CASE("apps: progress lines show done/total, percent, elapsed and ETA, with a bar 24 wide", "[apps]") {
  REQUIRE(progress_line("plan", 1, 4, 10.0, false) == "plan: 1/4 (25%), elapsed 10.0 s, ETA 30.0 s");
  REQUIRE(progress_line("plan", 0, 4, 1.0, false) == "plan: 0/4 (0%), elapsed 1.0 s, ETA ?");
  REQUIRE(progress_line("verify p2p", 2, 4, 5.0, true) ==
          "verify p2p: [############............] 2/4 (50%), elapsed 5.0 s, ETA 5.0 s");
}

TEST_CASE("apps: the reporter prints plain lines at the interval of an injected clock, then a last line", "[apps]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  double now = 100.0;
  ProgressSettings s;
  s.interval_s = 10;
  {
    ProgressReporter p("replay", 3, s, f, [&now] { return now; });
    p.announce("3 scenarios", 1.0);  // a short estimate is not announced
    now = 105;
    p.update(1);  // 5 s in: below the interval
    now = 112;
    p.update(2);  // 12 s in: a line
    now = 115;
    p.update(3);  // 3 s after the last line: none
    REQUIRE(p.lines_printed() == 1);
  }  // the destructor prints the last line
  REQUIRE(contents(f) ==
          "replay: 2/3 (67%), elapsed 12.0 s, ETA 6.0 s\n"
          "replay: 3/3 (100%), elapsed 15.0 s, ETA 0.0 s\n");
  std::fclose(f);
}

TEST_CASE("apps: an announced estimate, forced lines, quiet, and updates from many threads", "[apps]") {
  double now = 0;
  ProgressSettings forced;
  forced.interval_s = 0;
  forced.forced = true;
  std::FILE* f = std::tmpfile();
  {
    ProgressReporter p("verify a2a", 2, forced, f, [&now] { return now; });
    p.announce("~1 GFLOP", 0.5);  // forced: announced although short
    now = 1;
    p.update(1);
    now = 2;
    p.update(2);
  }
  REQUIRE(contents(f) ==
          "verify a2a: ~1 GFLOP (estimate)\n"
          "verify a2a: 1/2 (50%), elapsed 1.0 s, ETA 1.0 s\n"
          "verify a2a: 2/2 (100%), elapsed 2.0 s, ETA 0.0 s\n");
  std::fclose(f);
  // Quiet: nothing at all, even forced.
  ProgressSettings quiet = forced;
  quiet.quiet = true;
  std::FILE* q = std::tmpfile();
  {
    ProgressReporter p("plan", 2, quiet, q, [&now] { return now; });
    p.announce("big", 100);
    p.update(1);
  }
  REQUIRE(contents(q).empty());
  std::fclose(q);
  // Many threads: every printed line is whole, and the last one shows the final count.
  std::FILE* m = std::tmpfile();
  {
    ProgressReporter p("plan", 800, forced, m);
    std::vector<std::thread> threads;
    std::atomic<size_t> done{0};
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&] {
        for (int k = 0; k < 100; ++k) p.update(++done);
      });
    for (auto& t : threads) t.join();
    p.update(800);
  }
  const std::string text = contents(m);
  std::fclose(m);
  REQUIRE(!text.empty());
  size_t start = 0;
  std::string last;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    REQUIRE(end != std::string::npos);
    last = text.substr(start, end - start);
    REQUIRE(last.rfind("plan: ", 0) == 0);
    start = end + 1;
  }
  REQUIRE(last.rfind("plan: 800/800 (100%)", 0) == 0);
}
