// check_hazards and the ordering contract (schedule.hpp): every builder and fault injector yields hazard-free
// schedules; removing a dep that orders a cross-stream conflict is found and names both ops; read-read pairs and
// same-stream pairs never fail; op_buffer_accesses reads what each payload's docstring says.
#include <string>
#include <utility>
#include <vector>

#include "catch_compat.hpp"
#include "death_test.hpp"
#include "test_util.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/core/schedule_hazards.hpp"

using namespace hcpsim;

namespace {

/// The first hazard of any rank as text ("" when the schedule is hazard-free).
std::string first_hazard(const Schedule& s) {
  for (const RankProgram& r : s.ranks)
    if (const auto h = find_hazard(r)) return hazard_text(r, *h);
  return "";
}

OpIndex op_labelled(const RankProgram& r, const std::string& label) {
  for (size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i].label == label) return static_cast<OpIndex>(i);
  FAIL("no op labelled '" << label << "'");
  return -1;
}

/// A one-rank program: buffer x [1, 8, 1, 4] (an input) and y, with the given ops.
RankProgram tiny_program(std::vector<Op> ops) {
  RankProgram p;
  p.buffers = {BufferDecl{"x", 1, 8, 1, 4, Dtype::fp32}, BufferDecl{"y", 1, 8, 1, 4, Dtype::fp32}};
  p.inputs = {IoBinding{"q", 0, {0, 1, 2, 3, 4, 5, 6, 7}, 0}, IoBinding{"k", 1, {0, 1, 2, 3, 4, 5, 6, 7}, 0}};
  p.ops = std::move(ops);
  return p;
}

Op copy_op(BufferId dst, RowRange dst_rows, BufferId src, RowRange src_rows, Stream st, std::vector<OpIndex> deps,
           const std::string& label) {
  Op op;
  op.payload = CopyOp{dst, src, dst_rows, src_rows, false};
  op.stream = st;
  op.deps = std::move(deps);
  op.label = label;
  return op;
}

}  // namespace

TEST_CASE("hazards: every builder is hazard-free across the builder tests' shapes", "[core][hazards]") {
  // The [A, P] shapes of schedule_builder_test.cpp, causal and not, b = 2, GQA.
  const std::vector<std::pair<int64_t, int64_t>> shapes{{1, 1}, {2, 2}, {1, 4}, {4, 1}, {2, 3},
                                                        {3, 2}, {4, 2}, {2, 4}, {8, 2}, {1, 5}};
  for (auto [A, P] : shapes) {
    for (bool causal : {true, false}) {
      const int64_t S = 2 * A * P * 4;
      const Schedule s = build_schedule(test::comm_type_for(A, P), CpLayout(A, P, S),
                                        test::attention_shape(2, S, 2 * A, A, 16, 8, causal));
      INFO("A=" << A << " P=" << P << " causal=" << causal);
      REQUIRE(first_hazard(s).empty());
      test::check_schedule(s);
    }
  }
  for (int64_t cp : {1, 2, 3, 4, 8}) {
    for (bool causal : {true, false}) {
      const int64_t S = 2 * cp * 5;
      const Schedule s = build_schedule(CpCommType::all_gather, CpLayout(1, cp, S),
                                        test::attention_shape(2, S, 4, 2, 16, 8, causal));
      INFO("all_gather cp=" << cp << " causal=" << causal);
      REQUIRE(first_hazard(s).empty());
    }
  }
}

