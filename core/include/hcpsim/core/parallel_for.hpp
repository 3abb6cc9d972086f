#pragma once
/// Runs independent work items on a few threads: the schedule builders build one rank program per item, and the
/// simulator indexes one rank per item. Standard library threads only (core's rule, docs/architecture.md).

#include <cstdint>
#include <functional>

namespace hcpsim {

/// Calls body(i) once for every i in [0, count), on up to `threads` threads (the caller's among them): each
/// thread takes the next unclaimed index, so long items do not hold the others back. The caller must make the
/// items independent (each writes only its own outputs); then what they compute does not depend on `threads` or
/// on the order in which the items run. threads <= 1 or count <= 1: a plain loop on the calling thread, in index
/// order.
/// Errors: the exception of the lowest failing index is rethrown, so the same input reports the same error for any
/// thread count. On one thread the loop stops at it; on several, every item still runs and the error is rethrown
/// once all have finished. std::system_error when a thread cannot be started. An HCPSIM_ASSERT that fails inside
/// an item (an internal error: it aborts the process) reports the first violation any thread reaches.
void parallel_for(int64_t count, int threads, const std::function<void(int64_t)>& body);

}  // namespace hcpsim
