#pragma once
/// How the sequence splits over the CP and TP ranks. Private to config; validation.cpp calls it among the parallel
/// rules.

#include "hcpsim/config/scenario.hpp"

namespace hcpsim {

/// With CP the load-balanced split cuts the sequence into 2·CP equal chunks (seq_length % (2·CP) == 0); with
/// sequence parallelism and TP > 1 each CP rank's S / CP tokens are scattered over the TP ranks, so TP divides them
/// (Megatron-Core's scatter_to_sequence_parallel_region asserts the first dimension divides by the TP size). For
/// packed sequences seq_length is the padded total T. An error is located at the override that broke the rule when
/// one of the keys involved was overridden.
/// @throws InputError naming model.seq_length (or parallel.sequence_parallel) with a fix.
void check_sequence_split(const Scenario& scenario);

}  // namespace hcpsim
