#pragma once
/// The SVG chart of `hcpsim plan --svg`.

#include <string>

#include "hcpsim/plan/plan.hpp"

namespace hcpsim::app {

/// A grouped bar chart of the ranked options (SVG 1.1, self-contained): per option the layer forward, layer
/// backward and exposed communication per layer (ms), with step time, TFLOP/s per GPU and memory written above
/// each group and options that do not fit marked. Deterministic text.
std::string plan_svg(const sim::PlanResult& result, const std::string& title);

}  // namespace hcpsim::app
