#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/cpu_executor.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"
#include "hcpsim/oracles/verify.hpp"

using namespace hcpsim;

namespace {

AttentionShape make_shape(int64_t b, int64_t s, int64_t h, int64_t hkv, int64_t dk, int64_t dv, bool causal) {
  return test::attention_shape(b, s, h, hkv, dk, dv, causal, Dtype::fp64);
}

bool bytes_equal(const HostTensor& a, const HostTensor& b) {
  return a.same_shape(b) &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.elements())) == 0;
}

std::vector<int64_t> range_tokens(int64_t begin, int64_t count) {
  std::vector<int64_t> t(static_cast<size_t>(count));
  std::iota(t.begin(), t.end(), begin);
  return t;
}

/// Appends buffers and ops to one hand-built rank program.
struct Prog {
  RankProgram& p;
  int64_t batch;

  BufferId declare(const std::string& name, int64_t rows, int64_t heads, int64_t width) {
    p.buffers.push_back(BufferDecl{name, batch, rows, heads, width, Dtype::fp64});
    return static_cast<BufferId>(p.buffers.size() - 1);
  }
  BufferId alloc(const std::string& name, int64_t rows, int64_t heads, int64_t width) {
    const BufferId id = declare(name, rows, heads, width);
    op(AllocOp{id}, "alloc " + name);
    return id;
  }
  void op(OpPayload payload, const std::string& label, Phase phase = Phase::forward) {
    Op o;
    o.payload = std::move(payload);
    o.phase = phase;
    o.label = label;
    // Communication runs on the comm stream (Schedule::check_invariants requires it).
    if (o.kind() == OpKind::send_recv || o.kind() == OpKind::all_to_all) o.stream = Stream::comm;
    // These programs are written in execution order: each op waits for the one before it, so that the ordering
    // contract (deps and stream order, schedule.hpp) orders every buffer access as the list does.
    if (!p.ops.empty()) o.deps.push_back(static_cast<OpIndex>(p.ops.size() - 1));
    p.ops.push_back(std::move(o));
  }
};

Schedule empty_schedule(const AttentionShape& shape, CpCommType type, int64_t a2a, int64_t p2p) {
  Schedule s;
  s.cp_comm_type = type;
  s.a2a_size = a2a;
  s.p2p_size = p2p;
  s.shape = shape;
  s.ranks.resize(static_cast<size_t>(a2a * p2p));
  for (size_t r = 0; r < s.ranks.size(); ++r) s.ranks[r].rank = s.ranks[r].cp_rank = static_cast<int64_t>(r);
  return s;
}

/// One rank holding the whole sequence. With `with_empty_block`, the forward first runs a block with no KV rows
/// (every row sees nothing), initialises lse and out from it and then merges/corrects the real block in.
Schedule single_rank_schedule(const AttentionShape& sh, bool with_empty_block) {
  Schedule s = empty_schedule(sh, CpCommType::p2p, 1, 1);
  const int64_t S = sh.seq_length, H = sh.heads_q, Hkv = sh.heads_kv;
  Prog r{s.ranks[0], sh.batch};
  const BufferId q = r.declare("q", S, H, sh.head_dim_qk), k = r.declare("k", S, Hkv, sh.head_dim_qk);
  const BufferId v = r.declare("v", S, Hkv, sh.head_dim_v), dout = r.declare("dout", S, H, sh.head_dim_v);
  const auto all_tokens = range_tokens(0, S);
  r.p.inputs = {{"q", q, all_tokens, 0}, {"k", k, all_tokens, 0}, {"v", v, all_tokens, 0},
                {"dout", dout, all_tokens, 0}};
  const BlockMask mask = sh.causal ? BlockMask::causal : BlockMask::none;
  const Section sec = sh.causal ? Section::diagonal : Section::full;
  const RowRange all{0, S};
  BufferId out = -1, lse = -1;
  if (!with_empty_block) {
    out = r.alloc("out", S, H, sh.head_dim_v);
    lse = r.alloc("lse", S, H, 1);
    r.op(AttnFwdBlockOp{q, k, v, all, all, mask, sec, out, lse}, "fwd");
  } else {
    const BufferId o0 = r.alloc("o0", S, H, sh.head_dim_v), l0 = r.alloc("l0", S, H, 1);
    const BufferId o1 = r.alloc("o1", S, H, sh.head_dim_v), l1 = r.alloc("l1", S, H, 1);
    r.op(AttnFwdBlockOp{q, k, v, all, RowRange{S / 2, 0}, BlockMask::none, Section::full, o0, l0}, "fwd empty");
    r.op(AttnFwdBlockOp{q, k, v, all, all, mask, sec, o1, l1}, "fwd");
    lse = r.alloc("lse", S, H, 1);
    r.op(CopyOp{lse, l0, all, all, false}, "lse init");
    r.op(LseMergeOp{lse, l1, all, false}, "lse merge");
    out = r.alloc("out", S, H, sh.head_dim_v);
    r.op(OutCorrectionOp{out, o0, l0, lse, all, false}, "out init");
    r.op(OutCorrectionOp{out, o1, l1, lse, all, true}, "out add");
    for (BufferId id : {o0, l0, o1, l1}) r.op(FreeOp{id}, "free");
  }
  const BufferId dq = r.alloc("dq", S, H, sh.head_dim_qk), dk = r.alloc("dk", S, Hkv, sh.head_dim_qk);
  const BufferId dv = r.alloc("dv", S, Hkv, sh.head_dim_v);
  r.op(AttnBwdBlockOp{q, k, v, out, dout, lse, all, all, mask, sec, dq, dk, dv}, "bwd", Phase::backward);
  r.p.outputs = {{"out", out, all_tokens, 0},
                 {"softmax_lse", lse, all_tokens, 0},
                 {"dq", dq, all_tokens, 0},
                 {"dk", dk, all_tokens, 0},
                 {"dv", dv, all_tokens, 0}};
  return s;
}

