#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "app_common.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/oracles/dump.hpp"
#include "hcpsim/oracles/verify.hpp"
#include "hcpsim/gpu/host_replay.hpp"
#if defined(HCPSIM_HAVE_CUDA)
#include "gpu_runner.hpp"
#endif

namespace hcpsim::app {
namespace {

/// Options of `hcpsim verify` besides the scenario.
struct VerifyArgs {
  std::string backend = "cpu";
  int threads = 1;
  std::string dtype;   ///< empty: oracle.dtype
  std::string inject;  ///< empty: oracle.inject (or none); "list" prints the injectors
  std::string json_path;
  std::string dump_path;  ///< empty: no HDF5 dump
  int devices = 1;             ///< GPU backend: 1 = single-device, N = NCCL on N GPUs (one per CP rank)
  std::string kernels = "auto";  ///< GPU backend: auto (tensor cores where supported) | clear
  std::string reference_path;  ///< a dump whose inputs and fp64 reference replace the generated ones
  std::string trace_path;      ///< GPU backend: measured Chrome trace
  std::string ops_csv_path;    ///< GPU backend: measured per-op CSV (hcpsim calibrate input)
};

/// The inputs and reference of a `--reference` dump, checked against the run.
struct LoadedReference {
  DumpContents dump;
  bool loaded = false;
};

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
  if (q[0] != shape.batch || q[1] != shape.seq_length || q[2] != shape.heads_q || q[3] != shape.head_dim_qk ||
      k[2] != shape.heads_kv)
    fail(fmt::format("the dump's q is [{}, {}, {}, {}] with {} kv heads, the scenario needs [{}, {}, {}, {}] with {}",
                     q[0], q[1], q[2], q[3], k[2], shape.batch, shape.seq_length, shape.heads_q, shape.head_dim_qk,
                     shape.heads_kv),
         "use a dump of the same scenario, overrides and oracle.heads");
  const auto it = d.meta_number.find("seed");
  if (it != d.meta_number.end() && static_cast<uint64_t>(it->second) != seed)
    fail(fmt::format("the dump was made with seed {}, the scenario's oracle.seed is {}", static_cast<uint64_t>(it->second),
                     seed),
         fmt::format("pass oracle.seed={} or use a dump made with seed {}", static_cast<uint64_t>(it->second), seed));
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
}

/// Checks that an output path's directory exists, before any work (STYLE.md: validation before outputs).
void check_output_path(const std::string& path, const char* option) {
  if (path.empty()) return;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir))
    throw InputError(SourceLoc{}, option, "directory '" + dir.string() + "' does not exist",
                     "create it first or choose another path");
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string injector_list() {
  std::string text;
  for (FaultKind k : all_fault_kinds()) text += fmt::format("  {:<24} {}\n", to_string(k), describe(k));
  return text;
}

std::string element_text(const TensorError& e) {
  if (e.worst_index.size() != 4) return "-";
  return fmt::format("[b={}, s={}, h={}, w={}]", e.worst_index[0], e.worst_index[1], e.worst_index[2],
                     e.worst_index[3]);
}

void print_table(const VerifyReport& v) {
  fmt::print("  {:<12} {:<22} {:>11} {:>11} {:>11} {:>11} {:>10}  {}\n", "tensor", "shape", "max_abs_err",
             "max_rel_err", "rel_l2_err", "baseline", "tolerance", "result");
  for (const auto& e : v.tensors) {
    fmt::print("  {:<12} {:<22} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e} {:>10.2e}  {}\n", e.tensor, join(e.shape),
               e.max_abs_err, e.max_rel_err, e.rel_l2_err, e.baseline_rel_l2_err, e.tolerance,
               e.pass ? "pass" : (e.finite ? "FAIL" : "FAIL (non-finite)"));
  }
}

