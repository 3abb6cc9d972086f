#pragma once
/// Per-rank HDF5 files of `hcpsim shard` and `hcpsim gather`: one CP rank's inputs, laid out as the schedule's rank
/// program binds them (its zigzag chunks of the sequence, its heads under a2a), and the outputs a user's framework
/// computed on that rank, in the same layout.
///
/// Layout (documented for users in the README, "Your framework: shard and gather"):
///   /meta     attributes: cp_rank, cp_size, cp_comm_type, a2a_size, p2p_size, causal, softmax_scale, dtype, and
///             the source dump's provenance (hcpsim_version, scenario_digest, ...)
///   /inputs   q, k, v, do           [b, s_local, h_local, d]; attribute head_begin (global head of local head 0)
///   /outputs  out, dq, dk, dv       [b, s_local, h_local, d]; lse [b, h_local, s_local] (optional)
///   /tokens   <tensor>              int64 [s_local]: the global sequence position of each local row
/// Value types: float64 for fp64 runs, else float32 (bf16/fp16 values widened exactly). Written like dumps
/// (temporary name + rename, no object times: the same content gives the same bytes).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hcpsim/oracles/host_tensor.hpp"

namespace hcpsim {

/// One tensor of a rank file: a rank's rows and heads of a global tensor.
struct RankTensor {
  std::string name;             ///< q, k, v, do (/inputs) or out, lse, dq, dk, dv (/outputs)
  HostTensor values;            ///< [b, rows, heads, width]; lse as [b, rows, heads, 1] (stored [b, heads, rows])
  std::vector<int64_t> tokens;  ///< global sequence position of each row
  int64_t head_begin = 0;       ///< global head of local head 0
};

/// The contents of a rank file.
struct RankFile {
  std::map<std::string, std::string> meta_text;  ///< string attributes of /meta
  std::map<std::string, double> meta_number;     ///< numeric attributes of /meta (cp_rank, sizes, scale, causal)
  /// The source dump's oracle.seed, exactly (written as uint64 /meta/seed instead of meta_number["seed"], which a
  /// double holds exactly only up to 2^53); read back when the file stores an integer seed.
  std::optional<uint64_t> seed;
  bool float64 = false;                          ///< float64 datasets (fp64 runs), else float32
  std::vector<RankTensor> inputs;
  std::vector<RankTensor> outputs;
};

/// Writes `file` to `path` (temporary name + rename).
/// @throws InputError (key "-o") when the file cannot be created or written.
void write_rank_file(const std::string& path, const RankFile& file);

/// Reads a rank file's /meta and the datasets of /outputs that exist among out, lse, dq, dk, dv (values only: the
/// schedule, not the file, says where they belong). /inputs and /tokens are not read.
/// @throws InputError located at the file for a file that is not HDF5, lacks /meta cp_rank, or has an output of
///   the wrong rank.
RankFile read_rank_file(const std::string& path);

}  // namespace hcpsim
