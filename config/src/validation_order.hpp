#pragma once
/// The rules of parallel.order, as Megatron's RankGenerator applies them. Private to config; validation.cpp calls it
/// among the parallel rules (without DP, whose size is resolved later) and again with DP's size.

#include <cstdint>
#include <optional>

#include "hcpsim/config/scenario.hpp"

namespace hcpsim {

/// parallel.order as megatron/core/parallel_state.py RankGenerator.__init__ takes it: '-'-separated names of tp,
/// cp, ep, dp, pp, each at most once, in any case; ep, when named, next to dp ("The ep and dp must be adjacent in
/// order"); every dimension it leaves out of size 1 (RankGenerator appends those: "The size of (dp) is (2), but you
/// haven't specified the order"). TP, CP and PP are checked always, DP only when `dp` (its resolved size) is given.
/// @throws InputError at parallel.order naming the rule and a fix.
void check_parallel_order(const Scenario& scenario, std::optional<int64_t> dp);

}  // namespace hcpsim
