#pragma once
// Private to sim/: the results of a finished run (SimResult) from the engine's state — per-rank stats and busy
// times, phase times, FLOPs, link usage, message totals and the timeline. In a symmetry-reduced run an image
// rank's results are its representative's under relabelling.

#include <cstdint>

#include "memory_accounting.hpp"
#include "message_transport.hpp"
#include "sim_context.hpp"

namespace hcpsim::sim::detail {

/// The SimResult of a run that has finished (every op of every executed rank has run). Moves the flow records
/// out of `transport`. @param events  the number of events the run took.
SimResult collect_results(const SimContext& ctx, const MemoryAccounting& memory, MessageTransport& transport,
                          int64_t events);

}  // namespace hcpsim::sim::detail
