// The verdicts of verify: pass, precision_limited (the inputs exceed the run's precision, the schedule is exact)
// and fail (CP-attributable), the naive-merge fault failing by overflow at every precision, and non-finite metrics.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/oracles/verify.hpp"

using namespace hcpsim;

namespace {

/// Causal GQA problem of `seq` tokens: 4 q heads, 2 KV heads, dk = dv = 16, scale 16^-1/2.
AttentionShape verdict_shape(int64_t seq) { return test::attention_shape(1, seq, 4, 2, 16, 16, true); }

VerifyReport verdict_of(const Schedule& s, Dtype dtype, const std::string& dist) {
  VerifyOptions o;
  o.seed = 1234;
  o.input_distribution = dist;
  o.dtype = dtype;
  return verify_schedule_run(s, o).report;
}

Schedule schedule_for(int64_t A, int64_t P, int64_t seq) {
  return build_schedule(test::comm_type_for(A, P), CpLayout(A, P, seq), verdict_shape(seq));
}

/// One finite tensor error with the given error, tolerance, baseline and rounding.
TensorError tensor_error(double err, double tol, double base, double rounding = 0) {
  TensorError e;
  e.tensor = "dq";
  e.rel_l2_err = err;
  e.tolerance = tol;
  e.baseline_rel_l2_err = base;
  e.rounding_rel_l2_err = rounding;
  e.ref_l2_norm = 1;
  e.compared = 1;
  e.finite = true;
  e.pass = err <= tol;
  return e;
}

}  // namespace

TEST_CASE("oracles: adversarial inputs on the correct schedule are precision_limited in fp32 and bf16, not FAIL",
          "[oracles][verdict]") {
  // The shapes: [1,2] (p2p ring of 2) at S = 256, and [2,2] at S = 128; logits near ±110.
  using Case = std::tuple<int64_t, int64_t, int64_t>;
  for (auto [A, P, S] : {Case{1, 2, 256}, Case{2, 2, 128}, Case{1, 4, 256}}) {
    for (Dtype dt : {Dtype::fp32, Dtype::bf16}) {
      const VerifyReport r = verdict_of(schedule_for(A, P, S), dt, "adversarial");
      INFO("[" << A << ", " << P << "] S " << S << " " << to_string(dt) << "\n" << to_string(r));
      REQUIRE(r.verdict != VerifyVerdict::fail);
      REQUIRE(r.logit_range > kFp32ExpOverflowLogit);
      REQUIRE(r.logit_range < 130.0);
      for (const TensorError& e : r.tensors) {
        REQUIRE(e.finite);
        REQUIRE(e.rel_l2_err <= e.precision_bound);
      }
      if (r.verdict == VerifyVerdict::precision_limited) {
        REQUIRE_FALSE(r.pass);
        REQUIRE(r.fp64_schedule_rel_l2 >= 0);
        REQUIRE(r.fp64_schedule_rel_l2 <= kFp64RelL2Tolerance);
      }
    }
  }
  // fp32 [1,2] at S 256 is the reproducer: dq exceeds 2x baseline, so it needs the precision verdict.
  const VerifyReport r = verdict_of(schedule_for(1, 2, 256), Dtype::fp32, "adversarial");
  INFO(to_string(r));
  REQUIRE(r.verdict == VerifyVerdict::precision_limited);
  REQUIRE_FALSE(r.tensors[2].pass);
  REQUIRE(r.tensors[2].rel_l2_err > r.tensors[2].tolerance);
}

TEST_CASE("oracles: benign inputs on the correct schedule still pass in fp32 and bf16", "[oracles][verdict]") {
  for (Dtype dt : {Dtype::fp32, Dtype::bf16}) {
    const VerifyReport r = verdict_of(schedule_for(2, 2, 128), dt, "clamped_normal");
    INFO(to_string(r));
    REQUIRE(r.verdict == VerifyVerdict::pass);
    REQUIRE(r.pass);
    REQUIRE(r.fp64_schedule_rel_l2 == -1);  // no evidence needed: the fp64 rerun is skipped
    REQUIRE(r.logit_range < kFp32ExpOverflowLogit);
  }
}

