// The cost model of packed-sequence (THD) attention blocks: one varlen launch over per-sequence sub-blocks, so
// many short sequences cost more per FLOP than one long one, and a single sequence filling the block costs what
// the bshd block costs.
#include <cstdint>
#include <variant>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/cost_model.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;

namespace {

AttentionShape shape_of(const std::vector<int64_t>& lengths, int64_t cp) {
  AttentionShape sh;
  sh.heads_q = 32;
  sh.heads_kv = 8;
  sh.head_dim_qk = sh.head_dim_v = 128;
  sh.causal = true;
  sh.dtype = Dtype::bf16;
  if (!lengths.empty()) {
    sh.packing.seq_lengths = lengths;
    sh.packing.seq_lengths_padded = pad_sequence_lengths(lengths, 2 * cp);
    sh.seq_length = sh.packing.total_padded();
  }
  return sh;
}

/// Σ time and Σ FLOPs of rank 0's forward attention blocks (seconds, flop).
std::pair<double, double> forward_blocks(const Schedule& s, const GpuSpec& gpu) {
  double t = 0, f = 0;
  const RankProgram& prog = s.ranks[0];
  for (const Op& op : prog.ops) {
    if (!std::holds_alternative<AttnFwdBlockOp>(op.payload)) continue;
    t += static_cast<double>(compute_op_ps(op, prog, Dtype::bf16, gpu)) * 1e-12;
    f += op.flops;
  }
  return {t, f};
}

}  // namespace

TEST_CASE("sim thd: many short packed sequences run slower per FLOP than one long one", "[sim][thd]") {
  const auto cluster = cluster_preset("dgx-h100", 1);
  REQUIRE(cluster.has_value());
  const int64_t cp = 4;
  const AttentionShape one = shape_of({32768}, cp);
  const AttentionShape many = shape_of(std::vector<int64_t>(256, 128), cp);  // 256 × 128 = 32768 tokens
  REQUIRE(one.seq_length == many.seq_length);
  const auto [t_one, f_one] = forward_blocks(build_schedule(CpCommType::p2p, CpLayout(1, cp, 32768), one), cluster->gpu);
  const auto [t_many, f_many] =
      forward_blocks(build_schedule(CpCommType::p2p, CpLayout(1, cp, 32768), many), cluster->gpu);
  // Per-sequence attention has 256× fewer pairs, each 128-token sequence split into 16-token chunks.
  REQUIRE(f_many < f_one / 100);
  const double rate_one = f_one / t_one, rate_many = f_many / t_many;
  INFO("one: " << rate_one / 1e12 << " TFLOP/s, many: " << rate_many / 1e12 << " TFLOP/s");
  REQUIRE(rate_many < 0.5 * rate_one);
  // Still faster in absolute time (far fewer FLOPs) than the long sequence.
  REQUIRE(t_many < t_one);
}

TEST_CASE("sim thd: one packed sequence without padding costs what the bshd blocks cost", "[sim][thd]") {
  const auto cluster = cluster_preset("dgx-h100", 1);
  REQUIRE(cluster.has_value());
  const int64_t cp = 2;
  AttentionShape bshd = shape_of({}, cp);
  bshd.seq_length = 8192;
  const AttentionShape thd = shape_of({8192}, cp);
  const auto [t_b, f_b] = forward_blocks(build_schedule(CpCommType::p2p, CpLayout(1, cp, 8192), bshd), cluster->gpu);
  const auto [t_t, f_t] = forward_blocks(build_schedule(CpCommType::p2p, CpLayout(1, cp, 8192), thd), cluster->gpu);
  // The diagonal blocks differ only in where the causal diagonal's masked pairs sit (positions vs local rows):
  // the same pair count, so the same FLOPs and time.
  REQUIRE(f_t == Approx(f_b).epsilon(1e-12));
  REQUIRE(t_t == Approx(t_b).epsilon(1e-9));
}

TEST_CASE("sim thd: the tile factor is 1 on whole tiles and charges a short sequence a whole tile", "[sim][thd]") {
  REQUIRE(attention_tile_factor(256, 512, false) == 1.0);
  REQUIRE(attention_tile_factor(128, 128, true) == 1.0);
  // 16 × 16 causal: 136 pairs of a 128 × 128 causal tile's 8256.
  REQUIRE(attention_tile_factor(16, 16, true) == Approx(136.0 / 8256.0));
  REQUIRE(attention_tile_factor(0, 16, true) == 1.0);
}
