#include <numeric>

#include "catch_compat.hpp"
#include "hcpsim/core/cp_layout.hpp"

using hcpsim::CpLayout;
using V = std::vector<int64_t>;

TEST_CASE("core: CP=4 [2,2] S=16 layout equals docs/algorithm.md §2.3", "[core][layout]") {
  const CpLayout l(2, 2, 16);
  REQUIRE(l.chunk_size() == 2);
  REQUIRE(l.super_chunk_size() == 4);
  // Table of §2.3: g -> (p, a), chunks, tokens before the a2a.
  REQUIRE(l.p2p_rank(0) == 0);
  REQUIRE(l.a2a_rank(0) == 0);
  REQUIRE(l.p2p_rank(1) == 0);
  REQUIRE(l.a2a_rank(1) == 1);
  REQUIRE(l.p2p_rank(2) == 1);
  REQUIRE(l.a2a_rank(2) == 0);
  REQUIRE(l.p2p_rank(3) == 1);
  REQUIRE(l.a2a_rank(3) == 1);
  REQUIRE(l.zigzag_chunks(0) == V{0, 7});
  REQUIRE(l.zigzag_chunks(1) == V{1, 6});
  REQUIRE(l.zigzag_chunks(2) == V{2, 5});
  REQUIRE(l.zigzag_chunks(3) == V{3, 4});
  REQUIRE(l.tokens_before_a2a(0) == V{0, 1, 14, 15});
  REQUIRE(l.tokens_before_a2a(1) == V{2, 3, 12, 13});
  REQUIRE(l.tokens_before_a2a(2) == V{4, 5, 10, 11});
  REQUIRE(l.tokens_before_a2a(3) == V{6, 7, 8, 9});
  REQUIRE(l.a2a_group(0) == V{0, 1});
  REQUIRE(l.a2a_group(1) == V{2, 3});
  REQUIRE(l.p2p_group(0) == V{0, 2});
  REQUIRE(l.p2p_group(1) == V{1, 3});
  // After the a2a: p2p rank 0 holds tokens 0 1 2 3 | 12 13 14 15; rank 1 holds 4..11.
  REQUIRE(l.post_a2a_tokens(0) == V{0, 1, 2, 3, 12, 13, 14, 15});
  REQUIRE(l.post_a2a_tokens(1) == V{4, 5, 6, 7, 8, 9, 10, 11});
}

TEST_CASE("core: chunk-id tables before/after match TE and are inverse permutations", "[core][layout]") {
  // Values from docs/algorithm.md §3.1 for n = 2 and 4.
  REQUIRE(CpLayout::chunk_ids_before_attn(2) == V{0, 2, 3, 1});
  REQUIRE(CpLayout::chunk_ids_after_attn(2) == V{0, 3, 1, 2});
  REQUIRE(CpLayout::chunk_ids_before_attn(4) == V{0, 2, 4, 6, 7, 5, 3, 1});
  REQUIRE(CpLayout::chunk_ids_after_attn(4) == V{0, 7, 1, 6, 2, 5, 3, 4});
  REQUIRE(CpLayout::chunk_ids_before_attn(1) == V{0, 1});
  REQUIRE(CpLayout::chunk_ids_after_attn(1) == V{0, 1});
  REQUIRE(CpLayout::chunk_ids_before_attn(3) == V{0, 2, 4, 5, 3, 1});
  REQUIRE(CpLayout::chunk_ids_after_attn(3) == V{0, 5, 1, 4, 2, 3});
  for (int64_t n : {1, 2, 3, 4, 8}) {
    const auto before = CpLayout::chunk_ids_before_attn(n);
    const auto after = CpLayout::chunk_ids_after_attn(n);
    REQUIRE(static_cast<int64_t>(before.size()) == 2 * n);
    // The after-attn slot m reads before-position after[m]; composed they give the identity:
    // before[after[m]] == m for every m.
    for (int64_t m = 0; m < 2 * n; ++m) REQUIRE(before[static_cast<size_t>(after[static_cast<size_t>(m)])] == m);
    V sorted = before;
    std::sort(sorted.begin(), sorted.end());
    V iota(static_cast<size_t>(2 * n));
    std::iota(iota.begin(), iota.end(), 0);
    REQUIRE(sorted == iota);
  }
}