nlohmann::json report_json(const VerifyReport& v, const std::string& injected) {
  nlohmann::json j;
  j["cp_comm_type"] = to_string(v.cp_comm_type);
  j["a2a_size"] = v.a2a_size;
  j["p2p_size"] = v.p2p_size;
  j["dtype"] = to_string(v.dtype);
  j["seed"] = v.seed;
  j["input_distribution"] = v.input_distribution;
  j["inject"] = injected.empty() ? nlohmann::json(nullptr) : nlohmann::json(injected);
  j["heads_q"] = v.shape.heads_q;
  j["heads_kv"] = v.shape.heads_kv;
  j["pass"] = v.pass;
  nlohmann::json ts = nlohmann::json::array();
  for (const auto& e : v.tensors) {
    nlohmann::json t;
    t["tensor"] = e.tensor;
    t["shape"] = e.shape;
    t["max_abs_err"] = e.max_abs_err;
    t["max_rel_err"] = e.max_rel_err;
    t["rel_l2_err"] = e.rel_l2_err;
    t["baseline_rel_l2_err"] = e.baseline_rel_l2_err;
    t["rounding_rel_l2_err"] = e.rounding_rel_l2_err;
    t["tolerance"] = e.tolerance;
    t["nonfinite"] = e.nonfinite;
    t["pass"] = e.pass;
    t["worst_index"] = e.worst_index;
    t["worst_cp_rank"] = e.worst_cp_rank;
    ts.push_back(t);
  }
  j["tensors"] = ts;
  if (v.worst_tensor >= 0) j["worst_tensor"] = v.tensors[static_cast<size_t>(v.worst_tensor)].tensor;
  return j;
}

/// bf16_accumulation: dQ/dKV error with fp32 vs bf16 accumulators for P = 2, 4, 8 (where S allows) at A.
nlohmann::json report_accumulation_growth(const Scenario& s, CpCommType t, const AttentionShape& shape, Dtype dtype,
                                          const VerifyOptions& base, const ScheduleRunner& runner) {
  const CpLayout layout = cp_layout_for(s, t);
  const int64_t A = layout.a2a_size();
  nlohmann::json rows = nlohmann::json::array();
  fmt::print("  error growth with P (A={}, {} inputs; rel_l2 of dq / dk / dv, fp32 vs {} accumulators):\n", A,
             to_string(dtype), to_string(dtype));
  fmt::print("  {:>3}  {:>11} {:>11} {:>11}   {:>11} {:>11} {:>11}\n", "P", "dq fp32", "dk fp32", "dv fp32", "dq acc",
             "dk acc", "dv acc");
  for (int64_t P : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}}) {
    if (shape.seq_length % (2 * A * P) != 0) continue;
    const CpCommType type = A == 1 ? CpCommType::p2p : (P == 1 ? CpCommType::a2a : CpCommType::a2a_p2p);
    const Schedule good = build_schedule(type, CpLayout(A, P, shape.seq_length), shape);
    const Schedule bad = inject_fault(good, FaultKind::bf16_accumulation);
    VerifyOptions o = base;
    o.dtype = dtype;
    const VerifyReport g = verify_schedule_run(good, o, runner).report;
    const VerifyReport b = verify_schedule_run(bad, o, runner).report;
    fmt::print("  {:>3}  {:>11.3e} {:>11.3e} {:>11.3e}   {:>11.3e} {:>11.3e} {:>11.3e}\n", P, g.tensors[2].rel_l2_err,
               g.tensors[3].rel_l2_err, g.tensors[4].rel_l2_err, b.tensors[2].rel_l2_err, b.tensors[3].rel_l2_err,
               b.tensors[4].rel_l2_err);
    nlohmann::json r;
    r["P"] = P;
    r["fp32_accumulation"] = {g.tensors[2].rel_l2_err, g.tensors[3].rel_l2_err, g.tensors[4].rel_l2_err};
    r["dtype_accumulation"] = {b.tensors[2].rel_l2_err, b.tensors[3].rel_l2_err, b.tensors[4].rel_l2_err};
    rows.push_back(r);
  }
  return rows;
}

