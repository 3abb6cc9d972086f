#pragma once
/// The SVG chart of `hcpsim plan --svg`.

#include <string>

#include "hcpsim/plan/plan.hpp"

namespace hcpsim::app {

/// A horizontal bar chart of the ranked options (SVG 1.1, self-contained), one row per option in rank order with
/// its rank and label on the left (the label column as wide as the longest label): the left panel shows the time
/// per iteration (StepResult::step_ps, the whole training step) with the model TFLOP/s per GPU written after the
/// bar, the right panel the memory per GPU (MemoryBreakdown::total_bytes) against the GPU's capacity (a dashed
/// line at capacity_bytes). The winner (the first ranked option that fits; none when nothing fits) is drawn in
/// green with a bold label and a "winner" badge (a <text class="winner">); options that do not fit are hatched grey
/// with "does not fit" (<text class="nofit">); when nothing fits the chart says "no option fits"
/// (<text class="nothing-fits">). Rows are 22 px apart, so any number of options lays out without overlapping text
/// (svg_chart.hpp text_box). Deterministic text.
std::string plan_svg(const sim::PlanResult& result, const std::string& title);

}  // namespace hcpsim::app
