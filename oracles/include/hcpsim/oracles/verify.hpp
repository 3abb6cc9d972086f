#pragma once
/// Differential verification: a schedule executed by the CPU executor vs the float64 full-attention reference,
/// on inputs generated from one seed. A mismatch is a report (pass = false), never an exception.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/oracles/cpu_executor.hpp"
#include "hcpsim/oracles/host_tensor.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim {

/// Relative L2 tolerance of an fp64 schedule run against the fp64 reference.
/// Derivation: both sides compute the same sums in a different association (blockwise softmax with LSE merges and
/// output corrections, ring-ordered dQ/dK/dV accumulation, vs one pass over the whole row). Each side's rounding
/// error is ~u·(terms) with unit roundoff u = 2⁻⁵³ ≈ 1.1e-16, growing like √n for n-term sums (n ≤ S keys per
/// row) and amplified a few times by exp/log in the merges (|scale·q·k| ≤ √dk for inputs in [−1, 1]): for
/// S ≤ 1e6 that is ≲ 1e-16·1e3·10 = 1e-12, two orders of magnitude below 1e-10. A schedule bug (a missed block,
/// a wrong mask, a copy instead of an add) changes the result by O(1/S) of a row's mass or more, i.e. ≥ 1e-7
/// relative even at S = 1e6, far above 1e-10. Observed errors of correct schedules are ~1e-15 (docs/algorithm.md §0).
inline constexpr double kFp64RelL2Tolerance = 1e-10;

/// TE's published tolerances for its CP tests (atol = rtol), used as the ceiling of the emulated-format tolerance.
/// Source: TE tests/pytorch/attention/run_attention_with_cp.py get_tols L172-195 (docs/algorithm.md §10).
inline constexpr double kTeBf16Tolerance = 2.5e-2;
inline constexpr double kTeBf16GqaTolerance = 3.5e-2;
inline constexpr double kTeFp16Tolerance = 5e-3;

/// Multiplier on the same-precision non-CP baseline error in the emulated-format tolerance (below).
inline constexpr double kBaselineFactor = 2.0;

/// Error model of an fp32/bf16/fp16 run (relative L2 per tensor):
///   tol = kBaselineFactor · err(same-precision non-CP computation vs fp64 reference)
///       + err(the fp64 reference rounded once to the tensor's format)   ("the reference's rounding"),
/// capped for bf16 at kTeBf16Tolerance (kTeBf16GqaTolerance when gqa) and for fp16 at kTeFp16Tolerance.
/// Why: the CP schedule computes the same sums as one non-CP kernel but rounds at more points (every O_i, every
/// output-correction add, every dQ/dKV partial; docs/algorithm.md §4.4, §5.3); each is one rounding of a value of
/// the same magnitude, so for the ring sizes TE uses the CP error stays within a small multiple of the non-CP one,
/// while a schedule bug is O(1). fp64: kFp64RelL2Tolerance.
/// @param baseline_rel_l2  err of the non-CP computation in `dtype`; @param rounding_rel_l2 err of round(ref).
double emulated_tolerance(Dtype dtype, double baseline_rel_l2, double rounding_rel_l2, bool gqa);

/// ln(FLT_MAX) ≈ 88.72: logits above it cannot be exponentiated in fp32, so a correct kernel represents such rows
/// only through the shift by softmax_lse, and every probability exp(S − L) then carries the fp32 error of L
/// (half an ulp of |L| per rounding, ≥ 3.8e-6 absolute for 64 ≤ |L| < 128). docs/algorithm.md §10.1.
inline constexpr double kFp32ExpOverflowLogit = 88.72283905206835;

/// Multiplier, per (1 + log₂ P) for a p2p ring of P, on the same-precision non-CP baseline error that bounds a
/// precision-limited error when the fp32 LSE error dominates (lse_error_dominates): m = 8·(1 + log₂ P). Why: the CP
/// schedule rounds a row's fp32 L P times (its block, then P − 1 LSE merges) where the non-CP kernel rounds it once,
/// and dq, whose dS = P∘(dP − D) cancels almost completely for near-one-hot softmax rows, amplifies that error of
/// exp(S − L). Measured on the adversarial distribution in fp32 (5 seeds, dk 16-128, S 256-1024), dq / baseline
/// ≤ 8.5 at P = 2, 10.6 at P = 4, 15.2 at P = 8, 17.1 at P = 16: ≤ 4.25·(1 + log₂ P); 8 is about twice that
/// (docs/algorithm.md §10.1). A schedule error, O(1), is caught by the fp64 rerun whatever the bound.
inline constexpr double kLsePrecisionFactor = 8.0;