TEST_CASE("oracles: every must-fail fault fails (never precision_limited) in fp32 and bf16", "[oracles][verdict]") {
  for (auto [A, P] : {std::pair<int64_t, int64_t>{2, 2}, std::pair<int64_t, int64_t>{2, 3}}) {
    const int64_t S = 2 * A * P * 4;
    const Schedule good = schedule_for(A, P, S);
    for (FaultKind k : all_fault_kinds()) {
      if (!fault_must_fail(k) || fault_needs_packing(k)) continue;  // packed-sequence faults: thd_verify_test
      const std::string dist = k == FaultKind::naive_lse_merge ? "adversarial" : "clamped_normal";
      for (Dtype dt : {Dtype::fp32, Dtype::bf16}) {
        const VerifyReport r = verdict_of(inject_fault(good, k), dt, dist);
        INFO("[" << A << ", " << P << "] " << to_string(k) << " " << to_string(dt) << "\n" << to_string(r));
        REQUIRE(r.verdict == VerifyVerdict::fail);
      }
    }
  }
}

TEST_CASE("oracles: naive_lse_merge fails by overflow at every precision and passes benign inputs in fp64",
          "[oracles][verdict][inject]") {
  const Schedule bad = inject_fault(schedule_for(2, 2, 128), FaultKind::naive_lse_merge);
  for (Dtype dt : {Dtype::fp64, Dtype::fp32, Dtype::bf16, Dtype::fp16}) {
    const VerifyReport r = verdict_of(bad, dt, "adversarial");
    INFO(to_string(dt) << "\n" << to_string(r));
    REQUIRE(r.verdict == VerifyVerdict::fail);
    // overflow, not rounding: the merged softmax_lse (and what uses it) is non-finite
    REQUIRE_FALSE(r.tensors[1].finite);
    REQUIRE(r.tensors[1].nonfinite > 0);
  }
  // fp64 on benign inputs: the naive formula is exact enough in fp64 (before, it merged in fp32 and failed
  // through rounding alone)
  const VerifyReport benign = verdict_of(bad, Dtype::fp64, "clamped_normal");
  INFO(to_string(benign));
  REQUIRE(benign.verdict == VerifyVerdict::pass);
  REQUIRE(benign.tensors[1].rel_l2_err < 1e-15);
}

