// core/parallel_for.hpp: every item runs once whatever the thread count, and the error reported is the one of the
// lowest failing index.
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/core/parallel_for.hpp"

using namespace hcpsim;

TEST_CASE("parallel_for: every index runs exactly once for any thread and item count", "[core]") {
  for (const int threads : {0, 1, 2, 3, 8}) {
    for (const int64_t count : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{5}, int64_t{1000}}) {
      INFO("threads " << threads << ", items " << count);
      std::vector<std::atomic<int>> runs(static_cast<size_t>(count));
      parallel_for(count, threads, [&](int64_t i) { runs[static_cast<size_t>(i)].fetch_add(1); });
      for (int64_t i = 0; i < count; ++i) REQUIRE(runs[static_cast<size_t>(i)].load() == 1);
    }
  }
}

TEST_CASE("parallel_for: the lowest failing index's error is rethrown for any thread count", "[core]") {
  for (const int threads : {1, 2, 4}) {
    INFO("threads " << threads);
    std::vector<std::atomic<int>> runs(40);
    auto body = [&](int64_t i) {
      runs[static_cast<size_t>(i)].fetch_add(1);
      if (i == 31 || i == 7 || i == 19) throw std::runtime_error("item " + std::to_string(i));
    };
    std::string what;
    try {
      parallel_for(40, threads, body);
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    REQUIRE(what == "item 7");
    // On one thread the loop stops at item 7; on several every item runs once.
    for (size_t i = 0; i < runs.size(); ++i) REQUIRE(runs[i].load() == (threads == 1 && i > 7 ? 0 : 1));
  }
}
