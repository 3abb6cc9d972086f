#include "ring_collective.hpp"

#include <algorithm>

#include "hcpsim/core/error.hpp"

namespace hcpsim::sim::detail {

std::vector<std::vector<RingHop>> ring_channels(const std::vector<int64_t>& gpus, const Topology& topology) {
  HCPSIM_ASSERT(gpus.size() >= 2, "a ring needs two members");
  // Members by node, nodes in order of their first member, members in group order.
  std::vector<int64_t> node_ids;
  std::vector<std::vector<size_t>> blocks;
  for (size_t m = 0; m < gpus.size(); ++m) {
    const int64_t node = topology.gpu_node(gpus[m]);
    auto it = std::find(node_ids.begin(), node_ids.end(), node);
    if (it == node_ids.end()) {
      node_ids.push_back(node);
      blocks.emplace_back();
      it = node_ids.end() - 1;
    }
    blocks[static_cast<size_t>(it - node_ids.begin())].push_back(m);
  }
  size_t channels = 1;
  if (blocks.size() > 1)
    for (const auto& b : blocks) channels = std::max(channels, b.size());
  std::vector<std::vector<RingHop>> out(channels);
  for (size_t c = 0; c < channels; ++c) {
    std::vector<size_t> order;
    std::vector<size_t> block_of;  // block index of each position of `order`
    for (size_t b = 0; b < blocks.size(); ++b)
      for (size_t j = 0; j < blocks[b].size(); ++j) {
        order.push_back(blocks[b][(c + j) % blocks[b].size()]);
        block_of.push_back(b);
      }
    for (size_t k = 0; k < order.size(); ++k) {
      const size_t next = (k + 1) % order.size();
      const size_t x = order[k], y = order[next];
      RingHop hop{x, y, {}};
      const auto& block = blocks[block_of[k]];
      const size_t entry = block[c % block.size()];  // the node's rail of this channel
      const bool crosses = block_of[k] != block_of[next];
      if (crosses && entry != x && topology.gpu_rail(gpus[entry]) == topology.gpu_rail(gpus[y])) {
        hop.route = topology.route(gpus[x], gpus[entry], c);  // NVLink to the rail's GPU (PXN) …
        const std::vector<int64_t> rail = topology.route(gpus[entry], gpus[y], c);  // … and out through its NIC
        hop.route.insert(hop.route.end(), rail.begin(), rail.end());
      } else {
        hop.route = topology.route(gpus[x], gpus[y], c);
      }
      out[c].push_back(std::move(hop));
    }
  }
  return out;
}

}  // namespace hcpsim::sim::detail
