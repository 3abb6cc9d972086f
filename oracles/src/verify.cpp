#include "hcpsim/oracles/verify.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/inputs.hpp"

namespace hcpsim {

TensorError compare_tensor(const std::string& name, const HostTensor& got, const HostTensor& ref, double tolerance) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  TensorError e;
  e.tensor = name;
  e.shape.assign(ref.shape().begin(), ref.shape().end());
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
  for (int64_t i = 0; i < n; ++i) {  // sequential: the norms are deterministic
    if (r[i] == -kInf) {
      if (x[i] != -kInf) ++e.nonfinite;  // an empty row must stay exactly empty
      continue;
    }
    if (!std::isfinite(r[i]) || !std::isfinite(x[i])) {
      ++e.nonfinite;
      continue;
    }
    const double d = x[i] - r[i];
    diff_sq += d * d;
    ref_sq += r[i] * r[i];
    e.max_abs_err = std::max(e.max_abs_err, std::abs(d));
    ++e.compared;
  }
  e.ref_l2_norm = std::sqrt(ref_sq);
  const double diff_norm = std::sqrt(diff_sq);
  if (e.ref_l2_norm > 0) {
    e.rel_l2_err = diff_norm / e.ref_l2_norm;
  } else {
    e.rel_l2_err = diff_norm == 0 ? 0.0 : kInf;
  }
  e.finite = e.nonfinite == 0;
  e.pass = e.finite && e.ref_l2_norm > 0 && e.rel_l2_err <= tolerance;
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
  for (const TensorError& e : report.tensors) report.pass = report.pass && e.pass;
  return report;
}

VerifyReport verify_schedule(const Schedule& schedule, uint64_t seed, const std::string& input_distribution,
                             int threads) {
  const AttentionInputs inputs = make_attention_inputs(seed, schedule.shape, input_distribution);
  const AttentionOutputs ref =
      reference_attention(inputs, schedule.shape.causal, effective_softmax_scale(schedule.shape), threads);
  const ExecutionResult run = execute_schedule(schedule, inputs, threads);
  VerifyReport report = compare_outputs(run.outputs, ref, kFp64RelL2Tolerance);
  report.seed = seed;
  report.input_distribution = input_distribution;
  report.cp_comm_type = schedule.cp_comm_type;
  report.a2a_size = schedule.a2a_size;
  report.p2p_size = schedule.p2p_size;
  report.shape = schedule.shape;
  report.stats = run.stats;
  return report;
}

std::string to_string(const VerifyReport& report) {
  std::string text = fmt::format("verify {} [A={}, P={}] seed {} inputs {}\n", to_string(report.cp_comm_type),
                                 report.a2a_size, report.p2p_size, report.seed, report.input_distribution);
  for (const TensorError& e : report.tensors) {
    text += fmt::format("  {:<12} rel_l2 {:.17g}  max_abs {:.17g}  |ref| {:.17g}  tol {:.17g}  nonfinite {}  {}\n",
                        e.tensor, e.rel_l2_err, e.max_abs_err, e.ref_l2_norm, e.tolerance, e.nonfinite,
                        e.pass ? "PASS" : "FAIL");
  }
  text += report.pass ? "result: PASS\n" : "result: FAIL\n";
  return text;
}

}  // namespace hcpsim
