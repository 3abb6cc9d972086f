#include "hcpsim/oracles/verify.hpp"

#include <cmath>
#include <algorithm>
#include <utility>
#include <limits>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/precision.hpp"

namespace hcpsim {
namespace {

/// The relative L2 error ‖x − ref‖ / ‖ref‖ from the sums over the `compared` entries where both are finite:
/// diff_sq = Σ (x − ref)², ref_sq = Σ ref². An exactly zero reference (dq and dk of packed sequences of one token:
/// softmax over one key has no gradient) has no relative scale, so the error is then the RMS absolute error against
/// the oracle's unit-scale inputs (docs/algorithm.md §10.1): roundoff (1e-16) passes, a wrong schedule's O(1)
/// values do not. Nothing compared: 0 when the difference is 0, else +inf.
double relative_l2_error(double diff_sq, double ref_sq, int64_t compared) {
  const double diff_norm = std::sqrt(diff_sq);
  if (ref_sq > 0) return diff_norm / std::sqrt(ref_sq);
  if (compared > 0) return diff_norm / std::sqrt(static_cast<double>(compared));
  return diff_norm == 0 ? 0.0 : std::numeric_limits<double>::infinity();
}

}  // namespace

TensorError compare_tensor(const std::string& name, const HostTensor& got, const HostTensor& ref, double tolerance) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  TensorError e;
  e.tensor = name;
  e.shape.assign(ref.shape().begin(), ref.shape().end());
  // softmax_lse as TE returns it and a dump stores it, [b, h, s] (held here as [b, s, h, 1]).
  if (name == "softmax_lse" && e.shape.size() == 4) e.shape = {e.shape[0], e.shape[2], e.shape[1]};
  e.tolerance = tolerance;
  if (!got.same_shape(ref)) {
    e.max_abs_err = kInf;
    e.rel_l2_err = kInf;
    e.nonfinite = ref.elements();
    return e;  // finite = pass = false
  }
  double diff_sq = 0;
  double ref_sq = 0;
  const double* x = got.data();
  const double* r = ref.data();
  const int64_t n = ref.elements();
  int64_t worst = -1;
  bool worst_nonfinite = false;
  for (int64_t i = 0; i < n; ++i) {  // sequential: the norms are deterministic
    if (r[i] == -kInf) {
      if (x[i] != -kInf) {  // an empty row must stay exactly empty
        ++e.nonfinite;
        if (!worst_nonfinite) worst = i;
        worst_nonfinite = true;
      }
      continue;
    }
    if (!std::isfinite(r[i]) || !std::isfinite(x[i])) {
      ++e.nonfinite;
      if (!worst_nonfinite) worst = i;
      worst_nonfinite = true;
      continue;
    }
    const double d = x[i] - r[i];
    diff_sq += d * d;
    ref_sq += r[i] * r[i];
    if (std::abs(d) > e.max_abs_err || worst < 0) {
      e.max_abs_err = std::max(e.max_abs_err, std::abs(d));
      if (!worst_nonfinite) worst = i;
    }
    ++e.compared;
  }
  // max relative error with a floor of 1e-3·rms(ref) (second pass: the floor needs the norm)
  const double floor = e.compared > 0 ? 1e-3 * std::sqrt(ref_sq / static_cast<double>(e.compared)) : 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(r[i]) || !std::isfinite(x[i])) continue;
    const double denom = std::max(std::abs(r[i]), floor);
    if (denom > 0) e.max_rel_err = std::max(e.max_rel_err, std::abs(x[i] - r[i]) / denom);
  }
  // An exactly zero reference (dq and dk of one-token packed sequences) has no relative scale: as rel_l2_err does,
  // report the absolute error (the inputs are unit-scale), never 0 next to a non-zero max_abs_err.
  if (ref_sq == 0) e.max_rel_err = e.max_abs_err;
  if (worst >= 0) {
    const auto& dims = ref.shape();
    int64_t rest = worst;
    e.worst_index.assign(4, 0);
    for (int k = 3; k >= 0; --k) {
      e.worst_index[static_cast<size_t>(k)] = rest % dims[static_cast<size_t>(k)];
      rest /= dims[static_cast<size_t>(k)];
    }
    e.worst_value = x[worst];
    e.worst_reference = r[worst];
  }
  e.ref_l2_norm = std::sqrt(ref_sq);
  e.rel_l2_err = relative_l2_error(diff_sq, ref_sq, e.compared);
  e.finite = e.nonfinite == 0;
  if (!e.finite) {  // a norm over a non-finite difference is not a number (shown as nan, never as 0)
    e.max_abs_err = std::numeric_limits<double>::quiet_NaN();
    e.max_rel_err = e.max_abs_err;
    e.rel_l2_err = e.max_abs_err;
  }
  e.pass = e.finite && e.compared > 0 && e.rel_l2_err <= tolerance;
  return e;
}

