#pragma once
/// The sliding-window rules of model.window_size, as Transformer Engine applies them. Private to config;
/// validation.cpp calls it among the model rules.

#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"

namespace hcpsim {

/// model.window_size against model.attn_mask_type, after TE's check_set_window_size (transformer_engine/pytorch/
/// attention/dot_product_attention/utils.py): with a causal mask (-1, 0) or (>= 0, 0); with no_mask (-1, -1) or
/// (>= 0, >= 0); both (-1, 0) and (-1, -1) mean no window with either mask (TE swaps one for the other). A causal
/// window (left >= 0, right != 0), which TE runs as (left, 0), is a warning in `warnings`; what TE asserts on (an
/// entry below -1, or a negative entry outside those pairs) is an InputError. A real window (left >= 0) is also warned about: hcpsim's schedules,
/// oracle and simulator compute full causal or unmasked attention (an upper bound on the attention's time).
/// @throws InputError at model.window_size
void check_window_size(const Scenario& scenario, std::vector<std::string>& warnings);

}  // namespace hcpsim
