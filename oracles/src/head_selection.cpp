#include "hcpsim/oracles/head_selection.hpp"

#include <algorithm>

namespace hcpsim {

HeadSelection select_heads(const AttentionShape& full, int64_t a2a_size, const std::string& heads) {
  HeadSelection sel{full, {}, {}};
  if (heads == "all") return sel;
  const int64_t per_member = full.heads_q / a2a_size;  // H/A
  const int64_t group = full.heads_q / full.heads_kv;  // H/Hkv
  int64_t n = std::min<int64_t>(std::stoll(heads), per_member);
  n = (n + group - 1) / group * group;  // whole KV groups only
  n = std::min(n, per_member);
  if (n == per_member) return sel;
  const int64_t kv_member = full.heads_kv / a2a_size;
  for (int64_t a = 0; a < a2a_size; ++a) {
    for (int64_t hh = 0; hh < n; ++hh) sel.q_heads.push_back(a * per_member + hh);
    for (int64_t j = 0; j < n / group; ++j) sel.kv_heads.push_back(a * kv_member + j);
  }
  sel.shape.heads_q = static_cast<int64_t>(sel.q_heads.size());
  sel.shape.heads_kv = static_cast<int64_t>(sel.kv_heads.size());
  return sel;
}

VerifyOptions verify_options(const HeadSelection& sel, const AttentionShape& full, uint64_t seed,
                             const std::string& input_distribution, Dtype dtype, int threads) {
  VerifyOptions opt;
  opt.seed = seed;
  opt.input_distribution = input_distribution;
  opt.dtype = dtype;
  opt.threads = threads;
  opt.q_heads = sel.q_heads;
  opt.kv_heads = sel.kv_heads;
  opt.full_heads_q = full.heads_q;
  opt.full_heads_kv = full.heads_kv;
  return opt;
}

}  // namespace hcpsim