/// Two ranks, non-causal, a hand-written P = 2 ring: rank r holds tokens [4r, 4r+4) (any split is valid without a
/// mask). Forward: exchange KV, two blocks, LSE merge, output correction. Backward: both blocks, send the dK/dV
/// partials of the peer's KV back, add.
Schedule two_rank_ring_schedule(const AttentionShape& sh) {
  Schedule s = empty_schedule(sh, CpCommType::p2p, 1, 2);
  const int64_t n = sh.seq_length / 2, H = sh.heads_q, Hkv = sh.heads_kv, dk = sh.head_dim_qk, dv = sh.head_dim_v;
  const RowRange all{0, n};
  for (int64_t rank = 0; rank < 2; ++rank) {
    const int64_t peer = 1 - rank;
    Prog r{s.ranks[static_cast<size_t>(rank)], sh.batch};
    const BufferId q = r.declare("q", n, H, dk), k = r.declare("k", n, Hkv, dk), v = r.declare("v", n, Hkv, dv);
    const BufferId dout = r.declare("dout", n, H, dv);
    const auto tokens = range_tokens(rank * n, n);
    r.p.inputs = {{"q", q, tokens, 0}, {"k", k, tokens, 0}, {"v", v, tokens, 0}, {"dout", dout, tokens, 0}};
    const BufferId k1 = r.alloc("k1", n, Hkv, dk), v1 = r.alloc("v1", n, Hkv, dv);
    r.op(SendRecvOp{peer, peer, {k, v}, {k1, v1}, 7, 7}, "fwd kv exchange");
    const BufferId o0 = r.alloc("o0", n, H, dv), l0 = r.alloc("l0", n, H, 1);
    const BufferId o1 = r.alloc("o1", n, H, dv), l1 = r.alloc("l1", n, H, 1);
    r.op(AttnFwdBlockOp{q, k, v, all, all, BlockMask::none, Section::full, o0, l0}, "fwd own");
    r.op(AttnFwdBlockOp{q, k1, v1, all, all, BlockMask::none, Section::full, o1, l1}, "fwd peer");
    const BufferId lse = r.alloc("lse", n, H, 1), out = r.alloc("out", n, H, dv);
    r.op(CopyOp{lse, l0, all, all, false}, "lse init");
    r.op(LseMergeOp{lse, l1, all, false}, "lse merge");
    r.op(OutCorrectionOp{out, o0, l0, lse, all, false}, "out init");
    r.op(OutCorrectionOp{out, o1, l1, lse, all, true}, "out add");
    const auto B = Phase::backward;
    const BufferId dq0 = r.alloc("dq0", n, H, dk), dk0 = r.alloc("dk0", n, Hkv, dk), dv0 = r.alloc("dv0", n, Hkv, dv);
    const BufferId dq1 = r.alloc("dq1", n, H, dk), dk1 = r.alloc("dk1", n, Hkv, dk), dv1 = r.alloc("dv1", n, Hkv, dv);
    r.op(AttnBwdBlockOp{q, k, v, out, dout, lse, all, all, BlockMask::none, Section::full, dq0, dk0, dv0}, "bwd own",
         B);
    r.op(AttnBwdBlockOp{q, k1, v1, out, dout, lse, all, all, BlockMask::none, Section::full, dq1, dk1, dv1},
         "bwd peer", B);
    const BufferId rdk = r.alloc("rdk", n, Hkv, dk), rdv = r.alloc("rdv", n, Hkv, dv);
    r.op(SendRecvOp{peer, peer, {dk1, dv1}, {rdk, rdv}, 8, 8}, "bwd dkv exchange", B);
    const BufferId dq = r.alloc("dq", n, H, dk), dkf = r.alloc("dk", n, Hkv, dk), dvf = r.alloc("dv", n, Hkv, dv);
    r.op(CopyOp{dq, dq0, all, all, false}, "dq =", B);
    r.op(CopyOp{dq, dq1, all, all, true}, "dq +=", B);
    r.op(CopyOp{dkf, dk0, all, all, false}, "dk =", B);
    r.op(CopyOp{dkf, rdk, all, all, true}, "dk +=", B);
    r.op(CopyOp{dvf, dv0, all, all, false}, "dv =", B);
    r.op(CopyOp{dvf, rdv, all, all, true}, "dv +=", B);
    r.p.outputs = {{"out", out, tokens, 0},
                   {"softmax_lse", lse, tokens, 0},
                   {"dq", dq, tokens, 0},
                   {"dk", dkf, tokens, 0},
                   {"dv", dvf, tokens, 0}};
  }
  return s;
}

