// A CP variant added through the table alone: a row plus a builder composed of the shared pieces
// (schedule_builder_parts.hpp), built, checked for invariants and hazards, and verified numerically against the
// fp64 reference with the CPU oracle. The variant is TE's p2p ring with the ranks in reverse order: CP rank g plays
// ring position P−1−g (it holds that position's zigzag chunks and sends its KV to rank g−1).
#include <variant>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/cp_variant.hpp"
#include "hcpsim/core/schedule_builder_parts.hpp"
#include "hcpsim/oracles/verify.hpp"

using namespace hcpsim;

namespace {

namespace bp = builder_parts;

/// The rank playing ring position `position` of P (positions wrap around).
int64_t rank_at(int64_t position, int64_t P) { return P - 1 - ((position % P) + P) % P; }

/// The reversed ring's rank g (A = 1): the p2p forward ring, output correction and backward ring pieces.
void build_reversed_ring_rank(Schedule& sched, const CpLayout& layout, int64_t g, const BuilderFaults& faults) {
  RankProgram& prog = sched.ranks[static_cast<size_t>(g)];
  const int64_t P = layout.p2p_size();
  const int64_t pos = rank_at(g, P);  // the position this rank plays (the map is its own inverse)
  bp::RankState s = bp::make_rank_state(prog, sched.shape, layout, pos, faults);
  s.d.next = rank_at(pos + 1, P);
  s.d.prev = rank_at(pos - 1, P);
  const auto tokens = layout.tokens_before_a2a(pos);
  const bp::RankInputs in = bp::declare_rank_inputs(s, tokens);
  // Forward: the KV ring steps, then the output correction (A = 1: no a2a around them).
  const bp::AttnLayoutTensors qkv{in.q, in.k, in.v, {}};
  bp::ForwardRing ring = bp::init_fwd_ring(s, qkv);
  OpIndex prev_comm = -1;
  for (int64_t i = 0; i < P; ++i) prev_comm = bp::fwd_ring_step(s, qkv, ring, i, prev_comm);
  const auto [out, fwd_done] = bp::fwd_out_correction(s, ring);
  bp::free_fwd_ring_buffers(s, ring, fwd_done);
  // Backward: the [KV | dKV] ring steps with the dQ/dKV copy/add rules.
  const bp::BackwardInputs bwd_in{in.q, out, in.dout, ring.lse, {fwd_done}};
  const bp::BackwardRingBuffers bufs = bp::alloc_bwd_ring_buffers(s, bwd_in, ring);
  bp::BwdStepOps step{-1, bufs.b0_copy};
  for (int64_t i = 0; i < P; ++i) step = bp::bwd_ring_step(s, bufs, bwd_in, i, step);
  const bp::KvBuf fin = bp::free_bwd_ring_buffers(s, bufs);
  bp::order_backward_after_forward(prog, fwd_done);
  prog.outputs = {{"out", out, tokens, 0},
                  {"softmax_lse", ring.lse, tokens, 0},
                  {"dq", bufs.dq, tokens, 0},
                  {"dk", fin.dk, tokens, 0},
                  {"dv", fin.dv, tokens, 0}};
}

/// The row: p2p's layout and facts under a new name, with the reversed builder.
CpVariant reversed_ring_row() {
  CpVariant row = cp_variant(CpCommType::p2p);
  row.name = "p2p_reversed";
  row.runs_hierarchical = [](int64_t, int64_t) { return false; };
  row.takes_faults = false;
  row.build_rank = build_reversed_ring_rank;
  return row;
}

}  // namespace

TEST_CASE("oracles: a toy CP variant registered through the table matches the fp64 reference",
          "[oracles][cp_variant]") {
  const ScopedCpVariant scoped(reversed_ring_row());
  const CpVariant& row = *find_cp_variant("p2p_reversed");
  REQUIRE(&row == &scoped.row());
  for (bool causal : {true, false}) {
    for (int64_t P : {int64_t{1}, int64_t{2}, int64_t{4}}) {
      INFO("causal " << causal << " P " << P);
      const AttentionShape shape = test::attention_shape(2, 2 * P * 4, 4, 2, 8, 6, causal);
      const CpLayout layout = row.layout(P, {}, shape.seq_length);
      const Schedule sched = build_variant_schedule(row, layout, shape);
      sched.check_invariants();
      test::check_schedule(sched);  // check_invariants + check_hazards
      REQUIRE(sched.cp_comm_type == CpCommType::p2p);
      if (P > 1) {  // the ring really is reversed: rank 1's first forward message goes to rank 0
        const SendRecvOp* m = nullptr;
        for (const Op& op : sched.ranks[1].ops)
          if ((m = std::get_if<SendRecvOp>(&op.payload)) != nullptr) break;
        REQUIRE(m != nullptr);
        REQUIRE(m->send_peer == 0);
        REQUIRE(m->recv_peer == rank_at(rank_at(1, P) - 1, P));
      }
      const VerifyReport report = verify_schedule(sched, 2026, "clamped_normal", 1);
      INFO(to_string(report));
      REQUIRE(report.pass);
      REQUIRE(report.tensors.size() == 5);
      for (const TensorError& e : report.tensors) {
        INFO(e.tensor);
        REQUIRE(e.compared > 0);
        REQUIRE(e.max_abs_err < 1e-12);
        REQUIRE(e.rel_l2_err < 1e-12);
      }
    }
  }
  REQUIRE(find_cp_variant("p2p_reversed") != nullptr);
}

TEST_CASE("oracles: the toy CP variant is gone once its scope ends", "[oracles][cp_variant]") {
  { const ScopedCpVariant scoped(reversed_ring_row()); }
  REQUIRE(find_cp_variant("p2p_reversed") == nullptr);
}
