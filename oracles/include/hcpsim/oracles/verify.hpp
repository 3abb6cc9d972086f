#pragma once
/// Differential verification: a schedule executed by the CPU executor vs the float64 full-attention reference,
/// on inputs generated from one seed. A mismatch is a report (pass = false), never an exception.

#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/oracles/cpu_executor.hpp"
#include "hcpsim/oracles/host_tensor.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim {

/// Relative L2 tolerance of an fp64 schedule run against the fp64 reference.
/// Derivation: both sides compute the same sums in a different association (blockwise softmax with LSE merges and
/// output corrections, ring-ordered dQ/dK/dV accumulation, vs one pass over the whole row). Each side's rounding
/// error is ~u·(terms) with unit roundoff u = 2⁻⁵³ ≈ 1.1e-16, growing like √n for n-term sums (n ≤ S keys per
/// row) and amplified a few times by exp/log in the merges (|scale·q·k| ≤ √dk for inputs in [−1, 1]): for
/// S ≤ 1e6 that is ≲ 1e-16·1e3·10 = 1e-12, two orders of magnitude below 1e-10. A schedule bug (a missed block,
/// a wrong mask, a copy instead of an add) changes the result by O(1/S) of a row's mass or more, i.e. ≥ 1e-7
/// relative even at S = 1e6, far above 1e-10. Observed errors of correct schedules are ~1e-15 (HCP_ALGORITHM.md §0).
inline constexpr double kFp64RelL2Tolerance = 1e-10;

/// Error of one tensor against its reference.
struct TensorError {
  std::string tensor;          ///< "out", "softmax_lse", "dq", "dk", "dv"
  std::vector<int64_t> shape;  ///< reference shape [B, S, heads, width]
  double max_abs_err = 0;      ///< max |x − ref| over compared (finite) entries
  double rel_l2_err = 0;       ///< ‖x − ref‖₂ / ‖ref‖₂ over compared entries
  double ref_l2_norm = 0;      ///< ‖ref‖₂ over compared entries
  double tolerance = 0;        ///< bound on rel_l2_err
  int64_t compared = 0;        ///< entries with a finite reference (included in the norms)
  int64_t nonfinite = 0;       ///< entries that are NaN/±inf where they must not be, or whose −inf does not match
  bool finite = false;         ///< nonfinite == 0 and the shapes match
  bool pass = false;           ///< finite && ref_l2_norm > 0 (no vacuous pass) && rel_l2_err ≤ tolerance
};

/// The verdict of one schedule verification.
struct VerifyReport {
  std::vector<TensorError> tensors;  ///< out, softmax_lse, dq, dk, dv in that order
  bool pass = false;                 ///< every tensor passes
  uint64_t seed = 0;
  std::string input_distribution;
  CpCommType cp_comm_type = CpCommType::a2a_p2p;
  int64_t a2a_size = 1;  ///< A
  int64_t p2p_size = 1;  ///< P
  AttentionShape shape;
  ExecutionStats stats;  ///< of the executor run
};

/// Compares `got` with `ref` element by element. Entries where ref is −inf (softmax_lse of a row with no visible
/// key) must be exactly −inf in `got` and are excluded from the norms; every other entry must be finite in both
/// (otherwise it counts in `nonfinite`) and enters max_abs_err and the L2 norms. A shape mismatch fails with
/// finite = false and infinite errors.
TensorError compare_tensor(const std::string& name, const HostTensor& got, const HostTensor& ref, double tolerance);

/// compare_tensor for out, softmax_lse, dq, dk, dv; report.pass = all pass. Run metadata fields are left default.
VerifyReport compare_outputs(const AttentionOutputs& got, const AttentionOutputs& ref, double tolerance);

/// Generates the global inputs of schedule.shape from `seed` (make_attention_inputs), runs the reference
/// (causal = shape.causal, scale = effective_softmax_scale(shape)) and execute_schedule, and compares all five
/// tensors with kFp64RelL2Tolerance. shape.heads_q/heads_kv are per TP rank: the oracle verifies that problem.
/// @param threads  ≥ 1 OpenMP threads for the reference and the attention blocks (results independent of it)
/// @throws InputError (key "oracle.input_distribution") for an unknown distribution, before any work.
VerifyReport verify_schedule(const Schedule& schedule, uint64_t seed, const std::string& input_distribution,
                             int threads);

/// Multi-line human-readable summary: one line per tensor (errors printed with {:.17g}) and the verdict.
std::string to_string(const VerifyReport& report);

}  // namespace hcpsim