/// Pure a2a (Ulysses), A = 2, P = 1, causal, S = 8 (c = 2), H = Hkv = 2, written from docs/algorithm.md §2.3/§3:
/// rank g holds zigzag chunks g, 3−g (rank 0: tokens 0 1 6 7, rank 1: 2 3 4 5); before(2) = [0, 2, 3, 1] puts
/// the gathered half-chunks [0 1 | 6 7 | 2 3 | 4 5] in natural order; after(2) = [0, 3, 1, 2] undoes it.
Schedule a2a_schedule(const AttentionShape& sh) {
  Schedule s = empty_schedule(sh, CpCommType::a2a, 2, 1);
  const int64_t S = sh.seq_length, n = S / 2, H = sh.heads_q, Hkv = sh.heads_kv;
  const int64_t dk = sh.head_dim_qk, dv = sh.head_dim_v, c = S / 4;
  const std::vector<int64_t> group{0, 1}, before{0, 2, 3, 1}, after{0, 3, 1, 2};
  using Dir = AllToAllOp::Direction;
  for (int64_t g = 0; g < 2; ++g) {
    Prog r{s.ranks[static_cast<size_t>(g)], sh.batch};
    std::vector<int64_t> tokens = range_tokens(g * c, c);
    for (int64_t t : range_tokens((3 - g) * c, c)) tokens.push_back(t);
    const BufferId q = r.declare("q", n, H, dk), k = r.declare("k", n, Hkv, dk), v = r.declare("v", n, Hkv, dv);
    const BufferId dout = r.declare("dout", n, H, dv);
    r.p.inputs = {{"q", q, tokens, 0}, {"k", k, tokens, 0}, {"v", v, tokens, 0}, {"dout", dout, tokens, 0}};
    const BufferId qa = r.alloc("q.a2a", S, H / 2, dk), ka = r.alloc("k.a2a", S, Hkv / 2, dk);
    const BufferId va = r.alloc("v.a2a", S, Hkv / 2, dv), douta = r.alloc("dout.a2a", S, H / 2, dv);
    r.op(AllToAllOp{Dir::scatter_heads, group, before, q, qa, 1}, "a2a q");
    r.op(AllToAllOp{Dir::scatter_heads, group, before, k, ka, 2}, "a2a k");
    r.op(AllToAllOp{Dir::scatter_heads, group, before, v, va, 3}, "a2a v");
    r.op(AllToAllOp{Dir::scatter_heads, group, before, dout, douta, 4}, "a2a dout");
    const BufferId oa = r.alloc("out.a2a", S, H / 2, dv), lse = r.alloc("lse", S, H / 2, 1);
    const RowRange all{0, S};
    r.op(AttnFwdBlockOp{qa, ka, va, all, all, BlockMask::causal, Section::diagonal, oa, lse}, "fwd");
    const BufferId dqa = r.alloc("dq.a2a", S, H / 2, dk), dka = r.alloc("dk.a2a", S, Hkv / 2, dk);
    const BufferId dva = r.alloc("dv.a2a", S, Hkv / 2, dv);
    r.op(AttnBwdBlockOp{qa, ka, va, oa, douta, lse, all, all, BlockMask::causal, Section::diagonal, dqa, dka, dva},
         "bwd", Phase::backward);
    const BufferId out = r.alloc("out", n, H, dv), dq = r.alloc("dq", n, H, dk);
    const BufferId dkf = r.alloc("dk", n, Hkv, dk), dvf = r.alloc("dv", n, Hkv, dv);
    r.op(AllToAllOp{Dir::gather_heads, group, after, oa, out, 5}, "a2a out");
    r.op(AllToAllOp{Dir::gather_heads, group, after, dqa, dq, 6}, "a2a dq");
    r.op(AllToAllOp{Dir::gather_heads, group, after, dka, dkf, 7}, "a2a dk");
    r.op(AllToAllOp{Dir::gather_heads, group, after, dva, dvf, 8}, "a2a dv");
    r.p.outputs = {{"out", out, tokens, 0},
                   {"softmax_lse", lse, range_tokens(0, S), g * (H / 2)},
                   {"dq", dq, tokens, 0},
                   {"dk", dkf, tokens, 0},
                   {"dv", dvf, tokens, 0}};
  }
  return s;
}

