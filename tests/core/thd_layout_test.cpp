// The THD layout (core/thd_layout.hpp) against TE's documented values, the round trip of the post-a2a runs, and
// the unguarded LSE merge of the unguarded_empty_merge fault.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/core/semantics.hpp"
#include "hcpsim/core/thd_layout.hpp"

using namespace hcpsim;

namespace {

PackedSequences padded_packing(const std::vector<int64_t>& lengths, int64_t multiple) {
  PackedSequences p;
  p.seq_lengths = lengths;
  p.seq_lengths_padded = pad_sequence_lengths(lengths, multiple);
  return p;
}

}  // namespace

TEST_CASE("thd: thd_partitioned_indices reproduces TE's docstring example", "[core][thd]") {
  // TE context_parallel.py thd_get_partitioned_indices: cu_seqlens_padded [0, 8, 16, 24, 40], cp 4, rank 0.
  const std::vector<int64_t> cu{0, 8, 16, 24, 40};
  REQUIRE(thd_partitioned_indices(cu, 4, 0) == std::vector<int64_t>{0, 7, 8, 15, 16, 23, 24, 25, 38, 39});
  // Every rank together: each packed index exactly once.
  std::vector<int64_t> all;
  for (int64_t g = 0; g < 4; ++g) {
    const auto idx = thd_partitioned_indices(cu, 4, g);
    REQUIRE(idx.size() == 10);
    all.insert(all.end(), idx.begin(), idx.end());
  }
  std::sort(all.begin(), all.end());
  for (int64_t t = 0; t < 40; ++t) REQUIRE(all[static_cast<size_t>(t)] == t);
}

TEST_CASE("thd: thd_valid_on_cp_rank for a short and a long sequence", "[core][thd]") {
  // cp 4: L = 3 (padded 8, half 1) and L = 37 (padded 40, half 5).
  // first = clamp(L − rank·half, 0, half), second = clamp(L − (2cp − rank − 1)·half, 0, half).
  const PackedSequences p = padded_packing({3, 37}, 8);
  REQUIRE(p.seq_lengths_padded == std::vector<int64_t>{8, 40});
  const int64_t want_short[4][2] = {{1, 0}, {1, 0}, {1, 0}, {0, 0}};
  const int64_t want_long[4][2] = {{5, 2}, {5, 5}, {5, 5}, {5, 5}};
  int64_t total_short = 0, total_long = 0;
  for (int64_t g = 0; g < 4; ++g) {
    const auto v = thd_valid_on_cp_rank(p, 4, g);
    REQUIRE(v.size() == 2);
    CHECK(v[0].first == want_short[g][0]);
    CHECK(v[0].second == want_short[g][1]);
    CHECK(v[1].first == want_long[g][0]);
    CHECK(v[1].second == want_long[g][1]);
    total_short += v[0].first + v[0].second;
    total_long += v[1].first + v[1].second;
  }
  REQUIRE(total_short == 3);
  REQUIRE(total_long == 37);
}

TEST_CASE("thd: post_a2a_runs and tokens_before_a2a cover every packed index once", "[core][thd]") {
  const std::vector<std::pair<int64_t, int64_t>> layouts = {{1, 4}, {4, 1}, {2, 2}, {2, 4}};
  for (const auto& [A, P] : layouts) {
    const PackedSequences packing = padded_packing({5, 19, 1, 32}, 2 * A * P);
    const ThdLayout layout(A, P, packing, ThdLayout::ValidRule::padded);
    const int64_t T = packing.total_padded();
    const auto cu = packing.cu_seqlens_padded();
    std::vector<int> seen(static_cast<size_t>(T), 0);
    for (int64_t p = 0; p < P; ++p) {
      const auto runs = layout.post_a2a_runs(p);
      REQUIRE(runs_rows(runs) == T / P);
      REQUIRE(layout.post_a2a_tokens(p).size() == static_cast<size_t>(T / P));
      for (const TokenRun& r : runs) {
        for (int64_t x = 0; x < r.rows; ++x) {
          const int64_t t = r.position + x;
          ++seen[static_cast<size_t>(t)];
          // The run's segment: the sequence holding t when valid (t − start < L_s), −1 for padding.
          const auto s = static_cast<size_t>(std::upper_bound(cu.begin(), cu.end(), t) - cu.begin() - 1);
          const bool valid = t - cu[s] < packing.seq_lengths[s];
          INFO("[" << A << ", " << P << "] p " << p << " token " << t);
          REQUIRE(r.segment == (valid ? static_cast<int64_t>(s) : -1));
        }
      }
    }
    for (int64_t t = 0; t < T; ++t) REQUIRE(seen[static_cast<size_t>(t)] == 1);
    // Before the a2a: each flat rank holds TE's tokens (thd_partitioned_indices), in hcpsim's halves-major order.
    std::vector<int> seen_before(static_cast<size_t>(T), 0);
    for (int64_t g = 0; g < A * P; ++g) {
      auto mine = layout.tokens_before_a2a(g);
      for (int64_t t : mine) ++seen_before[static_cast<size_t>(t)];
      auto te = thd_partitioned_indices(cu, A * P, g);
      std::sort(mine.begin(), mine.end());
      std::sort(te.begin(), te.end());
      REQUIRE(mine == te);
    }
    for (int64_t t = 0; t < T; ++t) REQUIRE(seen_before[static_cast<size_t>(t)] == 1);
  }
}

TEST_CASE("thd: lse_merge_unguarded is TE's formula without the empty-row guard", "[core][thd]") {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  REQUIRE(std::isnan(semantics::lse_merge_unguarded(kNegInf, kNegInf)));
  REQUIRE(std::isnan(semantics::lse_merge_unguarded(-std::numeric_limits<float>::infinity(),
                                                    -std::numeric_limits<float>::infinity())));
  REQUIRE(semantics::lse_merge(kNegInf, kNegInf) == kNegInf);
  for (const auto& [a, b] : std::vector<std::pair<double, double>>{{1.0, 3.0}, {3.0, 1.0}, {0.5, kNegInf},
                                                                   {kNegInf, -2.0}, {110.0, 111.0}}) {
    REQUIRE(semantics::lse_merge_unguarded(a, b) == semantics::lse_merge(a, b));
  }
  REQUIRE(std::isnan(semantics::lse_merge_unguarded(std::nan(""), 1.0)));
  REQUIRE(std::isnan(semantics::lse_merge_unguarded(1.0, std::nan(""))));
}
