#pragma once
/// What `hcpsim verify` prints and writes about one verified schedule: the error table, the PASS/FAIL line and
/// the JSON record of `--json`.

#include <string>

#include <nlohmann/json.hpp>

#include "hcpsim/core/types.hpp"
#include "hcpsim/oracles/verify.hpp"

namespace hcpsim::app {

/// "[b=.., s=.., h=.., w=..]" of the worst element of a tensor's error (bshd indices), "-" when unknown.
std::string element_text(const TensorError& e);

/// Prints the per-tensor error table (max_abs_err, max_rel_err, rel_l2_err, baseline, tolerance, result). A tensor
/// with non-finite entries shows "nan" in its error columns and "FAIL (N non-finite of M)" as its result.
void print_table(const VerifyReport& v);

/// Prints "  result: PASS (...)", "  result: PRECISION_LIMITED: ..." with its evidence (the fp64 run of the same
/// schedule, the logit range, and per failing tensor its error vs the same-precision non-CP baseline), or
/// "  result: FAIL: worst tensor ..., cp_rank .., element ..: got .., reference .." for a report made in `dtype`.
void print_result(const VerifyReport& v, Dtype dtype);

/// The JSON record of one verified schedule: comm type, A, P, dtype, seed, inputs, the injected fault (null for
/// none), heads, pass (every tensor within tolerance), result (pass | precision_limited | fail), the precision
/// evidence of a precision_limited result, and every tensor's errors (null when it has non-finite entries, counted
/// in "nonfinite") and tolerance.
nlohmann::json report_json(const VerifyReport& v, const std::string& injected);

}  // namespace hcpsim::app