/// The baseline multiplier of a precision-limited bound (TensorError::precision_bound) for a run in `dtype` at this
/// logit range on a p2p ring of `p2p_size`: kLsePrecisionFactor·(1 + log₂ p2p_size) when lse_error_dominates, else
/// kBaselineFactor.
double precision_baseline_factor(Dtype dtype, double logit_range, int64_t p2p_size);

/// Whether the fp32 error of softmax_lse dominates a `dtype` run at this logit range (max |L|): the logits exceed
/// fp32 exp's range (logit_range > kFp32ExpOverflowLogit) and that error, u_fp32·logit_range, is at least the
/// format's own unit roundoff (precision.hpp unit_roundoff). True for fp32 beyond 88.72; false for bf16 (u = 2⁻⁸)
/// below |L| = 2⁻⁸/2⁻²⁴ = 65536 and fp16 (u = 2⁻¹¹) below 8192, where the format's rounding dominates and only
/// TE's cap can sit below the baseline; never for fp64.
bool lse_error_dominates(Dtype dtype, double logit_range);

/// The verdict of a verification: every tensor within tolerance; or the error exceeds the tolerance only where
/// these inputs exceed the run's precision (the schedule is exact in fp64 and the error is explained by the
/// non-CP baseline, see classify_precision); or a CP-attributable failure.
enum class VerifyVerdict { pass, precision_limited, fail };

/// "pass", "precision_limited", "fail".
std::string to_string(VerifyVerdict v);

/// Error of one tensor against its reference.
struct TensorError {
  std::string tensor;          ///< "out", "softmax_lse", "dq", "dk", "dv"
  std::vector<int64_t> shape;  ///< reference shape [B, S, heads, width]; softmax_lse [B, heads, S] (TE's layout)
  double max_abs_err = 0;      ///< max |x − ref| over compared (finite) entries
  /// max |x − ref| / max(|ref|, 1e-3·rms(ref)) over compared entries (the floor keeps near-zero reference
  /// entries from dominating); for an exactly zero reference, max_abs_err (as rel_l2_err, below)
  double max_rel_err = 0;
  double baseline_rel_l2_err = 0;  ///< rel L2 error of the same-precision non-CP run (0 for fp64 runs)
  double rounding_rel_l2_err = 0;  ///< rel L2 error of the reference rounded to this tensor's format
  /// [b, s, h, w] of the worst element: the first non-finite mismatch, else the largest |x − ref|
  std::vector<int64_t> worst_index;
  double worst_value = 0;      ///< x at worst_index
  double worst_reference = 0;  ///< ref at worst_index
  int64_t worst_cp_rank = -1;  ///< CP rank whose output binding holds worst_index (−1: unknown)
  /// ‖x − ref‖₂ / ‖ref‖₂ over compared entries; for an exactly zero reference (‖ref‖₂ = 0, e.g. dq and dk of
  /// one-token packed sequences) the RMS absolute error ‖x − ref‖₂ / √compared, the inputs being unit-scale
  double rel_l2_err = 0;
  double ref_l2_norm = 0;      ///< ‖ref‖₂ over compared entries
  double tolerance = 0;        ///< bound on rel_l2_err
  /// Bound on rel_l2_err under which a failing tensor is precision-limited rather than CP-attributable:
  /// m · baseline_rel_l2_err + rounding_rel_l2_err, m = precision_baseline_factor (kBaselineFactor, the uncapped
  /// tolerance, unless the fp32 LSE error dominates); 0 for fp64 runs, which have no precision excuse.
  double precision_bound = 0;
  int64_t compared = 0;        ///< entries with a finite reference (included in the norms)
  int64_t nonfinite = 0;       ///< entries that are NaN/±inf where they must not be, or whose −inf does not match
  /// nonfinite == 0 and the shapes match. When nonfinite > 0, max_abs_err, max_rel_err and rel_l2_err are NaN:
  /// the norm of a difference with a non-finite entry is not a number, and printing the finite part alone (0 when
  /// every entry is NaN) would read as a match.
  bool finite = false;
  bool pass = false;           ///< finite && compared > 0 (no vacuous pass) && rel_l2_err ≤ tolerance
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
  Dtype dtype = Dtype::fp64;  ///< precision of the run
  /// pass (every tensor passes), precision_limited (see classify_precision) or fail.
  VerifyVerdict verdict = VerifyVerdict::fail;
  /// Evidence of a precision_limited verdict (also filled for a fail it considered): max |softmax_lse| of the
  /// fp64 reference over finite rows (the inputs' logit range, natural-log units), and the largest rel_l2_err of
  /// the same schedule executed in fp64 by the CPU executor on the same inputs (−1: not run).
  double logit_range = 0;
  double fp64_schedule_rel_l2 = -1;
  /// Index in `tensors` of the worst tensor: the failing one with the largest rel_l2_err / tolerance
  /// (non-finite first), or the largest ratio overall when all pass; −1 when empty.
  int64_t worst_tensor = -1;
};