TEST_CASE("oracles: classify_precision applies the stated rule", "[oracles][verdict]") {
  VerifyReport r;
  r.dtype = Dtype::fp32;
  r.p2p_size = 2;  // a ring of 2: m = 8 (1 + log2 2) = 16 when the fp32 LSE error dominates
  r.tensors = {tensor_error(6.1e-5, 3.0e-5, 1.5e-5)};
  // benign logits: bound = 2 x baseline = the tolerance, so over it is a FAIL even with an exact fp64 schedule
  classify_precision(r, 12.0, 1e-15);
  REQUIRE(r.verdict == VerifyVerdict::fail);
  REQUIRE(r.tensors[0].precision_bound == Approx(3.0e-5));
  // logits beyond fp32 exp's range: bound = 8 (1 + log2 P) = 16 x baseline
  classify_precision(r, 110.0, 1e-15);
  REQUIRE(r.verdict == VerifyVerdict::precision_limited);
  REQUIRE(r.tensors[0].precision_bound == Approx(16 * 1.5e-5));
  // the same error with a schedule that is wrong in fp64 is CP-attributable
  classify_precision(r, 110.0, 1e-3);
  REQUIRE(r.verdict == VerifyVerdict::fail);
  classify_precision(r, 110.0, -1);  // evidence missing
  REQUIRE(r.verdict == VerifyVerdict::fail);
  // above 16 x baseline: fail; a ring of 8 allows 32 x
  r.tensors = {tensor_error(3e-4, 3.0e-5, 1.5e-5)};
  classify_precision(r, 110.0, 1e-15);
  REQUIRE(r.verdict == VerifyVerdict::fail);
  r.p2p_size = 8;
  classify_precision(r, 110.0, 1e-15);
  REQUIRE(r.verdict == VerifyVerdict::precision_limited);
  REQUIRE(r.tensors[0].precision_bound == Approx(32 * 1.5e-5));
  // bf16 at the same logits: the format's rounding dominates, m = 2
  r.dtype = Dtype::bf16;
  classify_precision(r, 110.0, 1e-15);
  REQUIRE(r.tensors[0].precision_bound == Approx(2 * 1.5e-5));
  REQUIRE(r.verdict == VerifyVerdict::fail);
  r.dtype = Dtype::fp32;
  r.p2p_size = 2;
  r.tensors = {tensor_error(3e-4, 3.0e-5, 1.5e-5)};
  classify_precision(r, 110.0, 1e-15);
  REQUIRE(r.verdict == VerifyVerdict::fail);
  // the cap binds (bf16 baseline above TE's 2.5e-2): within 2 x baseline + rounding is precision_limited
  r.dtype = Dtype::bf16;
  r.tensors = {tensor_error(4e-2, 2.5e-2, 3e-2, 1e-3)};
  classify_precision(r, 12.0, 1e-15);
  REQUIRE(r.verdict == VerifyVerdict::precision_limited);
  REQUIRE(r.tensors[0].precision_bound == Approx(6.1e-2));
  // a non-finite tensor is never precision_limited
  r.tensors[0].finite = false;
  r.tensors[0].nonfinite = 3;
  classify_precision(r, 12.0, 1e-15);
  REQUIRE(r.verdict == VerifyVerdict::fail);
  // fp64 has no precision excuse
  r.dtype = Dtype::fp64;
  r.tensors = {tensor_error(1e-9, 1e-10, 0)};
  classify_precision(r, 110.0, 1e-15);
  REQUIRE(r.verdict == VerifyVerdict::fail);
  REQUIRE(r.tensors[0].precision_bound == 0);
  // every tensor passing: pass
  r.tensors = {tensor_error(1e-11, 1e-10, 0)};
  classify_precision(r, 110.0, -1);
  REQUIRE(r.verdict == VerifyVerdict::pass);
  REQUIRE(to_string(VerifyVerdict::precision_limited) == "precision_limited");
}

TEST_CASE("oracles: a tensor with non-finite entries has NaN metrics and counts them", "[oracles][verdict]") {
  HostTensor ref(1, 4, 1, 2);
  HostTensor got(1, 4, 1, 2);
  for (int64_t i = 0; i < ref.elements(); ++i) ref.data()[i] = got.data()[i] = 1.0 + static_cast<double>(i);
  got.data()[3] = std::numeric_limits<double>::quiet_NaN();
  got.data()[5] = std::numeric_limits<double>::infinity();
  const TensorError e = compare_tensor("dq", got, ref, 1e-10);
  REQUIRE(e.nonfinite == 2);
  REQUIRE(e.compared == 6);
  REQUIRE_FALSE(e.finite);
  REQUIRE_FALSE(e.pass);
  // before: rel_l2_err 0 (the finite entries match exactly), which read as a match
  REQUIRE(std::isnan(e.rel_l2_err));
  REQUIRE(std::isnan(e.max_abs_err));
  REQUIRE(std::isnan(e.max_rel_err));
  REQUIRE(e.worst_index == std::vector<int64_t>{0, 1, 0, 1});  // the first non-finite entry
  // all NaN: every metric NaN, every entry counted
  HostTensor nan_got(1, 4, 1, 2);
  for (int64_t i = 0; i < nan_got.elements(); ++i) nan_got.data()[i] = std::numeric_limits<double>::quiet_NaN();
  const TensorError all = compare_tensor("dq", nan_got, ref, 1e-10);
  REQUIRE(all.nonfinite == 8);
  REQUIRE(std::isnan(all.rel_l2_err));
}
