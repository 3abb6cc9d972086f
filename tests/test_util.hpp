#pragma once
// Small helpers shared by the test sources: read a whole file, a fresh scratch directory per test case, an
// attention shape, the message of a thrown InputError, TE's comm type for [A, P], the full structural check of a schedule, and a schedule that
// deadlocks under rendezvous semantics.
#include <unistd.h>

#include <cmath>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "hcpsim/core/cp_variant.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule.hpp"
#include "hcpsim/core/schedule_hazards.hpp"

namespace hcpsim::test {

/// The message of the InputError that `f()` throws, or "" when it throws none.
template <class F>
std::string input_error_of(F&& f) {
  try {
    (void)f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

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

/// Two ranks that each send to the other first and receive afterwards, as separate send-only and recv-only ops
/// (#2 'send', #3 'recv', after allocating x and y on the comm stream): structurally valid and hazard-free, but
/// under rendezvous semantics each send waits for a receive its peer has not reached, a deadlock.
inline Schedule exchange_deadlock_schedule() {
  Schedule s;
  s.cp_comm_type = CpCommType::p2p;
  s.p2p_size = 2;
  s.shape = attention_shape(1, 8, 1, 1, 4, 4, true);
  for (int64_t r = 0; r < 2; ++r) {
    RankProgram p;
    p.rank = p.cp_rank = r;
    p.buffers.push_back(BufferDecl{"x", 1, 2, 1, 4, Dtype::bf16});
    p.buffers.push_back(BufferDecl{"y", 1, 2, 1, 4, Dtype::bf16});
    // All on the comm stream, so that stream order orders them (no buffer hazard).
    p.append(AllocOp{0}, Phase::forward, Stream::comm, {}, "alloc x");
    p.append(AllocOp{1}, Phase::forward, Stream::comm, {}, "alloc y");
    p.append(SendRecvOp{1 - r, -1, {0}, {}, 7, 0}, Phase::forward, Stream::comm, {}, "send");
    p.append(SendRecvOp{-1, 1 - r, {}, {1}, 0, 7}, Phase::forward, Stream::comm, {}, "recv");
    s.ranks.push_back(p);
  }
  return s;
}

}  // namespace hcpsim::test