int64_t total_ops(const Schedule& s) {
  int64_t n = 0;
  for (const RankProgram& r : s.ranks) n += static_cast<int64_t>(r.ops.size());
  return n;
}

}  // namespace

TEST_CASE("oracles: executor on a one-rank schedule reproduces the one-block kernels bit for bit", "[oracles]") {
  for (bool causal : {true, false}) {
    for (bool with_empty_block : {false, true}) {
      INFO("causal " << causal << " with_empty_block " << with_empty_block);
      const AttentionShape shape = make_shape(2, 12, 4, 2, 8, 4, causal);
      const Schedule s = single_rank_schedule(shape, with_empty_block);
      const AttentionInputs in = make_attention_inputs(21, shape, "clamped_normal");
      const ExecutionResult run = execute_schedule(s, in, 1);
      const AttentionOutputs ref = non_cp_baseline_attention(in, causal, shape.softmax_scale, 1, Dtype::fp64);
      // Same kernels on the same rows; an empty block merges exactly: merge(−inf, L) = L + log1p(0) = L and
      // out = 0 + o·exp(L − L) = o. So every bit must agree.
      REQUIRE(bytes_equal(run.outputs.out, ref.out));
      REQUIRE(bytes_equal(run.outputs.softmax_lse, ref.softmax_lse));
      REQUIRE(bytes_equal(run.outputs.dq, ref.dq));
      REQUIRE(bytes_equal(run.outputs.dk, ref.dk));
      REQUIRE(bytes_equal(run.outputs.dv, ref.dv));
      REQUIRE(run.stats.ops_executed == total_ops(s));
      REQUIRE(run.stats.messages == 0);
      // The independent reference (its own code) agrees to fp64 rounding only.
      const VerifyReport report = compare_outputs(
          run.outputs, reference_attention(in, causal, shape.softmax_scale, 1), kFp64RelL2Tolerance);
      INFO(to_string(report));
      REQUIRE(report.pass);
    }
  }
}

TEST_CASE("oracles: executor runs a hand-written two-rank ring (send/recv, merge, correction, add)", "[oracles]") {
  const AttentionShape shape = make_shape(2, 8, 4, 2, 8, 4, false);
  const Schedule s = two_rank_ring_schedule(shape);
  const AttentionInputs in = make_attention_inputs(22, shape, "clamped_normal");
  const ExecutionResult run = execute_schedule(s, in, 2);
  const AttentionOutputs ref = reference_attention(in, false, shape.softmax_scale, 1);
  const VerifyReport report = compare_outputs(run.outputs, ref, kFp64RelL2Tolerance);
  INFO(to_string(report));
  REQUIRE(report.pass);
  REQUIRE(run.stats.ops_executed == total_ops(s));
  // 2 ranks × (KV exchange + dKV exchange); elements: fwd k+v, bwd dk+dv, per rank [2, 4, 2, 8] + [2, 4, 2, 4].
  REQUIRE(run.stats.messages == 4);
  REQUIRE(run.stats.message_elements == 4 * (2 * 4 * 2 * 8 + 2 * 4 * 2 * 4));
  // Each exchange is one send_recv per rank that meets its peer's: one rendezvous batch per exchange.
  REQUIRE(run.stats.batches == 2);
}

