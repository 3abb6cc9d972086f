#include "verify_setup.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include <fmt/core.h>

#include "admission.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/gpu/host_replay.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/isolated_read.hpp"
#include "hcpsim/oracles/precision.hpp"
#include "hcpsim/oracles/verify.hpp"

namespace hcpsim::app {

namespace {

/// The GPU-only options need --backend gpu; with it, the dtype, --devices and --kernels must be ones the GPU
/// backend runs. @throws InputError naming the option and the fix.
void check_backend_options(const Scenario& s, const VerifyArgs& args, Dtype dtype) {
  const bool on_gpu = args.backend == "gpu";
  if (!on_gpu) {
    for (const auto& [given, option] : {std::pair{!args.trace_path.empty(), "--trace"},
                                         std::pair{!args.ops_csv_path.empty(), "--ops-csv"},
                                         std::pair{args.devices != 1, "--devices"},
                                         std::pair{args.kernels != "auto", "--kernels"}}) {
      if (given)
        throw InputError(SourceLoc{}, option, "only the GPU backend measures devices and kernels",
                         std::string("add --backend gpu or drop ") + option);
    }
  }
  if (on_gpu) {
    if (dtype == Dtype::fp64 && args.dtype.empty())
      throw InputError(s.loc("oracle.dtype"), "oracle.dtype", "the GPU backend computes in fp32, bf16 or fp16, not fp64",
                       "pass --dtype fp32 (or bf16, fp16), or use --backend cpu for fp64");
    gpu::check_gpu_dtype(dtype);
    if (args.devices < 1)
      throw InputError(SourceLoc{}, "--devices", "must be at least 1", "use --devices 1 (all CP ranks on one GPU)");
    if (args.kernels != "auto" && args.kernels != "clear")
      throw InputError(SourceLoc{}, "--kernels", "unknown kernel choice '" + args.kernels + "'",
                       "use --kernels auto (tensor cores where supported) or clear");
    if (args.devices >= 2 && args.devices != s.parallel.context_parallel_size)
      throw InputError(SourceLoc{}, "--devices",
                       fmt::format("{} GPUs for context_parallel_size {}: NCCL runs one CP rank per GPU", args.devices,
                                   s.parallel.context_parallel_size),
                       fmt::format("use --devices {} or --devices 1 (all ranks on one GPU)",
                                   s.parallel.context_parallel_size));
  }
}

}  // namespace

VerifySetup prepare_verify(const Common& c, const VerifyArgs& args) {
  VerifySetup v;
  v.scenario = load_scenario(c.scenario_path, c.overrides);
  const Scenario& s = v.scenario;
  if (args.backend != "cpu" && args.backend != "gpu")
    throw InputError(SourceLoc{}, "--backend", "unknown backend '" + args.backend + "'", "use --backend cpu or gpu");
  check_thread_count(args.threads, "--threads");
  const uint64_t max_memory = max_memory_limit(args.max_memory);
  Dtype& dtype = v.dtype;
  dtype = s.oracle.dtype;
  if (!args.dtype.empty()) {
    const auto d = parse_dtype(args.dtype);
    if (!d) throw InputError(SourceLoc{}, "--dtype", "unknown dtype '" + args.dtype + "'", "use fp64, fp32, bf16 or fp16");
    dtype = *d;
  }
  std::optional<FaultKind>& fault = v.fault;
  std::string inject_name = !args.inject.empty() ? args.inject : s.oracle.inject.value_or("");
  if (!inject_name.empty()) {
    fault = parse_fault_kind(inject_name);
    if (!fault)
      throw InputError(args.inject.empty() ? s.loc("oracle.inject") : SourceLoc{}, "--inject",
                       "unknown fault injector '" + inject_name + "'",
                       "use one of the names printed by 'hcpsim verify --inject list'");
  }
  v.report = validate_scenario(s, ValidationScope::attention);
  check_verifiable(s);
  admit_verify(s, dtype, args.threads, max_memory);  // before any tensor or dump is read
  v.on_gpu = args.backend == "gpu";
  const bool on_gpu = v.on_gpu;
  check_backend_options(s, args, dtype);
  if (!args.reference_path.empty()) {
    v.reference.dump = read_dump_isolated(args.reference_path);
    v.reference.loaded = true;
  }
  GpuVerifyOptions& gpu_options = v.gpu_options;
  gpu_options.devices = args.devices;
  gpu_options.tensor_cores = args.kernels == "auto";
  gpu_options.dtype = dtype;
  if (on_gpu) require_gpu(gpu_options);      // exit 3 before any CPU work on a host without a GPU
  return v;
}

/// Checks that a reference dump matches the problem the scenario defines: dtype, seed, input distribution, mask,
/// softmax scale and tensor shapes (the reference is a function of exactly these).
void check_reference(const DumpContents& d, const std::string& path, const AttentionShape& shape, Dtype dtype,
                     uint64_t seed, const std::string& input_distribution) {
  auto fail = [&](const std::string& what, const std::string& fix) {
    throw InputError(SourceLoc{path, 0, 0, ""}, "--reference", what, fix);
  };
  if (d.dtype != dtype)
    fail("the dump was made in " + to_string(d.dtype) + ", the run is " + to_string(dtype),
         "make the reference with 'hcpsim verify ... --dtype " + to_string(dtype) + " --dump FILE' or pass --dtype " +
             to_string(d.dtype));
  const auto& q = d.inputs.q.shape();
  const auto& k = d.inputs.k.shape();
  const auto& v = d.inputs.v.shape();
  if (q[0] != shape.batch || q[1] != shape.seq_length || q[2] != shape.heads_q || q[3] != shape.head_dim_qk ||
      k[2] != shape.heads_kv)
    fail(fmt::format("the dump's q is [{}, {}, {}, {}] with {} kv heads, the scenario needs [{}, {}, {}, {}] with {}",
                     q[0], q[1], q[2], q[3], k[2], shape.batch, shape.seq_length, shape.heads_q, shape.head_dim_qk,
                     shape.heads_kv),
         "use a dump of the same scenario, overrides and oracle.heads");
  if (v[3] != shape.head_dim_v)  // read_dump checked k, v and do against q; the value width is v's own
    fail(fmt::format("the dump's v has head dim {}, the scenario's kv_channels_v is {}", v[3], shape.head_dim_v),
         "use a dump of the same scenario and overrides");
  // Exact when the dump stores an integer seed; a float64 one (earlier dumps) is compared as the double it holds.
  const auto it = d.meta_number.find("seed");
  std::optional<uint64_t> dumped = d.seed;
  if (!dumped && it != d.meta_number.end() && it->second != static_cast<double>(seed))
    dumped = static_cast<uint64_t>(it->second);
  if (dumped && *dumped != seed)
    fail(fmt::format("the dump was made with seed {}, the scenario's oracle.seed is {}", *dumped, seed),
         fmt::format("pass oracle.seed={} or use a dump made with seed {}", *dumped, seed));
  const auto dist = d.meta_text.find("input_distribution");
  if (dist != d.meta_text.end() && dist->second != input_distribution)
    fail("the dump's inputs are " + dist->second + ", the scenario's oracle.input_distribution is " + input_distribution,
         "pass oracle.input_distribution=" + dist->second + " or use a dump made with " + input_distribution);
  const auto causal = d.meta_number.find("causal");
  if (causal != d.meta_number.end() && (causal->second != 0) != shape.causal)
    fail(std::string("the dump's reference is ") + (causal->second != 0 ? "causal" : "unmasked") +
             ", the scenario's attention is " + (shape.causal ? "causal" : "unmasked"),
         "use a dump made with the same model.attn_mask_type");
  const auto scale = d.meta_number.find("softmax_scale");
  const double want_scale = effective_softmax_scale(shape);
  if (scale != d.meta_number.end() && scale->second > 0 && std::fabs(scale->second - want_scale) > 1e-12 * want_scale)
    fail(fmt::format("the dump's softmax_scale is {:.17g}, the scenario's is {:.17g}", scale->second, want_scale),
         "use a dump made with the same kv_channels and softmax scale");
  const std::vector<int64_t> want_cu = shape.packing.thd() ? shape.packing.cu_seqlens() : std::vector<int64_t>{};
  const std::vector<int64_t> want_padded =
      shape.packing.thd() ? shape.packing.cu_seqlens_padded() : std::vector<int64_t>{};
  if (d.thd.cu_seqlens != want_cu || d.thd.cu_seqlens_padded != want_padded)
    fail(std::string("the dump's packed sequences (/meta/cu_seqlens, cu_seqlens_padded) differ from the scenario's") +
             (shape.packing.thd() ? "" : " (the scenario has none)"),
         "use a dump made with the same packed sequences");
}

void check_reference_inputs(const AttentionInputs& dumped, const std::string& path, const AttentionShape& shape,
                            const VerifyOptions& options, Dtype dtype) {
  AttentionInputs mine = make_attention_inputs(options.seed, shape, options.input_distribution, options.q_heads,
                                               options.kv_heads, options.full_heads_q, options.full_heads_kv,
                                               options.threads);
  const std::pair<const char*, std::pair<HostTensor*, const HostTensor*>> tensors[] = {
      {"q", {&mine.q, &dumped.q}}, {"k", {&mine.k, &dumped.k}}, {"v", {&mine.v, &dumped.v}},
      {"do", {&mine.dout, &dumped.dout}}};
  for (const auto& [name, pair] : tensors) {
    HostTensor& a = *pair.first;
    const HostTensor& b = *pair.second;
    round_tensor(a, dtype);
    if (a.shape() != b.shape()) continue;  // check_reference names shape differences
    int64_t differ = 0, first = -1;
    for (int64_t i = 0; i < a.elements(); ++i)
      if (std::memcmp(a.data() + i, b.data() + i, sizeof(double)) != 0) {
        if (first < 0) first = i;
        ++differ;
      }
    if (differ == 0) continue;
    // A few values: the file was edited or damaged; most of them: other heads or another seed.
    const bool few = differ * 100 < a.elements();
    throw InputError(SourceLoc{path, 0, 0, ""}, "--reference",
                     fmt::format("the dump's /inputs/{} is not what this scenario generates: {} of its {} values "
                                 "differ (the first at flat index {}){}",
                                 name, differ, a.elements(), first,
                                 few ? ", so the file was edited or damaged after it was written"
                                     : " (same shape, other values: another oracle.heads, "
                                       "hierarchical_context_parallel_sizes or head counts selects other global heads)"),
                     few ? "write the dump again with 'hcpsim verify --dump', or run without --reference"
                         : "use a dump of this scenario with the same overrides, or run without --reference");
  }
}

void check_verifiable(const Scenario& s) {
  // The schedules and the reference compute full causal or unmasked attention: a PASS would not check the window.
  if (s.model.has_sliding_window())
    throw InputError(s.loc("model.window_size"), "model.window_size",
                     "verify does not model sliding windows: its schedules and its float64 reference compute full " +
                         std::string(s.model.attn_mask_type == AttnMaskType::causal ? "causal" : "unmasked") +
                         " attention, so a PASS would not check the window",
                     "verify with window_size: [-1, 0] (causal) or [-1, -1] (no mask)");
}

std::string injector_list() {
  std::string text;
  for (FaultKind k : all_fault_kinds()) text += fmt::format("  {:<24} {}\n", to_string(k), describe(k));
  return text;
}

}  // namespace hcpsim::app
