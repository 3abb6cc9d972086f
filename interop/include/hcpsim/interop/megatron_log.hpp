#pragma once
/// Reading a Megatron-LM training log and checking what it reports about hierarchical context parallelism and
/// throughput. Formats (learned from Megatron-LM, never copied):
///  - megatron/training/arguments.py validate_args prints, on rank 0,
///    `using world size: W, data-parallel size: D, context-parallel size: C, hierarchical context-parallel sizes: H`
///    directly followed (no separator) by `tensor-model-parallel size: T, ..., pipeline-model-parallel size: P, ...`;
///    H is Python's repr (`None` or `[8, 2]`). Older releases print only world, data, tensor and pipeline sizes.
///  - arguments.py _print_args prints `------------------------ arguments ------------------------`, one
///    `  name ....... value` line per argument (dots pad the name to 48 characters; values are Python's str()),
///    and `-------------------- end of arguments ---------------------`.
///  - megatron/training/training.py training_log prints per logged iteration
///    ` [date time] iteration N/ M | ... | throughput per GPU (TFLOP/s/GPU): X | ...` (with --log-throughput),
///    then the averaged losses (` lm loss: 1.050000E+01 |`, Python's `{:.6E}`: a non-finite value prints `INF`;
///    a NaN or negative average is left out of the line), ` grad norm: X |` (`{:.3f}`: `nan`, `inf`) and
///    ` number of nan iterations: N |`, the iterations of the logging interval ending at N whose loss was NaN or
///    Inf when the optimizer skipped them (a loss scaler, fp16; bf16 skips none, so it stays 0). Megatron-Bridge's
///    training/utils/train_utils.py training_log prints the same fields.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hcpsim/interop/megatron_import.hpp"

