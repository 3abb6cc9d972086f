#pragma once
// Small helpers shared by the test sources: read a whole file, a fresh scratch directory per test case, an
// attention shape, TE's comm type for [A, P], and the full structural check of a schedule.
#include <unistd.h>

#include <cmath>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "hcpsim/core/cp_variant.hpp"
#include "hcpsim/core/schedule.hpp"
#include "hcpsim/core/schedule_hazards.hpp"

namespace hcpsim::test {

/// The whole content of `path` ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// An empty directory under the system temp dir, unique per process and `name`; callers remove it when done.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("hcpsim_test_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

/// The attention problem [b, S, H, Hkv, dk, dv] with softmax_scale dk^-0.5 and element type `dtype`.
inline AttentionShape attention_shape(int64_t b, int64_t s, int64_t h, int64_t hkv, int64_t dk, int64_t dv,
                                      bool causal, Dtype dtype = Dtype::bf16) {
  AttentionShape shape;
  shape.batch = b;
  shape.seq_length = s;
  shape.heads_q = h;
  shape.heads_kv = hkv;
  shape.head_dim_qk = dk;
  shape.head_dim_v = dv;
  shape.causal = causal;
  shape.softmax_scale = 1.0 / std::sqrt(static_cast<double>(dk));
  shape.dtype = dtype;
  return shape;
}

/// The comm type TE uses for [A, P]: p2p for A = 1, a2a for P = 1, else a2a+p2p (attn_forward_func_with_cp,
/// docs/algorithm.md §8.1).
inline CpCommType comm_type_for(int64_t A, int64_t P) {
  return cp_variant_for_hierarchical_sizes(A, P).comm_type;  // the table's fallback rule
}

/// Schedule::check_invariants, then check_hazards (the ordering contract): what tests run on every schedule they
/// build (the library runs the hazard check in debug builds only). Aborts on the first violation.
inline void check_schedule(const Schedule& schedule) {
  schedule.check_invariants();
  check_hazards(schedule);
}

}  // namespace hcpsim::test