int cmd_verify(const Common& c, const VerifyArgs& args) {
  if (args.inject == "list") {
    fmt::print("fault injectors (--inject NAME or oracle.inject: NAME):\n{}", injector_list());
    return kExitOk;
  }
  Scenario s = load_scenario(c.scenario_path, c.overrides);
  if (args.backend != "cpu" && args.backend != "gpu")
    throw InputError(SourceLoc{}, "--backend", "unknown backend '" + args.backend + "'", "use --backend cpu or gpu");
  if (args.threads < 1) throw InputError(SourceLoc{}, "--threads", "must be at least 1", "use --threads 1 or more");
  Dtype dtype = s.oracle.dtype;
  if (!args.dtype.empty()) {
    const auto d = parse_dtype(args.dtype);
    if (!d) throw InputError(SourceLoc{}, "--dtype", "unknown dtype '" + args.dtype + "'", "use fp64, fp32, bf16 or fp16");
    dtype = *d;
  }
  std::optional<FaultKind> fault;
  std::string inject_name = !args.inject.empty() ? args.inject : s.oracle.inject.value_or("");
  if (!inject_name.empty()) {
    fault = parse_fault_kind(inject_name);
    if (!fault)
      throw InputError(args.inject.empty() ? s.loc("oracle.inject") : SourceLoc{}, "--inject",
                       "unknown fault injector '" + inject_name + "'",
                       "use one of the names printed by 'hcpsim verify --inject list'");
  }
  const auto report = validate_scenario(s, ValidationScope::attention);
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
  check_output_path(args.trace_path, "--trace");
  check_output_path(args.ops_csv_path, "--ops-csv");
  LoadedReference loaded;
  if (!args.reference_path.empty()) {
    loaded.dump = read_dump(args.reference_path);
    loaded.loaded = true;
  }
#if defined(HCPSIM_HAVE_CUDA)
  GpuVerifyOptions gpu_options;
  gpu_options.devices = args.devices;
  gpu_options.tensor_cores = args.kernels == "auto";
  gpu_options.dtype = dtype;
  std::shared_ptr<GpuRunRecord> gpu_record;  // the measurements of the latest GPU run
  if (on_gpu) require_gpu(gpu_options);      // exit 3 before any CPU work on a host without a GPU
#else
  if (on_gpu) throw DeviceError("hcpsim was built without CUDA (HCPSIM_ENABLE_CUDA=OFF); use --backend cpu");
#endif
  // The backend that executes schedules, at precision `d` (the bf16_accumulation report runs another dtype).
  auto runner_for = [&](Dtype d) -> ScheduleRunner {
#if defined(HCPSIM_HAVE_CUDA)
    if (on_gpu) {
      GpuVerifyOptions o = gpu_options;
      o.dtype = d;
      return make_gpu_runner(o, gpu_record);
    }
#endif
    const int threads = args.threads;
    return [threads, d](const Schedule& sc, const AttentionInputs& in) {
      return execute_schedule(sc, in, ExecutionOptions{threads, d});
    };
  };
  const auto types = buildable_types(s);
  if (fault && std::find(types.begin(), types.end(), CpCommType::all_gather) != types.end())
    throw InputError(s.loc("parallel.cp_comm_type"), "--inject", "fault injectors need a p2p, a2a or a2a+p2p schedule",
                     "drop --inject or use parallel.cp_comm_type=a2a+p2p");
  check_output_path(args.json_path, "--json");
  check_output_path(args.dump_path, "--dump");
  print_header(s);
  print_warnings(report);
  bool dumped = false;
  [[maybe_unused]] bool measured_written = false;
  const auto full_shape = attention_shape(s);
  nlohmann::json json_runs = nlohmann::json::array();
  bool all_pass = true;
  for (CpCommType t : types) {
    const auto layout = cp_layout_for(s, t);
    const HeadSelection sel = select_heads(s, full_shape, layout.a2a_size());
    Schedule sched = build_schedule(t, layout, sel.shape);
    if (fault) sched = inject_fault(sched, *fault);
    const VerifyOptions opt = verify_options(s, sel, full_shape, dtype, args.threads);
    if (loaded.loaded)
      check_reference(loaded.dump, args.reference_path, sel.shape, dtype, s.oracle.seed, s.oracle.input_distribution);
    fmt::print("\nverify {} [A={}, P={}] on the {} in {} ({} virtual ranks, heads per TP rank {}/{}{}, seed {}, "
               "inputs {}, threads {}{})\n",
               to_string(t), layout.a2a_size(), layout.p2p_size(),
               on_gpu ? (args.devices >= 2 ? fmt::format("GPU ({} GPUs, NCCL)", args.devices)
                                           : std::string("GPU (single-device backend)"))
                      : std::string("CPU"),
               to_string(dtype), layout.cp_size(),
               full_shape.heads_q, full_shape.heads_kv,
               sel.q_heads.empty() ? std::string()
                                   : fmt::format(", checking {}/{} (oracle.heads)", sel.shape.heads_q,
                                                 sel.shape.heads_kv),
               s.oracle.seed, s.oracle.input_distribution, args.threads,
               fault ? ", injected fault " + to_string(*fault) : std::string());
    if (fault == FaultKind::bf16_accumulation) {
      const Dtype acc = (dtype == Dtype::bf16 || dtype == Dtype::fp16) ? dtype : Dtype::bf16;
      if (acc != dtype) fmt::print("  note: bf16_accumulation needs a 16-bit dtype; measuring with bf16\n");
      nlohmann::json j;
      j["cp_comm_type"] = to_string(t);
      j["inject"] = "bf16_accumulation";
      j["growth"] = report_accumulation_growth(s, t, sel.shape, acc, opt, runner_for(acc));
      json_runs.push_back(j);
      fmt::print("  result: REPORT (bf16_accumulation is TE's real F16 behaviour: measured, not a failure)\n");
      continue;
    }
    GivenReference given;
    if (loaded.loaded) {
      given.inputs = &loaded.dump.inputs;
      given.reference = &loaded.dump.reference;
    }
    const VerifyRun run = verify_schedule_run(sched, opt, runner_for(dtype), given);
    const VerifyReport& v = run.report;
    print_table(v);
#if defined(HCPSIM_HAVE_CUDA)
    if (on_gpu) {
      fmt::print("  {}\n", describe_gpu_run(*gpu_record));
      if (!measured_written) {  // the first comm type of a per-layer list, like --dump
        if (!args.trace_path.empty()) {
          write_gpu_trace(args.trace_path, *gpu_record);
          fmt::print("  measured trace: {}\n", args.trace_path);
        }
        if (!args.ops_csv_path.empty()) {
          write_gpu_ops_csv(args.ops_csv_path, *gpu_record);
          fmt::print("  measured ops: {} (input of hcpsim calibrate)\n", args.ops_csv_path);
        }
        measured_written = true;
      }
    }
#endif
    if (v.pass) {
      fmt::print("  result: PASS (HCP equals full attention within the {} error model)\n", to_string(dtype));
    } else {
      const TensorError& w = v.tensors[static_cast<size_t>(v.worst_tensor)];
      fmt::print("  result: FAIL: worst tensor {} (rel_l2_err {:.3e} vs tolerance {:.2e}{}), cp_rank {}, element {}: "
                 "got {:.17g}, reference {:.17g}\n",
                 w.tensor, w.rel_l2_err, w.tolerance, w.finite ? "" : fmt::format(", {} non-finite", w.nonfinite),
                 w.worst_cp_rank, element_text(w), w.worst_value, w.worst_reference);
    }
    json_runs.push_back(report_json(v, fault ? to_string(*fault) : std::string()));
    json_runs.back()["backend"] = args.backend;
#if defined(HCPSIM_HAVE_CUDA)
    if (on_gpu) {
      json_runs.back()["gpu_backend"] = gpu_backend_name(*gpu_record);
      json_runs.back()["device"] = gpu_device_name(*gpu_record);
    }
#endif
    if (!args.dump_path.empty() && !dumped) {  // the first comm type of a per-layer list
      DumpContents d;
      d.dtype = dtype;
      d.inputs = run.inputs;
      d.reference = run.reference;
      d.hcp = run.hcp;
      d.metrics = v.tensors;
      d.meta_text = {{"scenario_yaml", read_text(s.source_path)},
                     {"dtype", to_string(dtype)},
                     {"backend", args.backend},
                     {"hcpsim_version", HCPSIM_VERSION_STRING},
                     {"x86_level", HCPSIM_X86_LEVEL_STRING},
                     {"attn_mask_type", to_string(s.model.attn_mask_type)},
                     {"qkv_format", to_string(s.model.qkv_format)},
                     {"cp_comm_type", to_string(t)},
                     {"input_distribution", s.oracle.input_distribution},
                     {"inject", fault ? to_string(*fault) : std::string()}};
#if defined(HCPSIM_HAVE_CUDA)
      if (on_gpu) {
        d.meta_text["gpu_backend"] = gpu_backend_name(*gpu_record);
        d.meta_text["device"] = gpu_device_name(*gpu_record);
      }
#endif
      d.meta_number = {{"seed", static_cast<double>(s.oracle.seed)},
                       {"a2a_size", static_cast<double>(layout.a2a_size())},
                       {"p2p_size", static_cast<double>(layout.p2p_size())},
                       {"causal", sel.shape.causal ? 1.0 : 0.0},
                       {"softmax_scale", sel.shape.softmax_scale}};
      write_dump(args.dump_path, d);
      dumped = true;
      fmt::print("  dump: {}\n", args.dump_path);
    }
    all_pass = all_pass && v.pass;
  }
  if (!args.json_path.empty()) {
    nlohmann::json j;
    j["scenario"] = s.name;
    j["pass"] = all_pass;
    j["runs"] = json_runs;
    write_output_file(args.json_path, j.dump(2) + "\n", "JSON summary", "--json");
  }
  return all_pass ? kExitOk : kExitFailed;
}

}  // namespace

