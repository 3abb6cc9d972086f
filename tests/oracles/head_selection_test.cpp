#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/oracles/head_selection.hpp"
#include "test_util.hpp"

using namespace hcpsim;

TEST_CASE("oracles: oracle.heads selects the first heads of every a2a member in whole KV groups", "[oracles]") {
  // H = 32, Hkv = 8 (groups of 4), A = 2: member a holds q-heads 16a..16a+15 and KV heads 4a..4a+3.
  const AttentionShape full = test::attention_shape(1, 64, 32, 8, 16, 16, true);
  SECTION("4 heads: one KV group per member") {
    const HeadSelection sel = select_heads(full, 2, "4");
    REQUIRE(sel.q_heads == std::vector<int64_t>{0, 1, 2, 3, 16, 17, 18, 19});
    REQUIRE(sel.kv_heads == std::vector<int64_t>{0, 4});
    REQUIRE(sel.shape.heads_q == 8);
    REQUIRE(sel.shape.heads_kv == 2);
    REQUIRE(sel.shape.seq_length == 64);
  }
  SECTION("3 heads round up to the whole group of 4") {
    const HeadSelection sel = select_heads(full, 2, "3");
    REQUIRE(sel.q_heads == std::vector<int64_t>{0, 1, 2, 3, 16, 17, 18, 19});
  }
  SECTION("a count covering a member (16 of 16, or more) is every head") {
    for (const char* n : {"16", "20", "all"}) {
      const HeadSelection sel = select_heads(full, 2, n);
      REQUIRE(sel.q_heads.empty());
      REQUIRE(sel.kv_heads.empty());
      REQUIRE(sel.shape.heads_q == 32);
    }
  }
  SECTION("A = 1 (p2p): the first heads of the whole model") {
    const HeadSelection sel = select_heads(full, 1, "8");
    REQUIRE(sel.q_heads == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
    REQUIRE(sel.kv_heads == std::vector<int64_t>{0, 1});
  }
  SECTION("verify_options carries the subset, the full head counts and the run settings") {
    const HeadSelection sel = select_heads(full, 2, "4");
    const VerifyOptions opt = verify_options(sel, full, 77, "adversarial", Dtype::bf16, 3);
    REQUIRE(opt.seed == 77);
    REQUIRE(opt.input_distribution == "adversarial");
    REQUIRE(opt.dtype == Dtype::bf16);
    REQUIRE(opt.threads == 3);
    REQUIRE(opt.q_heads == sel.q_heads);
    REQUIRE(opt.kv_heads == sel.kv_heads);
    REQUIRE(opt.full_heads_q == 32);
    REQUIRE(opt.full_heads_kv == 8);
  }
}