VerifyReport compare_outputs(const AttentionOutputs& got, const AttentionOutputs& ref, double tolerance) {
  VerifyReport report;
  report.tensors.push_back(compare_tensor("out", got.out, ref.out, tolerance));
  report.tensors.push_back(compare_tensor("softmax_lse", got.softmax_lse, ref.softmax_lse, tolerance));
  report.tensors.push_back(compare_tensor("dq", got.dq, ref.dq, tolerance));
  report.tensors.push_back(compare_tensor("dk", got.dk, ref.dk, tolerance));
  report.tensors.push_back(compare_tensor("dv", got.dv, ref.dv, tolerance));
  report.pass = true;
  bool checks_something = false;  // no vacuous pass: some tensor's reference is not exactly zero
  for (const TensorError& e : report.tensors) {
    report.pass = report.pass && e.pass;
    checks_something = checks_something || e.ref_l2_norm > 0;
  }
  report.pass = report.pass && checks_something;
  report.verdict = report.pass ? VerifyVerdict::pass : VerifyVerdict::fail;
  return report;
}

std::string to_string(VerifyVerdict v) {
  switch (v) {
    case VerifyVerdict::pass: return "pass";
    case VerifyVerdict::precision_limited: return "precision_limited";
    case VerifyVerdict::fail: return "fail";
  }
  HCPSIM_ASSERT(false, "unknown VerifyVerdict");
  return {};
}

bool lse_error_dominates(Dtype dtype, double logit_range) {
  return dtype != Dtype::fp64 && logit_range > kFp32ExpOverflowLogit &&
         unit_roundoff(Dtype::fp32) * logit_range >= unit_roundoff(dtype);
}

double precision_baseline_factor(Dtype dtype, double logit_range, int64_t p2p_size) {
  if (!lse_error_dominates(dtype, logit_range)) return kBaselineFactor;
  return kLsePrecisionFactor * (1.0 + std::log2(static_cast<double>(std::max<int64_t>(p2p_size, 1))));
}

void classify_precision(VerifyReport& report, double logit_range, double fp64_schedule_rel_l2) {
  report.logit_range = logit_range;
  report.fp64_schedule_rel_l2 = fp64_schedule_rel_l2;
  const double factor = precision_baseline_factor(report.dtype, logit_range, report.p2p_size);
  bool pass = false;
  for (const TensorError& e : report.tensors) pass = pass || e.ref_l2_norm > 0;  // no vacuous pass
  bool explained = report.dtype != Dtype::fp64 && fp64_schedule_rel_l2 >= 0 &&
                   fp64_schedule_rel_l2 <= kFp64RelL2Tolerance;
  for (TensorError& e : report.tensors) {
    e.precision_bound =
        report.dtype == Dtype::fp64 ? 0.0 : factor * e.baseline_rel_l2_err + e.rounding_rel_l2_err;
    pass = pass && e.pass;
    if (!e.pass) explained = explained && e.finite && e.compared > 0 && e.rel_l2_err <= e.precision_bound;
  }
  report.pass = pass;
  report.verdict = pass ? VerifyVerdict::pass : (explained ? VerifyVerdict::precision_limited : VerifyVerdict::fail);
}

double emulated_tolerance(Dtype dtype, double baseline_rel_l2, double rounding_rel_l2, bool gqa) {
  if (dtype == Dtype::fp64) return kFp64RelL2Tolerance;
  double tol = kBaselineFactor * baseline_rel_l2 + rounding_rel_l2;
  if (dtype == Dtype::bf16) tol = std::min(tol, gqa ? kTeBf16GqaTolerance : kTeBf16Tolerance);
  if (dtype == Dtype::fp16) tol = std::min(tol, kTeFp16Tolerance);
  return tol;
}

namespace {

/// Relative L2 error of x vs ref over entries where both are finite, as compare_tensor measures it
/// (relative_l2_error): the RMS absolute error when ref is exactly zero there, 0 when no entry is finite.
double rel_l2(const HostTensor& x, const HostTensor& ref) {
  double d2 = 0, r2 = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < ref.elements(); ++i) {
    const double a = x.data()[i], b = ref.data()[i];
    if (!std::isfinite(a) || !std::isfinite(b)) continue;
    d2 += (a - b) * (a - b);
    r2 += b * b;
    ++n;
  }
  return relative_l2_error(d2, r2, n);
}

