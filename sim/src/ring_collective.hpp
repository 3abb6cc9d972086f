#pragma once
// Private to sim/: the rings NCCL builds for an all-gather or reduce-scatter over a group of GPUs, as the
// simulator routes them on the flow network. Inside one node one ring in group order. Across nodes one ring
// per channel, channels = the most members on one node: channel c enters every node at the node's c-th member
// and leaves it towards the next node through that member's NIC (its rail), reached over NVLink from the node's
// last member (NCCL's PXN), so the channels leave each node through as many different NICs as there are
// members, as NCCL's rings do on rail-optimised DGX systems.

#include <cstdint>
#include <vector>

#include "hcpsim/sim/topology.hpp"

namespace hcpsim::sim::detail {

/// One ring neighbour pair of one channel: member positions (in the group) and the route between their GPUs.
struct RingHop {
  size_t from = 0;
  size_t to = 0;
  std::vector<int64_t> route;
};

/// The channels of the ring over `gpus` (the group's GPUs in group order, ≥ 2 of them): each channel a list of
/// gpus.size() hops. Nodes and rails are the topology's (Topology::gpu_node, gpu_rail).
std::vector<std::vector<RingHop>> ring_channels(const std::vector<int64_t>& gpus, const Topology& topology);

}  // namespace hcpsim::sim::detail