TEST_CASE("core: post-a2a order is super-chunks {p, 2P-1-p} for every (A, P)", "[core][layout]") {
  const std::vector<std::pair<int64_t, int64_t>> shapes{{2, 2}, {1, 4}, {4, 1}, {2, 3}, {3, 2}, {4, 2}, {2, 4}, {8, 2}};
  for (auto [A, P] : shapes) {
    const int64_t S = 2 * A * P * 3;  // c = 3 tokens per chunk
    const CpLayout l(A, P, S);
    const int64_t C = l.super_chunk_size();
    REQUIRE(C == A * 3);
    for (int64_t p = 0; p < P; ++p) {
      V want;
      for (int64_t t = p * C; t < (p + 1) * C; ++t) want.push_back(t);
      for (int64_t t = (2 * P - 1 - p) * C; t < (2 * P - p) * C; ++t) want.push_back(t);
      INFO("A=" << A << " P=" << P << " p=" << p);
      REQUIRE(l.post_a2a_tokens(p) == want);
    }
    // Every token appears exactly once across the p2p ranks, and across the flat ranks.
    V all_post, all_flat;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t t : l.post_a2a_tokens(p)) all_post.push_back(t);
    for (int64_t g = 0; g < A * P; ++g)
      for (int64_t t : l.tokens_before_a2a(g)) all_flat.push_back(t);
    std::sort(all_post.begin(), all_post.end());
    std::sort(all_flat.begin(), all_flat.end());
    V iota(static_cast<size_t>(S));
    std::iota(iota.begin(), iota.end(), 0);
    REQUIRE(all_post == iota);
    REQUIRE(all_flat == iota);
  }
}

TEST_CASE("core: Megatron rank order places CP ranks TP apart (tp-cp-ep-dp-pp)", "[core][layout]") {
  hcpsim::ParallelSizes sizes;
  sizes.tp = 4;
  sizes.cp = 16;
  sizes.dp = 1;
  // Llama-3-70B scenario: TP=4, CP=16 on 8 nodes of 8 GPUs; G = t + 4·g, so cp rank g sits on node 4g/8 = g/2.
  const auto place = hcpsim::place_cp_group("tp-cp-ep-dp-pp", sizes, 8);
  REQUIRE(place.size() == 16);
  REQUIRE(place[0].global_rank == 0);
  REQUIRE(place[1].global_rank == 4);
  REQUIRE(place[1].node == 0);
  REQUIRE(place[1].local_gpu == 4);
  REQUIRE(place[2].node == 1);
  REQUIRE(place[15].global_rank == 60);
  REQUIRE(place[15].node == 7);
  // With cp first in the order, CP ranks are consecutive.
  const auto place2 = hcpsim::place_cp_group("cp-tp-ep-dp-pp", sizes, 8);
  REQUIRE(place2[3].global_rank == 3);
  REQUIRE(hcpsim::global_rank("tp-cp-ep-dp-pp", sizes, 1, 2, 0, 0) == 9);
  REQUIRE(hcpsim::is_valid_parallel_order("tp-cp-ep-dp-pp"));
  REQUIRE(hcpsim::is_valid_parallel_order("tp-cp-dp-pp"));  // Megatron appends ep (size 1)
  REQUIRE(hcpsim::is_valid_parallel_order("TP-CP-EP-DP-PP"));  // Megatron lower-cases the order
  REQUIRE_FALSE(hcpsim::is_valid_parallel_order("tp-cp-xp-dp-pp"));
  REQUIRE_FALSE(hcpsim::is_valid_parallel_order(""));
  REQUIRE(hcpsim::parallel_order_ep_next_to_dp("tp-cp-ep-dp-pp"));
  REQUIRE(hcpsim::parallel_order_ep_next_to_dp("tp-cp-dp-ep-pp"));
  REQUIRE(hcpsim::parallel_order_ep_next_to_dp("tp-cp-dp-pp"));
  REQUIRE_FALSE(hcpsim::parallel_order_ep_next_to_dp("tp-dp-cp-ep-pp"));
  REQUIRE(hcpsim::parallel_order_names("tp-cp-dp-pp", "dp"));
  REQUIRE_FALSE(hcpsim::parallel_order_names("tp-cp-dp-pp", "ep"));
  REQUIRE_FALSE(hcpsim::is_valid_parallel_order("tp-tp-ep-dp-pp"));
}