const HostTensor& tensor_of(const AttentionOutputs& o, size_t i) {
  const HostTensor* all[] = {&o.out, &o.softmax_lse, &o.dq, &o.dk, &o.dv};
  return *all[i];
}

/// max |L| over the finite entries of a softmax_lse tensor (natural-log units).
double max_abs_finite(const HostTensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.elements(); ++i)
    if (std::isfinite(t.data()[i])) m = std::max(m, std::abs(t.data()[i]));
  return m;
}

/// The largest rel_l2_err of `schedule` executed in fp64 by the CPU executor on `inputs` against `ref` (+inf when
/// a tensor is non-finite): the evidence that the schedule itself is exact.
double fp64_schedule_error(const Schedule& schedule, const AttentionInputs& inputs, const AttentionOutputs& ref,
                           int threads) {
  const ExecutionResult exact = execute_schedule(schedule, inputs, ExecutionOptions{threads, Dtype::fp64});
  const VerifyReport r = compare_outputs(exact.outputs, ref, kFp64RelL2Tolerance);
  double worst = 0;
  for (const TensorError& e : r.tensors)
    worst = std::max(worst, e.finite ? e.rel_l2_err : std::numeric_limits<double>::infinity());
  return worst;
}

}  // namespace

void locate_worst(VerifyReport& report, const Schedule* schedule) {
  report.worst_tensor = -1;
  double worst_ratio = -1;
  bool worst_failing = false;
  for (size_t t = 0; t < report.tensors.size(); ++t) {
    TensorError& e = report.tensors[t];
    if (schedule != nullptr && e.worst_index.size() == 4) {
      for (const RankProgram& prog : schedule->ranks) {
        for (const IoBinding& bind : prog.outputs) {
          if (bind.tensor != e.tensor) continue;
          const int64_t heads = prog.buffers[static_cast<size_t>(bind.buffer)].heads;
          const int64_t h = e.worst_index[2];
          if (h < bind.head_begin || h >= bind.head_begin + heads) continue;
          if (std::find(bind.tokens.begin(), bind.tokens.end(), e.worst_index[1]) != bind.tokens.end())
            e.worst_cp_rank = prog.cp_rank;
        }
      }
    }
    const double ratio = !e.finite ? std::numeric_limits<double>::infinity()
                                   : (e.tolerance > 0 ? e.rel_l2_err / e.tolerance : e.rel_l2_err);
    const bool failing = !e.pass;
    if (report.worst_tensor < 0 || (failing && !worst_failing) || (failing == worst_failing && ratio > worst_ratio)) {
      report.worst_tensor = static_cast<int64_t>(t);
      worst_ratio = ratio;
      worst_failing = failing;
    }
  }
}

VerifyRun verify_schedule_run(const Schedule& schedule, const VerifyOptions& options) {
  return verify_schedule_run(
      schedule, options, [&options](const Schedule& sched, const AttentionInputs& inputs) {
        return execute_schedule(sched, inputs, ExecutionOptions{options.threads, options.dtype});
      });
}