/// Options of verify_schedule.
struct VerifyOptions {
  uint64_t seed = 1234;
  std::string input_distribution = "clamped_normal";
  Dtype dtype = Dtype::fp64;  ///< precision emulated by the run (and by the non-CP baseline)
  int threads = 1;
  /// Optional head selection (oracle.heads): global head index, in the full model, of each q head and kv head
  /// of schedule.shape; inputs are generated at those indices of the full [B, S, full_heads, d] tensors so a
  /// subset sees exactly the values of the full run. Empty = identity.
  std::vector<int64_t> q_heads;
  std::vector<int64_t> kv_heads;
  int64_t full_heads_q = 0;
  int64_t full_heads_kv = 0;
  /// Optional, for a progress display (results never depend on it): called by verify_schedule_run with (units
  /// done, kVerifyStages · kVerifyStageUnits), each stage worth kVerifyStageUnits: the fp64 reference per head
  /// (from any thread of its OpenMP team, possibly concurrently), then at the end of the schedule's run and at the
  /// end (the baseline and the comparison). A runner may report its own part of the second stage.
  std::function<void(size_t done, size_t total)> progress = nullptr;
};

/// Stages verify_schedule_run reports through VerifyOptions::progress: reference, schedule run, baseline + compare.
constexpr size_t kVerifyStages = 3;
/// Progress units of one stage (VerifyOptions::progress).
constexpr size_t kVerifyStageUnits = 1000;

/// Everything one verification produced (for dumps): the inputs actually used, the fp64 reference and the run.
struct VerifyRun {
  AttentionInputs inputs;     ///< rounded to options.dtype
  AttentionOutputs reference;  ///< fp64 from `inputs`
  AttentionOutputs hcp;        ///< the schedule's gathered outputs
  VerifyReport report;
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

/// Like the 4-argument overload, at options.dtype: inputs rounded to dtype, fp64 reference from those rounded
/// inputs, the same-precision non-CP baseline (reference_attention at dtype), the executor at dtype, and
/// per-tensor tolerances from emulated_tolerance (kFp64RelL2Tolerance for fp64). Sets worst_* fields, including
/// the CP rank that owns the worst element, and the verdict (classify_precision; a non-fp64 run that fails with
/// finite tensors also runs the schedule in fp64 on the CPU executor for the evidence).
/// @throws InputError (key "oracle.input_distribution") for an unknown distribution, before any work.
VerifyRun verify_schedule_run(const Schedule& schedule, const VerifyOptions& options);

/// Sets report.verdict and each tensor's precision_bound from report.tensors (pass, tolerance, baseline and
/// rounding errors), report.dtype, report.p2p_size, `logit_range` and `fp64_schedule_rel_l2` (both stored in the report). The rule
/// (docs/algorithm.md §10.1): pass when every tensor passes; precision_limited when the run is not fp64, every
/// tensor is finite, the schedule run in fp64 on the same inputs is within kFp64RelL2Tolerance on every tensor
/// (0 ≤ fp64_schedule_rel_l2 ≤ 1e-10: no block, mask, merge or message is wrong), and every failing tensor has
/// rel_l2_err ≤ precision_bound; fail otherwise.
void classify_precision(VerifyReport& report, double logit_range, double fp64_schedule_rel_l2);

/// Executes a schedule on some backend (the CPU executor, the GPU backend, a host replay of the GPU plan) and
/// returns the gathered global outputs and counters (ExecutionResult). Must be deterministic for given inputs.
using ScheduleRunner = std::function<ExecutionResult(const Schedule&, const AttentionInputs&)>;

/// A reference loaded from an earlier run's dump (`hcpsim verify --reference cpu.h5`): its inputs and fp64
/// reference replace the generated ones.
struct GivenReference {
  const AttentionInputs* inputs = nullptr;
  const AttentionOutputs* reference = nullptr;
};

/// verify_schedule_run with `runner` in place of the CPU executor: the same inputs (generated from options.seed,
/// rounded to options.dtype) or `given.inputs`, the same fp64 reference (or `given.reference`), the same non-CP
/// baseline and tolerances, the same report. The runner receives the rounded inputs.
/// @throws InputError (key "oracle.input_distribution") for an unknown distribution, before any work; whatever
///   `runner` throws.
VerifyRun verify_schedule_run(const Schedule& schedule, const VerifyOptions& options, const ScheduleRunner& runner,
                              const GivenReference& given = {});

/// Fills worst_tensor of `report` (see VerifyReport) and each tensor's worst_cp_rank from `schedule`'s output
/// bindings.
void locate_worst(VerifyReport& report, const Schedule* schedule);

/// Multi-line human-readable summary: one line per tensor (errors printed with {:.17g}) and the verdict.
std::string to_string(const VerifyReport& report);

}  // namespace hcpsim
