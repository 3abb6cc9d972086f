#pragma once
// Small file helpers shared by the test sources: read a whole file, and a fresh scratch directory per test case.
#include <unistd.h>

#include <cmath>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "hcpsim/core/schedule.hpp"

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

}  // namespace hcpsim::test