namespace hcpsim {

/// The parallel sizes of the `using world size: ...` line.
struct WorldSizeReport {
  int line = 0;  ///< 1-based
  int64_t world_size = 0;
  int64_t data_parallel_size = 0;
  std::optional<int64_t> context_parallel_size;            ///< absent in releases before CP
  bool reports_hierarchical = false;                       ///< the line has a hierarchical sizes field
  std::optional<std::vector<int64_t>> hierarchical_sizes;  ///< absent when the field reads None
  int64_t tensor_model_parallel_size = 1;
  int64_t pipeline_model_parallel_size = 1;
};

/// One iteration line that reports throughput.
struct ThroughputReport {
  int line = 0;
  int64_t iteration = 0;
  double tflops_per_gpu = 0;  ///< TFLOP/s per GPU as Megatron printed it (model FLOPs / iteration time)
  std::optional<double> elapsed_ms;             ///< `elapsed time per iteration (ms): X` of the same line
  std::optional<int64_t> global_batch_size;     ///< `global batch size: N` of the same line
};

/// One iteration line that reports NaN or Inf: a non-zero `number of nan iterations` or a non-finite loss or grad
/// norm.
struct NanReport {
  int line = 0;
  int64_t iteration = 0;                ///< the N of `iteration N/ M`: the last iteration of the logging interval
  int64_t nan_iterations = 0;           ///< `number of nan iterations: K` of the line (0 when absent)
  std::vector<std::string> non_finite;  ///< the fields printed non-finite, as printed: "lm loss: NAN"
};

/// What hcpsim reads from a training log.
struct MegatronLog {
  std::string path;                      ///< as the user named it
  std::optional<WorldSizeReport> world;  ///< the first world-size line
  std::vector<MegatronArg> arguments;    ///< the arguments block (names as printed; values as printed)
  int arguments_begin_line = 0;          ///< 0 when the log has no arguments block
  int arguments_end_line = 0;
  std::vector<ThroughputReport> throughput;
  std::optional<std::string> gpu_name;  ///< "H100" / "H200" / "A100" / "B200" when a line names the GPU
  int gpu_line = 0;
  /// The tokenizer's vocabulary, from "> padded vocab (size: N) with K dummy tokens (new size: M)" (the N; Megatron
  /// pads it again itself). Absent when no such line.
  std::optional<int64_t> padded_vocab_size;
  int64_t iteration_lines = 0;        ///< lines of the form `iteration N/ M | ...` (training_log's), and NeMo
                                      ///< progress-bar lines with a `..._loss=` field
  std::vector<NanReport> nan_reports;  ///< the iteration lines that report NaN or Inf, in log order
  /// Throughput lines whose iteration is not above the one before: a run resumed from a checkpoint and appended
  /// to the log without its own world-size line and arguments (add_throughput_report). In log order.
  std::vector<ThroughputReport> resumed_at;
};

/// Appends throughput report `t` to `log.throughput`. When `t`'s iteration is not above the last one's (a resumed
/// run appended without a header), `t` goes into `log.resumed_at` and the earlier reports of the iterations it
/// repeats are dropped: each iteration counts once, with its latest report (the one the resumed run kept). Reports
/// without an iteration number (iteration 0) are always appended.
void add_throughput_report(MegatronLog& log, const ThroughputReport& t);

/// Parses a training log held in memory.
/// @param bytes         the file contents
/// @param display_name  the path for messages
/// @throws InputError naming the file and what is missing when it is empty, binary (a NUL byte, or more than 1%
/// control bytes other than tab, CR, LF, form feed and ANSI escape), has neither an arguments block nor a
/// world-size line (truncated, or not a Megatron log), or stops inside the arguments block.
/// @param first_line    the line number of the first line of `bytes` (> 1 when `bytes` is one run of a longer log,
///                      megatron_log_runs): every line number in the result counts from it.
MegatronLog parse_megatron_log(const std::string& bytes, const std::string& display_name, int first_line = 1);

/// The lines of one run in a log that several runs wrote to (a job restarted with `tee -a` or a scheduler's append
/// mode): [first_line, last_line], 1-based.
struct LogRunRange {
  int first_line = 1;
  int last_line = 0;
};

/// Splits a log into its runs. A run starts at its `using world size:` line or its arguments block, whichever
/// comes first (arguments.py prints the world-size line, then the arguments); a second world-size line, a
/// world-size line after an arguments block, or a second arguments block starts the next run. The lines before
/// the first run's markers belong to it, and so do the lines a next run prints before its own markers (a launcher's
/// warnings, nvidia-smi). One range over the whole text when the log holds one run (or none). No I/O, no errors.
std::vector<LogRunRange> megatron_log_runs(const std::string& bytes);

/// A problem the log shows, with its evidence line (0 = the file as a whole).
struct LogFinding {
  int line = 0;
  std::string message;
};

/// The dense bf16 peak a check compares against, and where it came from.
struct GpuPeak {
  double tflops = 0;    ///< TFLOP/s per GPU (1e12 FLOP/s)
  std::string source;   ///< e.g. "H100-SXM5-80GB, from --gpu H100", or the stated assumption
  bool assumed = false; ///< true when no scenario, option or log line named the GPU
  /// Dense FP8 TFLOP/s, the peak an FP8 run is held to (datasheet, preset or the scenario's cluster.gpu); 0 when
  /// the GPU has no FP8 tensor cores (A100) or its description gives no FP8 peak: an FP8 run is then held to the
  /// bf16 peak.
  double fp8_tflops = 0;
};

/// Maps a GPU or preset name to a cluster preset name: "H100" / "h100" / "H100-SXM5-80GB" → "dgx-h100", likewise
/// H200, A100, B200, and a preset name to itself. std::nullopt for anything else, including the GPUs of
/// datasheet_gpu_peak (an H100 PCIe is not the preset's H100 SXM5).
std::optional<std::string> preset_of_gpu_name(const std::string& name);

/// A GPU without a cluster preset whose dense BF16 peak its datasheet gives.
struct DatasheetGpu {
  std::string name;     ///< as NVIDIA names it, e.g. "H100 PCIe"
  double tflops = 0;    ///< dense BF16 Tensor Core TFLOP/s (the datasheet's "with sparsity" figure halved)
  std::string source;   ///< the datasheet
  std::string family;   ///< the cluster preset of the nearest GPU, e.g. "dgx-h100" (for placement rules only)
  double fp8_tflops = 0;  ///< dense FP8 Tensor Core TFLOP/s (datasheet "with sparsity" halved); 0: no FP8
};

/// The GPUs check-log knows by datasheet only: H100 PCIe, H100 NVL, GH200, H20, H800, A800, L40S. `name` is a GPU
/// name as a log or the user writes it ("NVIDIA H100 PCIe", "h20", "GH200"), case-insensitive. std::nullopt for
/// any other name (the preset GPUs included).
std::optional<DatasheetGpu> datasheet_gpu(const std::string& name);

/// The GPU a log line names (nvidia-smi -L, a framework's device line): a preset GPU ("H100", "H200", "A100",
/// "B200") or a datasheet_gpu name ("H100 PCIe", "GH200", ...), as a whole word; std::nullopt when none.
std::optional<std::string> gpu_named_in_line(const std::string& line);

/// (a) Hierarchical CP as configured versus as reported: a2a+p2p without hierarchical_context_parallel_sizes (the
/// legacy code then builds no hierarchical groups and training silently runs without CP), and hierarchical
/// sizes in the arguments that the world-size line does not show (None, or a context-parallel size of 1 or
/// another value). Evidence lines: the cp_comm_type / hierarchical sizes arguments and the world-size line.
/// @param args  the log's arguments block, interpreted (interpret_megatron_args with log_block = true)
std::vector<LogFinding> check_hierarchical_cp(const MegatronLog& log, const std::optional<MegatronConfig>& args);

/// Factor by which a reported TFLOP/s per GPU may exceed the whole-step model's prediction before it is a finding.
/// Source: assumption: a roofline step model is expected within ±30% of a healthy run; 1.5x leaves margin, so
/// only a FLOP count that does not match the work done (e.g. CP switched off) is flagged.
constexpr double kThroughputModelFactor = 1.5;

/// Fraction of the whole-step model's prediction below which a run's typical (median) reported TFLOP/s per GPU is
/// a finding: a slow node, a straggler link, or a configuration other than the one modelled.
/// Source: assumption: the whole-step model is a roofline estimate that runs ahead of measured Megatron runs (the
/// healthy fixture, Llama-3-8B at 128K with CP 16 on H100, reports 0.60x of the prediction from its own
/// arguments); 0.55x leaves margin below that gap, so a run at about half the prediction is flagged.
constexpr double kThroughputModelLowFactor = 0.55;

/// The peak a run is held to: `peak.fp8_tflops` when the run uses FP8 (TE fp8 GEMMs) and the GPU has FP8 tensor
/// cores, else the dense bf16 `peak.tflops`.
inline double held_peak_tflops(const GpuPeak& peak, bool fp8) {
  return fp8 && peak.fp8_tflops > 0 ? peak.fp8_tflops : peak.tflops;
}

/// (b) Reported throughput above the GPU's peak: one finding at the first offending iteration, naming how many
/// iterations exceed held_peak_tflops(peak, fp8) and the maximum.
std::vector<LogFinding> check_throughput_peak(const MegatronLog& log, const GpuPeak& peak, bool fp8);

/// (b) Reported throughput versus the whole-step model: one finding at the first iteration reporting more than
/// `factor` x `predicted_tflops_per_gpu`. Empty when the prediction is absent (the caller says it was not checked).
std::vector<LogFinding> check_throughput_vs_model(const MegatronLog& log,
                                                  std::optional<double> predicted_tflops_per_gpu,
                                                  double factor = kThroughputModelFactor);

/// (b) Reported throughput far below the whole-step model: one finding (at the first iteration below the limit)
/// when the median reported TFLOP/s per GPU, the first reporting iteration left out when there are more (it holds
/// the warm-up), is below `low_factor` x `predicted_tflops_per_gpu`. Empty without a prediction.
std::vector<LogFinding> check_throughput_below_model(const MegatronLog& log,
                                                     std::optional<double> predicted_tflops_per_gpu,
                                                     double low_factor = kThroughputModelLowFactor);

/// True when `text` (surrounding blanks ignored) spells a non-finite number as Python, C's printf or C++ print it:
/// `nan`, `NaN`, `NAN`, `-nan`, `nan(...)`, `inf`, `-INF`, `infinity`, with an optional sign. Such text is never
/// read as a number by the log parser.
bool is_non_finite_text(const std::string& text);

/// (e) NaN or Inf in training: one finding at the first iteration line that reports it, naming the iterations
/// counted by `number of nan iterations`, the lines with a non-finite loss or grad norm, and the first iteration.
/// With context parallelism (context_parallel_size > 1: the world-size line's, else the arguments') it points at
/// the known CP causes: a CP rank whose tokens are all padding or loss-masked gives 0/0 in the softmax and the loss
/// (NVIDIA/Megatron-LM#1764, NVIDIA-NeMo/Megatron-Bridge#2914), and a THD packed sequence whose half on a CP rank
/// is all padding gives NaN gradients in TE's fused attention backward (NVIDIA/TransformerEngine#2186). Without it
/// the finding says that the NaN is not CP-specific. Empty when no line reports NaN or Inf.
/// @param args  the log's arguments block, interpreted; std::nullopt when absent or rejected (the raw
///              context_parallel_size argument is then read)
std::vector<LogFinding> check_nan_iterations(const MegatronLog& log, const std::optional<MegatronConfig>& args);

}  // namespace hcpsim
