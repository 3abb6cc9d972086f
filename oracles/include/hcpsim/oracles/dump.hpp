#pragma once
/// HDF5 dumps of a verification run, and their comparison (`hcpsim verify --dump`, `hcpsim compare`).
///
/// Layout (documented for users in the README, "HDF5 dump layout"):
///   /meta       attributes: scenario_yaml (the effective scenario), scenario_digest, overrides (a JSON array),
///               seed, hcpsim_version, compiler, x86_level, cuda (provenance, io/provenance.hpp); dtype, backend,
///               attn_mask_type, qkv_format, cp_comm_type, a2a_size, p2p_size, softmax_scale, causal,
///               input_distribution, inject (the run); reference_digest ("out=<16 hex> lse=… dq=… dk=… dv=…",
///               FNV-1a 64 of each /reference tensor's shape and float64 values, written by write_dump; read_dump
///               refuses a /reference tensor that no longer matches it); dense attribute storage, so any scenario
///               size fits
///   /inputs     q, k, v, do              [b, s, h, d] (bshd)
///   /reference  out, lse, dq, dk, dv     float64; lse is [b, h, s]
///   /hcp        out, lse, dq, dk, dv     the run's gathered results, global sequence order
///   /metrics    one group per tensor with attributes max_abs_err, max_rel_err, rel_l2_err, tolerance, pass
///   packed sequences (THD) only, int64 datasets under /meta: cu_seqlens, cu_seqlens_padded [n + 1] (TE's);
///               thd_tokens/rank<g> and thd_te_indices/rank<g> [T / cp] for every flat CP rank g (ThdDumpLayout);
///               and the /meta attribute pad_between_seqs (1 or 0)
/// Value types: float64 for fp64 runs and for /reference; float32 otherwise (bf16/fp16 values widened exactly);
/// lse datasets are float32 unless the run is fp64. With oracle.heads every dataset holds only the checked heads.
/// Files are written to "<path>.tmp" and renamed on success, in the HDF5 1.8 file format; object time tracking is
/// off, so the same run gives byte-identical files.

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "hcpsim/oracles/reference.hpp"
#include "hcpsim/oracles/verify.hpp"