TEST_CASE("hazards: every fault injector keeps the schedule hazard-free", "[core][hazards]") {
  // No fault removes ordering: each changes numerics (sections, merges, groups, a message), not deps.
  for (auto [A, P] : std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {1, 4}, {4, 1}, {2, 3}}) {
    const int64_t S = 2 * A * P * 4;
    const Schedule base =
        build_schedule(test::comm_type_for(A, P), CpLayout(A, P, S), test::attention_shape(1, S, 2 * A, A, 8, 8, true));
    for (FaultKind k : all_fault_kinds()) {
      if (fault_needs_packing(k)) continue;  // bshd schedules; THD below
      INFO("A=" << A << " P=" << P << " fault " << to_string(k));
      // Refused exactly where the fault has no place: a ring fault without a ring, strided groups with A = 1 or
      // one group (swapped sections also need causal, which these shapes are).
      const bool ring_fault = k == FaultKind::swapped_causal_sections || k == FaultKind::stale_kv_backward ||
                              k == FaultKind::dropped_lse_merge || k == FaultKind::missing_dkv_hop ||
                              k == FaultKind::naive_lse_merge;
      const bool refused = (ring_fault && P < 2) || (k == FaultKind::strided_a2a_groups && (A < 2 || P < 2));
      if (refused) {
        REQUIRE_THROWS_WITH(inject_fault(base, k), Catch::Contains("changes nothing"));
        continue;
      }
      REQUIRE(first_hazard(inject_fault(base, k)).empty());
    }
    // The packed-sequence faults on a packing padded at the tail only (all three apply).
    AttentionShape thd = test::attention_shape(1, 0, 2 * A, A, 8, 8, true);
    thd.packing.seq_lengths = {2 * A * P, 3};
    thd.packing.seq_lengths_padded = pad_sequence_lengths(thd.packing.seq_lengths, 2 * A * P);
    thd.seq_length = thd.packing.total_padded();
    const Schedule packed = build_schedule(test::comm_type_for(A, P), CpLayout(A, P, thd.seq_length), thd);
    for (FaultKind k : all_fault_kinds()) {
      if (!fault_needs_packing(k)) continue;
      INFO("THD A=" << A << " P=" << P << " fault " << to_string(k));
      REQUIRE(first_hazard(inject_fault(packed, k)).empty());
    }
  }
}

TEST_CASE("hazards: removing the dep that orders a cross-stream conflict fails naming both ops", "[core][hazards]") {
  // a2a+p2p [2, 2]: the first ring send (comm) reads kv_ring0.k/.v, which two copies on the compute stream fill
  // ("fwd kv ring buffer 0 (k)" then "(v)"). The send depends on the (v) copy only: stream order carries the (k)
  // copy. Without that dep both copies are unordered with the send; the first conflict found is the (k) copy's.
  Schedule s = build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, 32), test::attention_shape(1, 32, 4, 2, 8, 8, true));
  RankProgram& r = s.ranks[0];
  const OpIndex send = op_labelled(r, "fwd step 0 send/recv kv");
  const OpIndex copy_k = op_labelled(r, "fwd kv ring buffer 0 (k)");
  const OpIndex copy_v = op_labelled(r, "fwd kv ring buffer 0 (v)");
  REQUIRE(r.ops[static_cast<size_t>(send)].deps == std::vector<OpIndex>{copy_v});
  REQUIRE_FALSE(find_hazard(r).has_value());
  REQUIRE(RankOrder(r).ordered(copy_k, send));  // through stream order: copy_k → copy_v on compute

  r.ops[static_cast<size_t>(send)].deps.clear();
  REQUIRE_FALSE(RankOrder(r).ordered(copy_k, send));
  const auto h = find_hazard(r);
  REQUIRE(h.has_value());
  CHECK(h->earlier == copy_k);
  CHECK(h->later == send);
  CHECK(r.buffers[static_cast<size_t>(h->earlier_access.buffer)].name == "kv_ring0.k");
  CHECK(h->earlier_access.writes);
  CHECK_FALSE(h->later_access.writes);
  const std::string text = hazard_text(r, *h);
  CHECK(text == "cp_rank 0: op #" + std::to_string(copy_k) +
                    " copy 'fwd kv ring buffer 0 (k)' (stream compute) writes rows [0, 16) of buffer 'kv_ring0.k' "
                    "and op #" + std::to_string(send) +
                    " send_recv 'fwd step 0 send/recv kv' (stream comm) reads all rows of it, but no chain of deps "
                    "and stream order orders them");
  // check_hazards aborts with the same text, like check_invariants.
  const auto end = test::run_in_child([&] { check_hazards(s); });
  INFO("stderr: " << end.stderr_text);
  REQUIRE(end.aborted);
  REQUIRE(end.stderr_text.find(text) != std::string::npos);
}

