#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/sim/cost_model.hpp"
#include "sim_test_util.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;

TEST_CASE("sim: attention block time is the roofline max of compute and HBM time", "[sim]") {
  const ClusterSpec c = test::round_cluster(1, 8);
  // Forward: 1e10 flop / (1e15 · 0.5) = 20 µs; 1e6 B / 1e12 B/s = 1 µs → 20 µs.
  REQUIRE(attention_block_ps(OpKind::attn_fwd_block, 1e10, 1'000'000, Dtype::bf16, c.gpu) == 20'000'000);
  // Backward efficiency 0.25: 1e10 / 2.5e14 = 40 µs.
  REQUIRE(attention_block_ps(OpKind::attn_bwd_block, 1e10, 1'000'000, Dtype::bf16, c.gpu) == 40'000'000);
  // Memory-bound: 1e8 flop → 0.2 µs; 5e6 B → 5 µs.
  REQUIRE(attention_block_ps(OpKind::attn_fwd_block, 1e8, 5'000'000, Dtype::bf16, c.gpu) == 5'000'000);
  // fp32 runs at kFp32PeakFraction = 0.5 of the bf16 peak: 40 µs.
  REQUIRE(attention_block_ps(OpKind::attn_fwd_block, 1e10, 0, Dtype::fp32, c.gpu) == 40'000'000);
  REQUIRE(attention_block_ps(OpKind::attn_fwd_block, 1e10, 0, Dtype::fp16, c.gpu) == 20'000'000);
  // A tiny block still takes its launch overhead (3 us), as the copies and merges do: a 28 x 28 causal block of a
  // short packed sequence was 0.318 us next to a 3 us copy. An empty block (no pair) launches nothing.
  REQUIRE(attention_block_ps(OpKind::attn_fwd_block, 1e6, 1000, Dtype::bf16, c.gpu) == 3'000'000);
  REQUIRE(attention_block_ps(OpKind::attn_bwd_block, 1e6, 1000, Dtype::bf16, c.gpu) == 3'000'000);
  REQUIRE(attention_block_ps(OpKind::attn_fwd_block, 0, 0, Dtype::bf16, c.gpu) == 0);
}

TEST_CASE("sim: elementwise kernels cost a launch overhead plus their HBM traffic", "[sim]") {
  const ClusterSpec c = test::round_cluster(1, 8);
  // 3 µs launch + 2e6 B / 1e12 B/s = 5 µs.
  REQUIRE(elementwise_ps(2'000'000, c.gpu) == 5'000'000);
  REQUIRE(elementwise_ps(0, c.gpu) == 3'000'000);
}

TEST_CASE("sim: a message costs software + link latency + bytes over the bandwidth of its level", "[sim]") {
  const ClusterSpec c = test::round_cluster(2, 8);
  REQUIRE(link_level(0, 0) == LinkLevel::intra_node);
  REQUIRE(link_level(0, 1) == LinkLevel::inter_node);
  // NVLink: 5 µs + 1 µs + 1e6 B / 1e11 B/s (10 µs) = 16 µs.
  REQUIRE(message_ps(1'000'000, LinkLevel::intra_node, c) == 16'000'000);
  // Network: 5 µs + 4 µs + 1e6 B / 2.5e10 B/s (40 µs) = 49 µs.
  REQUIRE(message_ps(1'000'000, LinkLevel::inter_node, c) == 49'000'000);
}

TEST_CASE("sim: attention HBM bytes come from the op's row ranges and output buffers", "[sim]") {
  RankProgram prog;
  test::ProgramWriter w(prog);
  const BufferId q = w.input("q", 8, 2, 16);   // row = 2·16·2 B = 64 B
  const BufferId k = w.input("k", 8, 1, 16);   // row = 32 B
  const BufferId v = w.input("v", 8, 1, 16);   // row = 32 B
  const BufferId out = w.declare("out", 4, 2, 16);  // 4 rows · 64 B = 256 B
  prog.buffers.push_back(BufferDecl{"lse", 1, 4, 2, 1, Dtype::fp32});  // 4 · 2 · 4 B = 32 B
  const auto lse = static_cast<BufferId>(prog.buffers.size() - 1);
  w.add(AttnFwdBlockOp{q, k, v, {4, 4}, {0, 8}, BlockMask::none, Section::upper, out, lse}, Stream::compute, {},
        "fwd");
  // q: 4 rows · 64 + k: 8 · 32 + v: 8 · 32 + out 256 + lse 32 = 256 + 256 + 256 + 256 + 32 = 1056 B.
  REQUIRE(attention_block_hbm_bytes(prog.ops[0], prog) == 1056);
}

TEST_CASE("sim: every cluster preset has positive rates the cost model accepts", "[sim]") {
  for (const auto& name : cluster_preset_names()) {
    const auto c = cluster_preset(name, 2);
    REQUIRE(c.has_value());
    REQUIRE(attention_block_ps(OpKind::attn_fwd_block, 1e12, 1'000'000, Dtype::bf16, c->gpu) > 0);
    REQUIRE(message_ps(1'000'000, LinkLevel::inter_node, *c) > message_ps(1'000'000, LinkLevel::intra_node, *c));
  }
}
