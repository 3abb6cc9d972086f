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

/// Prints the per-tensor error table (max_abs_err, max_rel_err, rel_l2_err, baseline, tolerance, result).
void print_table(const VerifyReport& v);

/// Prints "  result: PASS (...)" or "  result: FAIL: worst tensor ..., cp_rank .., element ..: got .., reference .."
/// for a report made in `dtype`.
void print_result(const VerifyReport& v, Dtype dtype);

/// The JSON record of one verified schedule: comm type, A, P, dtype, seed, inputs, the injected fault (null for
/// none), heads, pass and every tensor's errors and tolerance.
nlohmann::json report_json(const VerifyReport& v, const std::string& injected);

}  // namespace hcpsim::app
