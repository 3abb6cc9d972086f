#include "verify_report.hpp"

#include <cmath>

#include <fmt/core.h>

#include "../app_common.hpp"

namespace hcpsim::app {

std::string element_text(const TensorError& e) {
  if (e.worst_index.size() != 4) return "-";
  return fmt::format("[b={}, s={}, h={}, w={}]", e.worst_index[0], e.worst_index[1], e.worst_index[2],
                     e.worst_index[3]);
}

namespace {

/// A metric cell: "nan" when the tensor has non-finite entries (the metric is not a number), else {:.3e}.
std::string metric_cell(const TensorError& e, double value) {
  return e.finite ? fmt::format("{:.3e}", value) : std::string("nan");
}

std::string result_cell(const TensorError& e) {
  if (e.pass) return "pass";
  if (!e.finite) {
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    // Entries where got or the reference is NaN / inf and the two differ: got finite against an empty row's -inf
    // counts as well as a NaN got, so "non-finite" alone misdescribed the first.
    return fmt::format("FAIL ({} non-finite mismatches of {})", e.nonfinite, n);
  }
  return e.rel_l2_err <= e.precision_bound ? "over tolerance (precision)" : "FAIL";
}

}  // namespace

void print_table(const VerifyReport& v) {
  fmt::print("  {:<12} {:<22} {:>11} {:>11} {:>11} {:>11} {:>10}  {}\n", "tensor", "shape", "max_abs_err",
             "max_rel_err", "rel_l2_err", "baseline", "tolerance", "result");
  for (const auto& e : v.tensors) {
    fmt::print("  {:<12} {:<22} {:>11} {:>11} {:>11} {:>11.3e} {:>10.2e}  {}\n", e.tensor, join(e.shape),
               metric_cell(e, e.max_abs_err), metric_cell(e, e.max_rel_err), metric_cell(e, e.rel_l2_err),
               e.baseline_rel_l2_err, e.tolerance, result_cell(e));
  }
}

void print_result(const VerifyReport& v, Dtype dtype) {
  if (v.verdict == VerifyVerdict::pass) {
    fmt::print("  result: PASS (HCP equals full attention within the {} error model)\n", to_string(dtype));
  } else if (v.verdict == VerifyVerdict::precision_limited) {
    fmt::print("  result: PRECISION_LIMITED: the schedule is exact (fp64 run of the same schedule: rel_l2_err "
               "{:.3e} <= {:.0e}); these inputs exceed {} (logit range max|softmax_lse| {:.4g}{}):\n",
               v.fp64_schedule_rel_l2, kFp64RelL2Tolerance, to_string(dtype), v.logit_range,
               lse_error_dominates(v.dtype, v.logit_range)
                   ? fmt::format(" > ln(FLT_MAX) {:.2f}: the fp32 softmax_lse error dominates, bound {:g} x "
                                 "baseline = {:g} x (1 + log2 P)",
                                 kFp32ExpOverflowLogit, precision_baseline_factor(v.dtype, v.logit_range, v.p2p_size),
                                 kLsePrecisionFactor)
                   : fmt::format("; the non-CP baseline exceeds the capped tolerance, bound {:g} x baseline",
                                 kBaselineFactor));
    for (const TensorError& e : v.tensors) {
      if (e.pass) continue;
      fmt::print("    {}: rel_l2_err {:.3e} = {:.2f} x the {} non-CP baseline {:.3e} (tolerance {:.2e}, precision "
                 "bound {:.2e})\n",
                 e.tensor, e.rel_l2_err, e.baseline_rel_l2_err > 0 ? e.rel_l2_err / e.baseline_rel_l2_err : 0.0,
                 to_string(dtype), e.baseline_rel_l2_err, e.tolerance, e.precision_bound);
    }
  } else {
    const TensorError& w = v.tensors[static_cast<size_t>(v.worst_tensor)];
    auto num = [](double x) { return std::isnan(x) ? std::string("nan") : fmt::format("{:.17g}", x); };
    fmt::print("  result: FAIL: worst tensor {} (rel_l2_err {} vs tolerance {:.2e}{}), cp_rank {}, element {}: "
               "got {}, reference {}\n",
               w.tensor, metric_cell(w, w.rel_l2_err), w.tolerance,
               w.finite ? "" : fmt::format(", {} non-finite mismatches", w.nonfinite), w.worst_cp_rank,
               element_text(w), num(w.worst_value), num(w.worst_reference));
  }
}

nlohmann::json report_json(const VerifyReport& v, const std::string& injected) {
  nlohmann::json j;
  j["cp_comm_type"] = to_string(v.cp_comm_type);
  j["a2a_size"] = v.a2a_size;
  j["p2p_size"] = v.p2p_size;
  j["dtype"] = to_string(v.dtype);
  j["seed"] = v.seed;
  j["input_distribution"] = v.input_distribution;
  j["inject"] = injected.empty() ? nlohmann::json(nullptr) : nlohmann::json(injected);
  j["heads_q"] = v.shape.heads_q;
  j["heads_kv"] = v.shape.heads_kv;
  j["pass"] = v.pass;
  j["result"] = to_string(v.verdict);
  if (v.verdict == VerifyVerdict::precision_limited) {
    j["precision"] = {{"logit_range", v.logit_range},
                      {"fp64_schedule_rel_l2_err", v.fp64_schedule_rel_l2},
                      {"fp64_tolerance", kFp64RelL2Tolerance},
                      {"lse_error_dominates", lse_error_dominates(v.dtype, v.logit_range)},
                      {"baseline_factor", precision_baseline_factor(v.dtype, v.logit_range, v.p2p_size)}};
  }
  nlohmann::json ts = nlohmann::json::array();
  for (const auto& e : v.tensors) {
    nlohmann::json t;
    t["tensor"] = e.tensor;
    t["shape"] = e.shape;
    t["max_abs_err"] = e.max_abs_err;
    t["max_rel_err"] = e.max_rel_err;
    t["rel_l2_err"] = e.rel_l2_err;
    t["baseline_rel_l2_err"] = e.baseline_rel_l2_err;
    t["rounding_rel_l2_err"] = e.rounding_rel_l2_err;
    t["tolerance"] = e.tolerance;
    t["nonfinite"] = e.nonfinite;  // the metrics above are null (NaN) when it is > 0
    t["pass"] = e.pass;
    // In the order of "shape": softmax_lse is [b, h, s] as TE returns it (held internally as [b, s, h, 1]).
    if (e.tensor == "softmax_lse" && e.worst_index.size() == 4) {
      t["worst_index"] = std::vector<int64_t>{e.worst_index[0], e.worst_index[2], e.worst_index[1]};
    } else {
      t["worst_index"] = e.worst_index;
    }
    t["worst_cp_rank"] = e.worst_cp_rank;
    ts.push_back(t);
  }
  j["tensors"] = ts;
  if (v.worst_tensor >= 0) j["worst_tensor"] = v.tensors[static_cast<size_t>(v.worst_tensor)].tensor;
  return j;
}

}  // namespace hcpsim::app