namespace hcpsim {

/// The packed-sequence layout a THD dump records so a user can shard their own tensors like TE or like hcpsim.
struct ThdDumpLayout {
  std::vector<int64_t> cu_seqlens;         ///< TE cu_seqlens, n + 1 entries
  std::vector<int64_t> cu_seqlens_padded;  ///< TE cu_seqlens_padded, n + 1 entries
  /// Per flat CP rank g: the packed index of every local row in hcpsim's order (halves-major: the first chunk of
  /// every sequence, then the second chunks; ThdLayout::tokens_before_a2a, the rows of `hcpsim shard`'s files).
  std::vector<std::vector<int64_t>> rank_tokens;
  /// Per flat CP rank g: the same tokens in TE's order (thd_partitioned_indices(cu_seqlens_padded, cp, g), what
  /// TE's thd_get_partitioned_indices gives, so index_select with it shards a packed tensor like TE).
  std::vector<std::vector<int64_t>> te_indices;
  [[nodiscard]] bool empty() const { return cu_seqlens_padded.empty(); }
};

/// The ThdDumpLayout of a packing on an [A, P] layout (cp = A·P); empty for a packing without sequences.
/// @param packing  padded lengths multiples of 2·A·P (HCPSIM_ASSERT, ThdLayout).
ThdDumpLayout thd_dump_layout(const PackedSequences& packing, int64_t a2a_size, int64_t p2p_size);

/// Everything a dump holds.
struct DumpContents {
  std::map<std::string, std::string> meta_text;  ///< string attributes of /meta
  std::map<std::string, double> meta_number;     ///< numeric attributes of /meta (seed, sizes, scale, causal)
  /// The input seed exactly (a uint64 /meta/seed, which a double cannot hold above 2^53); when set, write_dump
  /// writes it instead of meta_number["seed"]; read_dump fills it when /meta/seed is an integer (dumps that stored
  /// it as a float64 leave it empty; meta_number["seed"] holds it either way, as a double).
  std::optional<uint64_t> seed;
  Dtype dtype = Dtype::fp64;                     ///< the run's dtype (decides the stored float width)
  AttentionInputs inputs;                        ///< softmax_lse-free inputs [B, S, H, d]
  AttentionOutputs reference;                    ///< lse in HostTensor form [B, S, H, 1]
  AttentionOutputs hcp;
  std::vector<TensorError> metrics;              ///< may be empty when reading a user-written file
  ThdDumpLayout thd;                             ///< packed sequences only (written when not empty; read if present)
};

/// Writes `contents` to `path` (temporary name + rename). On any failure the temporary file is removed and
/// nothing exists under `path` that was not there before.
/// @param omit  absolute dataset paths to leave out (e.g. "/hcp/dq"): partial files for tests of the reader.
/// @param option  the command's option that named `path` ("--dump", gather's "-o"), for messages.
/// @throws InputError (key `option`) when the file cannot be created or written.
void write_dump(const std::string& path, const DumpContents& contents, const std::vector<std::string>& omit = {},
                const std::string& option = "--dump");

/// The output tensors of a dump by the names `compare --tensors` takes: out, softmax_lse, dq, dk, dv (the
/// datasets of softmax_lse are named "lse").
const std::vector<std::string>& dump_tensor_names();

/// Reads a dump. /metrics and /meta attributes are optional (a user's own file may lack them); every
/// dataset of /inputs is required, and of /reference and /hcp those of `tensors` (names of dump_tensor_names; empty:
/// all five), all with a consistent shape. Tensors not selected are left empty. with_reference = false: /reference
/// is neither required nor read (compare's file under test, judged against the other file's reference).
/// @throws InputError (located at the file path, empty key) for a file that is not HDF5, is truncated, lacks a dataset, or has
///   a dataset of the wrong rank or shape, naming the dataset and the fix.
DumpContents read_dump(const std::string& path, const std::vector<std::string>& tensors = {},
                       bool with_reference = true);

/// Result of comparing dump `b` against dump `a`.
struct DumpComparison {
  std::vector<TensorError> tensors;  ///< /hcp of b vs /hcp of a, with the elementwise allclose verdict in pass
  std::vector<int64_t> violations;   ///< per tensor: elements with |b − a| > atol + rtol·|a| (or non-finite)
  std::vector<double> b_vs_reference;  ///< per tensor: rel L2 of b:/hcp against a:/reference
  bool pass = false;
  double rtol = 0;
  double atol = 0;
};

/// Default tolerances of `hcpsim compare` for a dtype: fp64 1e-10, fp32 1e-5, bf16 2.5e-2, fp16 5e-3 (rtol = atol;
/// the 16-bit values are TE's published CP test tolerances, docs/algorithm.md §10).
double default_compare_tolerance(Dtype dtype);

/// Compares b:/hcp with a:/hcp elementwise like torch.allclose (|b − a| ≤ atol + rtol·|a|, NaN/inf mismatch =
/// violation) and reports the error table, for the tensors named in `tensors` (empty: all five, in the order of
/// dump_tensor_names). Inputs must be identical.
/// @throws InputError when the dumps' inputs differ (they are not the same problem), or when the compared tensors
///   of `a` hold no element at all (a comparison of nothing is no verdict).
DumpComparison compare_dumps(const DumpContents& a, const DumpContents& b, double rtol, double atol,
                             const std::string& a_path, const std::string& b_path,
                             const std::vector<std::string>& tensors = {});

/// Tells the HDF5 library not to shut itself down at process exit (H5dont_atexit; call before any other HDF5
/// use). After reading a corrupt file, HDF5's exit handler cannot release the damaged object it cached and
/// prints "HDF5: infinite loop closing library" after hcpsim's own error. Nothing is lost: every file hcpsim
/// opens is closed by its handle (H5Fclose flushes it) before the command returns.
void skip_hdf5_shutdown_at_exit();

}  // namespace hcpsim
