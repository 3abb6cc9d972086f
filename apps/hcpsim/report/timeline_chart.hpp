#pragma once
/// The per-GPU timeline chart of `hcpsim simulate --timeline-svg`.

#include <cstddef>
#include <string>

#include "hcpsim/sim/simulator.hpp"

namespace hcpsim::app {

/// GPUs a timeline chart shows at most (the first CP ranks); more would make lanes too thin to read.
/// Source: readability choice (about one screen of lanes).
inline constexpr size_t kTimelineMaxGpus = 16;
/// Links between GPUs (neither a message's first nor its last hop) a timeline chart shows at most: the busiest.
inline constexpr size_t kTimelineMaxFabricLinks = 8;

/// A Gantt chart (SVG 1.1, self-contained) of one simulated layer over time (forward then backward, a dashed
/// line where the backward starts): for each of the first `max_gpus` CP ranks one lane per GPU stream that ran an
/// op (compute = TE's current stream, cp_stream, comm = NCCL's stream), each op a bar coloured by its kind with its
/// label inside when it fits, then one lane per link out of the GPU that carried its messages (each message a
/// translucent bar from its first byte to its last, coloured by phase); then the busiest links between GPUs
/// (up to kTimelineMaxFabricLinks). A time axis in ms or us with ticks, a legend of the kinds shown, and a caption
/// saying what was left out. Deterministic text.
/// @param result  a simulation with SimOptions::record_timeline (without it only the link lanes have bars).
std::string timeline_svg(const sim::SimResult& result, const std::string& title, size_t max_gpus = kTimelineMaxGpus);

}  // namespace hcpsim::app