TEST_CASE("hazards: read-read pairs never conflict; disjoint rows and empty ranges do not either", "[core][hazards]") {
  // Two reads of x on different streams, no deps: fine. y written twice on different streams at disjoint rows:
  // fine. Overlapping rows: a hazard.
  const RankProgram reads = tiny_program({copy_op(1, {0, 4}, 0, {0, 4}, Stream::compute, {}, "x→y lo"),
                                          copy_op(1, {4, 4}, 0, {2, 4}, Stream::cp, {}, "x→y hi")});
  REQUIRE_FALSE(find_hazard(reads).has_value());
  const RankProgram overlap = tiny_program({copy_op(1, {0, 5}, 0, {0, 5}, Stream::compute, {}, "x→y lo"),
                                            copy_op(1, {4, 4}, 0, {4, 4}, Stream::cp, {}, "x→y hi")});
  const auto h = find_hazard(overlap);
  REQUIRE(h.has_value());
  CHECK(hazard_text(overlap, *h).find("writes rows [0, 5) of buffer 'y'") != std::string::npos);
  CHECK(hazard_text(overlap, *h).find("writes rows [4, 8) of it") != std::string::npos);
  const RankProgram empty = tiny_program({copy_op(1, {0, 0}, 0, {0, 0}, Stream::compute, {}, "nothing"),
                                          copy_op(1, {0, 8}, 0, {0, 8}, Stream::cp, {}, "all")});
  REQUIRE_FALSE(find_hazard(empty).has_value());
  BufferAccess a{0, kAllRows, true, false}, b{0, {3, 1}, true, false};
  CHECK_FALSE(accesses_conflict(a, b));
  b.writes = true;
  CHECK(accesses_conflict(a, b));
  b.buffer = 1;
  CHECK_FALSE(accesses_conflict(a, b));
}

TEST_CASE("hazards: same-stream order and transitive deps count as ordering", "[core][hazards]") {
  // y written on compute, then read on compute (stream order), then read on cp with a dep on the compute reader:
  // the cp read is ordered after the write through the chain.
  const RankProgram chain = tiny_program({copy_op(1, {0, 8}, 0, {0, 8}, Stream::compute, {}, "write y"),
                                          copy_op(0, {0, 8}, 1, {0, 8}, Stream::compute, {}, "y→x"),
                                          copy_op(0, {0, 8}, 1, {0, 8}, Stream::cp, {1}, "y→x again")});
  // The third op writes x, which the second wrote too: ordered by its dep; y: after the write via op 1.
  REQUIRE_FALSE(find_hazard(chain).has_value());
  const RankOrder order(chain);
  CHECK(order.ordered(0, 1));  // stream order
  CHECK(order.ordered(0, 2));  // dep on 1, which follows 0 on its stream
  CHECK_FALSE(order.ordered(1, 0));
  CHECK_FALSE(order.ordered(2, 2));
  // Without the dep the cp op is unordered with both compute ops.
  RankProgram unordered = chain;
  unordered.ops[2].deps.clear();
  const auto h = find_hazard(unordered);
  REQUIRE(h.has_value());
  CHECK(h->earlier == 0);
  CHECK(h->later == 2);
}

TEST_CASE("hazards: alloc and free write the whole buffer; accumulation reads its destination", "[core][hazards]") {
  Op alloc;
  alloc.payload = AllocOp{1};
  const auto a = op_buffer_accesses(alloc);
  REQUIRE(a.size() == 1);
  CHECK(a[0].writes);
  CHECK(a[0].rows.begin == kAllRows.begin);
  CHECK(a[0].rows.count == kAllRows.count);
  Op add;
  add.payload = CopyOp{1, 0, {2, 3}, {0, 3}, true};
  const auto c = op_buffer_accesses(add);
  REQUIRE(c.size() == 2);
  CHECK((c[0].buffer == 0 && c[0].reads && !c[0].writes));
  CHECK((c[1].buffer == 1 && c[1].reads && c[1].writes && c[1].rows.begin == 2 && c[1].rows.count == 3));
  Op gemm;
  gemm.payload = GemmOp{8, 8, 8, false};
  CHECK(op_buffer_accesses(gemm).empty());  // timing only: no buffers
  // A free on cp_stream of a buffer a compute op still reads, without a dep: a hazard.
  Op free_y;
  free_y.payload = FreeOp{1};
  free_y.stream = Stream::cp;
  free_y.label = "free y";
  const RankProgram p = tiny_program({copy_op(0, {0, 8}, 1, {0, 8}, Stream::compute, {}, "y→x"), free_y});
  const auto h = find_hazard(p);
  REQUIRE(h.has_value());
  CHECK(hazard_text(p, *h).find("op #1 free 'free y' (stream cp_stream) writes all rows of it") != std::string::npos);
}