CLI::App* add_verify_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("verify", "run the HCP schedule numerically and compare with full attention");
  auto common = std::make_shared<Common>();
  auto args = std::make_shared<VerifyArgs>();
  add_scenario_args(cmd, *common);
  // `--inject list` needs no scenario.
  cmd->get_option("scenario")->required(false);
  cmd->add_option("--backend", args->backend, "cpu (Eigen) or gpu")->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (results are identical for any count)")
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype,
                  "precision: fp64, fp32 (default, or oracle.dtype), bf16, fp16 (emulated at TE's rounding points); "
                  "never taken from params_dtype");
  cmd->add_option("--inject", args->inject, "inject a fault ('list' prints them):\n" + injector_list());
  cmd->add_option("--json", args->json_path, "also write the report as JSON to this file");
  cmd->add_option("--dump", args->dump_path, "write inputs, fp64 reference and HCP results to this HDF5 file");
  cmd->add_option("--reference", args->reference_path,
                  "take the inputs and fp64 reference from this dump (an earlier 'verify --dump' of the same scenario "
                  "and dtype) instead of computing them");
  cmd->add_option("--devices", args->devices,
                  "GPU backend: 1 = every CP rank on one GPU (device copies), N = one rank per GPU with NCCL (N must "
                  "equal context_parallel_size)")
      ->capture_default_str();
  cmd->add_option("--kernels", args->kernels,
                  "GPU backend: auto (tensor cores for bf16/fp16 where supported) or clear (the row kernels)")
      ->capture_default_str();
  cmd->add_option("--trace", args->trace_path, "GPU backend: write the measured timeline as a Chrome trace");
  cmd->add_option("--ops-csv", args->ops_csv_path,
                  "GPU backend: write the measured per-op CSV (input of 'hcpsim calibrate')");
  cmd->callback([&exit_code, common, args] {
    if (common->scenario_path.empty() && args->inject != "list")
      throw InputError(SourceLoc{}, "scenario", "missing scenario file", "run 'hcpsim verify SCENARIO.yaml'");
    exit_code = cmd_verify(*common, *args);
  });
  return cmd;
}

}  // namespace hcpsim::app