VerifyRun verify_schedule_run(const Schedule& schedule, const VerifyOptions& options, const ScheduleRunner& runner,
                              const GivenReference& given) {
  VerifyRun run;
  if (given.inputs != nullptr) {
    run.inputs = *given.inputs;
  } else {
    run.inputs = make_attention_inputs(options.seed, schedule.shape, options.input_distribution, options.q_heads,
                                       options.kv_heads, options.full_heads_q, options.full_heads_kv, options.threads);
  }
  for (HostTensor* t : {&run.inputs.q, &run.inputs.k, &run.inputs.v, &run.inputs.dout}) round_tensor(*t, options.dtype);
  const double scale = effective_softmax_scale(schedule.shape);
  if (given.reference != nullptr) {
    run.reference = *given.reference;
  } else {
    HeadProgress heads;
    if (options.progress)
      heads = [&options](size_t done, size_t total) {
        options.progress(kVerifyStageUnits * done / std::max<size_t>(total, 1), kVerifyStages * kVerifyStageUnits);
      };
    run.reference = reference_attention(run.inputs, schedule.shape, scale, options.threads, Dtype::fp64, heads);
  }
  if (options.progress) options.progress(kVerifyStageUnits, kVerifyStages * kVerifyStageUnits);
  ExecutionResult exec = runner(schedule, run.inputs);
  if (options.progress) options.progress(2 * kVerifyStageUnits, kVerifyStages * kVerifyStageUnits);
  run.hcp = std::move(exec.outputs);  // moved, not copied: the baseline below runs beside one copy of them
  AttentionOutputs baseline;
  if (options.dtype != Dtype::fp64)
    baseline = reference_attention(run.inputs, schedule.shape, scale, options.threads, options.dtype);
  const char* names[] = {"out", "softmax_lse", "dq", "dk", "dv"};
  const bool gqa = schedule.shape.heads_q != schedule.shape.heads_kv;
  VerifyReport& report = run.report;
  for (size_t i = 0; i < 5; ++i) {
    const HostTensor& ref = tensor_of(run.reference, i);
    double base = 0, rounding = 0;
    if (options.dtype != Dtype::fp64) {
      base = rel_l2(tensor_of(baseline, i), ref);
      HostTensor rounded = ref;
      round_tensor(rounded, i == 1 ? Dtype::fp32 : options.dtype);
      rounding = rel_l2(rounded, ref);
    }
    TensorError e = compare_tensor(names[i], tensor_of(run.hcp, i), ref,
                                   emulated_tolerance(options.dtype, base, rounding, gqa));
    e.baseline_rel_l2_err = base;
    e.rounding_rel_l2_err = rounding;
    report.tensors.push_back(std::move(e));
  }
  // The fp64 rerun is the evidence for precision_limited: only needed when a finite tensor fails.
  const bool needs_evidence =
      options.dtype != Dtype::fp64 && std::any_of(report.tensors.begin(), report.tensors.end(), [](const auto& e) {
        return !e.pass;
      }) && std::all_of(report.tensors.begin(), report.tensors.end(), [](const auto& e) { return e.finite; });
  report.dtype = options.dtype;
  report.seed = options.seed;
  report.input_distribution = options.input_distribution;
  report.cp_comm_type = schedule.cp_comm_type;
  report.a2a_size = schedule.a2a_size;
  report.p2p_size = schedule.p2p_size;
  report.shape = schedule.shape;
  report.stats = exec.stats;
  classify_precision(report, max_abs_finite(run.reference.softmax_lse),
                     needs_evidence ? fp64_schedule_error(schedule, run.inputs, run.reference, options.threads) : -1);
  locate_worst(report, &schedule);
  if (options.progress) options.progress(kVerifyStages * kVerifyStageUnits, kVerifyStages * kVerifyStageUnits);
  return run;
}

VerifyReport verify_schedule(const Schedule& schedule, uint64_t seed, const std::string& input_distribution,
                             int threads) {
  const AttentionInputs inputs = make_attention_inputs(seed, schedule.shape, input_distribution);
  const AttentionOutputs ref =
      reference_attention(inputs, schedule.shape, effective_softmax_scale(schedule.shape), threads);
  const ExecutionResult run = execute_schedule(schedule, inputs, threads);
  VerifyReport report = compare_outputs(run.outputs, ref, kFp64RelL2Tolerance);
  report.seed = seed;
  report.input_distribution = input_distribution;
  report.cp_comm_type = schedule.cp_comm_type;
  report.a2a_size = schedule.a2a_size;
  report.p2p_size = schedule.p2p_size;
  report.shape = schedule.shape;
  report.stats = run.stats;
  classify_precision(report, max_abs_finite(ref.softmax_lse), -1);
  locate_worst(report, &schedule);
  return report;
}

std::string to_string(const VerifyReport& report) {
  std::string text = fmt::format("verify {} [A={}, P={}] {} seed {} inputs {}\n", to_string(report.cp_comm_type),
                                 report.a2a_size, report.p2p_size, to_string(report.dtype), report.seed,
                                 report.input_distribution);
  for (const TensorError& e : report.tensors) {
    text += fmt::format("  {:<12} rel_l2 {:.17g}  max_abs {:.17g}  max_rel {:.17g}  |ref| {:.17g}  tol {:.17g}  "
                        "baseline {:.17g}  nonfinite {}  {}\n",
                        e.tensor, e.rel_l2_err, e.max_abs_err, e.max_rel_err, e.ref_l2_norm, e.tolerance,
                        e.baseline_rel_l2_err, e.nonfinite, e.pass ? "PASS" : "FAIL");
  }
  text += fmt::format("result: {}{}\n", report.verdict == VerifyVerdict::precision_limited ? "PRECISION_LIMITED"
                                         : report.pass                                   ? "PASS"
                                                                                         : "FAIL",
                      report.verdict == VerifyVerdict::precision_limited
                          ? fmt::format(" (logit range {:.17g}, fp64 schedule rel_l2 {:.17g})", report.logit_range,
                                        report.fp64_schedule_rel_l2)
                          : std::string());
  return text;
}

}  // namespace hcpsim
