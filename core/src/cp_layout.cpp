#include "hcpsim/core/cp_layout.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <utility>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

CpLayout::CpLayout(int64_t a2a_size, int64_t p2p_size, int64_t seq_length)
    : a2a_size_(a2a_size), p2p_size_(p2p_size), seq_length_(seq_length) {
  HCPSIM_ASSERT(a2a_size >= 1, "a2a size must be >= 1");
  HCPSIM_ASSERT(p2p_size >= 1, "p2p size must be >= 1");
  HCPSIM_ASSERT(seq_length > 0, "seq_length must be > 0");
  HCPSIM_ASSERT(seq_length % (2 * a2a_size * p2p_size) == 0, "seq_length must be divisible by 2*cp");
}

std::vector<int64_t> CpLayout::a2a_group(int64_t p) const {
  std::vector<int64_t> g;
  for (int64_t a = 0; a < a2a_size_; ++a) g.push_back(cp_rank(p, a));
  return g;
}

std::vector<int64_t> CpLayout::p2p_group(int64_t a) const {
  std::vector<int64_t> g;
  for (int64_t p = 0; p < p2p_size_; ++p) g.push_back(cp_rank(p, a));
  return g;
}

std::vector<int64_t> CpSymmetryClasses::representatives() const {
  std::vector<int64_t> reps;
  reps.reserve(classes.size());
  for (const auto& c : classes) reps.push_back(c[0]);
  return reps;
}

CpSymmetryClasses CpLayout::a2a_group_classes(int64_t a2a_size, int64_t p2p_size) {
  HCPSIM_ASSERT(a2a_size >= 1 && p2p_size >= 1, "a2a and p2p sizes must be >= 1");
  CpSymmetryClasses c;
  c.class_of.resize(static_cast<size_t>(a2a_size * p2p_size));
  c.position_of.resize(c.class_of.size());
  for (int64_t p = 0; p < p2p_size; ++p) {
    std::vector<int64_t> members;
    for (int64_t a = 0; a < a2a_size; ++a) {
      const int64_t g = p * a2a_size + a;  // flat CP rank g = p·A + a
      members.push_back(g);
      c.class_of[static_cast<size_t>(g)] = p;
      c.position_of[static_cast<size_t>(g)] = a;
    }
    c.classes.push_back(std::move(members));
  }
  return c;
}

std::vector<int64_t> CpLayout::zigzag_chunks(int64_t g) const { return {g, 2 * cp_size() - 1 - g}; }

static std::vector<int64_t> chunk_tokens(const std::vector<int64_t>& chunks, int64_t chunk_len) {
  std::vector<int64_t> tokens;
  tokens.reserve(chunks.size() * static_cast<size_t>(chunk_len));
  for (int64_t c : chunks)
    for (int64_t t = 0; t < chunk_len; ++t) tokens.push_back(c * chunk_len + t);
  return tokens;
}

std::vector<int64_t> CpLayout::tokens_before_a2a(int64_t g) const {
  return chunk_tokens(zigzag_chunks(g), chunk_size());
}

std::vector<int64_t> CpLayout::post_a2a_chunks(int64_t p) const {
  // Gathered order: member j's two chunks, index 2j + half (TE view(..., 2A, s/2, ...)).
  std::vector<int64_t> gathered;
  for (int64_t j = 0; j < a2a_size_; ++j)
    for (int64_t c : zigzag_chunks(cp_rank(p, j))) gathered.push_back(c);
  std::vector<int64_t> order;
  for (int64_t k : chunk_ids_before_attn(a2a_size_)) order.push_back(gathered[static_cast<size_t>(k)]);
  return order;
}

std::vector<int64_t> CpLayout::post_a2a_tokens(int64_t p) const {
  return chunk_tokens(post_a2a_chunks(p), chunk_size());
}

std::vector<int64_t> CpLayout::chunk_ids_before_attn(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(2 * n));
  for (int64_t r = 0; r < n; ++r) {
    ids[static_cast<size_t>(r)] = 2 * r;
    ids[static_cast<size_t>(r + n)] = 2 * n - 2 * r - 1;
  }
  return ids;
}

std::vector<int64_t> CpLayout::chunk_ids_after_attn(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(2 * n));
  for (int64_t r = 0; r < n; ++r) {
    ids[static_cast<size_t>(2 * r)] = r;
    ids[static_cast<size_t>(2 * r + 1)] = 2 * n - r - 1;
  }
  return ids;
}

/// The order's dimensions, lower-cased (Megatron lower-cases the order string).
static std::vector<std::string> split_order(const std::string& order) {
  std::vector<std::string> parts;
  std::string lower = order;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::stringstream ss(lower);
  std::string item;
  while (std::getline(ss, item, '-')) parts.push_back(item);
  return parts;
}

bool is_valid_parallel_order(const std::string& order) {
  const auto parts = split_order(order);
  if (parts.empty()) return false;
  for (const auto& p : parts)
    if (std::count(parts.begin(), parts.end(), p) != 1 ||
        (p != "tp" && p != "cp" && p != "ep" && p != "dp" && p != "pp"))
      return false;
  return true;
}

bool parallel_order_names(const std::string& order, const std::string& dimension) {
  const auto parts = split_order(order);
  return std::find(parts.begin(), parts.end(), dimension) != parts.end();
}

bool parallel_order_ep_next_to_dp(const std::string& order) {
  const auto parts = split_order(order);
  const auto ep = std::find(parts.begin(), parts.end(), "ep"), dp = std::find(parts.begin(), parts.end(), "dp");
  if (ep == parts.end()) return true;
  return dp != parts.end() && (ep + 1 == dp || dp + 1 == ep);
}

int64_t global_rank(const std::string& order, const ParallelSizes& sizes, int64_t tp_rank, int64_t cp_rank,
                    int64_t dp_rank, int64_t pp_rank) {
  HCPSIM_ASSERT(is_valid_parallel_order(order), "order must be validated: " + order);
  int64_t rank = 0;
  int64_t stride = 1;
  for (const auto& dim : split_order(order)) {
    int64_t coord = 0, size = 1;
    if (dim == "tp") { coord = tp_rank; size = sizes.tp; }
    if (dim == "cp") { coord = cp_rank; size = sizes.cp; }
    if (dim == "ep") { coord = 0; size = sizes.ep; }
    if (dim == "dp") { coord = dp_rank; size = sizes.dp; }
    if (dim == "pp") { coord = pp_rank; size = sizes.pp; }
    rank += coord * stride;
    stride *= size;
  }
  return rank;
}

std::vector<CpRankPlacement> place_cp_group(const std::string& order, const ParallelSizes& sizes,
                                            int64_t gpus_per_node) {
  HCPSIM_ASSERT(gpus_per_node >= 1, "gpus_per_node must be >= 1");
  std::vector<CpRankPlacement> out;
  for (int64_t g = 0; g < sizes.cp; ++g) {
    CpRankPlacement pl;
    pl.cp_rank = g;
    pl.global_rank = global_rank(order, sizes, 0, g, 0, 0);
    pl.node = pl.global_rank / gpus_per_node;
    pl.local_gpu = pl.global_rank % gpus_per_node;
    out.push_back(pl);
  }
  return out;
}

}  // namespace hcpsim