TEST_CASE("oracles: executor runs a hand-written Ulysses all-to-all schedule", "[oracles]") {
  for (int64_t batch : {1, 2}) {
    const AttentionShape shape = make_shape(batch, 8, 2, 2, 4, 6, true);
    const Schedule s = a2a_schedule(shape);
    const AttentionInputs in = make_attention_inputs(23, shape, "uniform");
    const ExecutionResult run = execute_schedule(s, in, 1);
    const AttentionOutputs ref = reference_attention(in, true, shape.softmax_scale, 1);
    const VerifyReport report = compare_outputs(run.outputs, ref, kFp64RelL2Tolerance);
    INFO(to_string(report));
    REQUIRE(report.pass);
    REQUIRE(run.stats.all_to_alls == 8);
    REQUIRE(run.stats.batches == 8);  // one group of both ranks: every all-to-all is its own batch
    REQUIRE(run.stats.ops_executed == total_ops(s));
  }
}

TEST_CASE("oracles: a hand-written a2a with the wrong chunk order is caught", "[oracles]") {
  // Swapping before(2) for the identity leaves the post-a2a sequence as [0 1 6 7 2 3 4 5]: the causal block then
  // lets queries 2..5 see keys 6, 7 (future). The oracle must report it.
  const AttentionShape shape = make_shape(1, 8, 2, 2, 4, 4, true);
  Schedule s = a2a_schedule(shape);
  for (RankProgram& r : s.ranks) {
    for (Op& op : r.ops) {
      if (auto* a = std::get_if<AllToAllOp>(&op.payload)) {
        if (a->direction == AllToAllOp::Direction::scatter_heads) a->chunk_order = {0, 1, 2, 3};
      }
    }
  }
  const AttentionInputs in = make_attention_inputs(24, shape, "clamped_normal");
  const AttentionOutputs ref = reference_attention(in, true, shape.softmax_scale, 1);
  const VerifyReport report = compare_outputs(execute_schedule(s, in, 1).outputs, ref, kFp64RelL2Tolerance);
  INFO(to_string(report));
  REQUIRE_FALSE(report.pass);
  REQUIRE(report.tensors[0].rel_l2_err > 1e-3);  // out is O(1) wrong, not a rounding effect
}

TEST_CASE("oracles: a NaN reaching an output is a verification failure, not a crash", "[oracles]") {
  // Drop the first row from the output correction: that row of `out` keeps the NaN the AllocOp put there.
  const AttentionShape shape = make_shape(1, 8, 2, 1, 4, 4, true);
  Schedule s = single_rank_schedule(shape, true);
  for (Op& op : s.ranks[0].ops) {
    if (auto* oc = std::get_if<OutCorrectionOp>(&op.payload)) {
      if (!oc->accumulate) oc->dst_rows = RowRange{1, 7};
    }
  }
  // src rows of the init correction are [0, 7) now: they no longer line up with dst rows, which is wrong
  // numerically too; the point here is the surviving NaN.
  const AttentionInputs in = make_attention_inputs(25, shape, "clamped_normal");
  const ExecutionResult run = execute_schedule(s, in, 1);
  REQUIRE(std::isnan(run.outputs.out(0, 0, 0, 0)));
  const AttentionOutputs ref = reference_attention(in, true, shape.softmax_scale, 1);
  const VerifyReport report = compare_outputs(run.outputs, ref, kFp64RelL2Tolerance);
  INFO(to_string(report));
  REQUIRE_FALSE(report.pass);
  REQUIRE_FALSE(report.tensors[0].finite);
  REQUIRE(report.tensors[0].nonfinite > 0);
}

TEST_CASE("oracles: executor reports a schedule that deadlocks under rendezvous semantics", "[oracles]") {
  // The executor walks core's ProgramWalker like the GPU plan: two sends that each wait for the peer's receive
  // are an error naming both waiting ops, not a run through a mailbox.
  const Schedule s = test::exchange_deadlock_schedule();
  test::check_schedule(s);
  const AttentionInputs in = make_attention_inputs(26, s.shape, "uniform");
  try {
    (void)execute_schedule(s, in, 1);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    REQUIRE(e.key() == "schedule");
    const std::string what = e.what();
    REQUIRE(what.find("deadlock") != std::string::npos);
    REQUIRE(what.find("cp_rank 0 op #2 send_recv 'send'") != std::string::npos);
    REQUIRE(what.find("cp_rank 1 op #2 send_recv 'send'") != std::string::npos);
  }
}
