#include "verify_report.hpp"

#include <fmt/core.h>

#include "../app_common.hpp"

namespace hcpsim::app {

std::string element_text(const TensorError& e) {
  if (e.worst_index.size() != 4) return "-";
  return fmt::format("[b={}, s={}, h={}, w={}]", e.worst_index[0], e.worst_index[1], e.worst_index[2],
                     e.worst_index[3]);
}

void print_table(const VerifyReport& v) {
  fmt::print("  {:<12} {:<22} {:>11} {:>11} {:>11} {:>11} {:>10}  {}\n", "tensor", "shape", "max_abs_err",
             "max_rel_err", "rel_l2_err", "baseline", "tolerance", "result");
  for (const auto& e : v.tensors) {
    fmt::print("  {:<12} {:<22} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e} {:>10.2e}  {}\n", e.tensor, join(e.shape),
               e.max_abs_err, e.max_rel_err, e.rel_l2_err, e.baseline_rel_l2_err, e.tolerance,
               e.pass ? "pass" : (e.finite ? "FAIL" : "FAIL (non-finite)"));
  }
}

void print_result(const VerifyReport& v, Dtype dtype) {
  if (v.pass) {
    fmt::print("  result: PASS (HCP equals full attention within the {} error model)\n", to_string(dtype));
  } else {
    const TensorError& w = v.tensors[static_cast<size_t>(v.worst_tensor)];
    fmt::print("  result: FAIL: worst tensor {} (rel_l2_err {:.3e} vs tolerance {:.2e}{}), cp_rank {}, element {}: "
               "got {:.17g}, reference {:.17g}\n",
               w.tensor, w.rel_l2_err, w.tolerance, w.finite ? "" : fmt::format(", {} non-finite", w.nonfinite),
               w.worst_cp_rank, element_text(w), w.worst_value, w.worst_reference);
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
    t["nonfinite"] = e.nonfinite;
    t["pass"] = e.pass;
    t["worst_index"] = e.worst_index;
    t["worst_cp_rank"] = e.worst_cp_rank;
    ts.push_back(t);
  }
  j["tensors"] = ts;
  if (v.worst_tensor >= 0) j["worst_tensor"] = v.tensors[static_cast<size_t>(v.worst_tensor)].tensor;
  return j;
}

}  // namespace hcpsim::app
