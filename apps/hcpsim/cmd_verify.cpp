#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "admission.hpp"
#include "app_common.hpp"
#include "gpu_runner.hpp"
#include "progress.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/cp_variant.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/io/provenance.hpp"
#include "hcpsim/oracles/dump.hpp"
#include "hcpsim/oracles/head_selection.hpp"
#include "hcpsim/oracles/oracle_cost.hpp"
#include "hcpsim/oracles/verify.hpp"
#include "report/verify_report.hpp"
#include "verify_setup.hpp"

namespace hcpsim::app {
namespace {

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
    const CpCommType type = cp_variant_for_hierarchical_sizes(A, P).comm_type;  // TE's p2p / a2a fallbacks
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

/// One `verify` run over the scenario's comm types: the backend, and what has been written so far.
class VerifyRunner {
 public:
  VerifyRunner(const VerifySetup& setup, const VerifyArgs& args, const Provenance& provenance)
      : setup_(setup), args_(args), provenance_(provenance), types_(buildable_types(setup.scenario)) {}

  /// The backend that executes schedules, at precision `d` (the bf16_accumulation report runs another dtype).
  ScheduleRunner runner_for(Dtype d) {
    if (setup_.on_gpu) {
      GpuVerifyOptions o = setup_.gpu_options;
      o.dtype = d;
      return make_gpu_runner(o, gpu_record_);
    }
    const int threads = args_.threads;
    // The main run's executor reports its ops as the second of the kVerifyStages stages of the display.
    ProgressReporter* progress = progress_;
    return [threads, d, progress](const Schedule& sc, const AttentionInputs& in) {
      ExecutionOptions o{threads, d, nullptr};
      if (progress != nullptr)
        o.progress = [progress](size_t done, size_t total) {
          progress->update(kVerifyStageUnits + kVerifyStageUnits * done / std::max<size_t>(total, 1));
        };
      return execute_schedule(sc, in, o);
    };
  }

  /// Verifies comm type `t`: prints its header, table and result, records its JSON, and writes the dump and the
  /// GPU measurements (with several comm types, a per-layer list, each type's to FILE.<type>, as simulate's
  /// --trace).
  void verify(CpCommType t);

  /// No comm type failed (each passed or was precision_limited): exit 0.
  [[nodiscard]] bool all_pass() const { return all_pass_; }
  /// "fail" if one failed, else "precision_limited" if one was, else "report" if every run was a measurement
  /// (bf16_accumulation), else "pass".
  [[nodiscard]] std::string result() const {
    return !all_pass_               ? "fail"
           : any_precision_limited_ ? "precision_limited"
           : any_judged_            ? "pass"
                                    : "report";
  }
  [[nodiscard]] const nlohmann::json& runs() const { return json_runs_; }

 private:
  void print_run_header(CpCommType t, const CpLayout& layout, const HeadSelection& sel) const;
  void write_measurements();
  void write_dump(CpCommType t, const CpLayout& layout, const HeadSelection& sel, const VerifyRun& run);

  const VerifySetup& setup_;
  const VerifyArgs& args_;
  const Provenance& provenance_;  ///< the effective scenario, with --dtype and --inject in its oracle block
  const std::vector<CpCommType> types_;  ///< the comm types this run verifies (type_suffix names their outputs)
  std::shared_ptr<GpuRunRecord> gpu_record_;  ///< the measurements of the latest GPU run
  ProgressReporter* progress_ = nullptr;  ///< the display of the comm type being verified (runner_for reads it)
  std::string suffix_;  ///< ".<type>" of the comm type being verified when the scenario has several, else ""
  bool all_pass_ = true, any_precision_limited_ = false;
  bool any_judged_ = false;  ///< some comm type got a verdict (not only a bf16_accumulation report)
  nlohmann::json json_runs_ = nlohmann::json::array();
};

void VerifyRunner::print_run_header(CpCommType t, const CpLayout& layout, const HeadSelection& sel) const {
  const Scenario& s = setup_.scenario;
  const AttentionShape full_shape = attention_shape(s);
  fmt::print("\nverify {} [A={}, P={}] on the {} in {} ({} virtual ranks, heads per TP rank {}/{}{}, seed {}, "
             "inputs {}, threads {}{})\n",
             to_string(t), layout.a2a_size(), layout.p2p_size(),
             setup_.on_gpu ? (args_.devices >= 2 ? fmt::format("GPU ({} GPUs, NCCL)", args_.devices)
                                                 : std::string("GPU (single-device backend)"))
                           : std::string("CPU"),
             to_string(setup_.dtype), layout.cp_size(), full_shape.heads_q, full_shape.heads_kv,
             sel.q_heads.empty() ? std::string()
                                 : fmt::format(", checking {}/{} (oracle.heads)", sel.shape.heads_q, sel.shape.heads_kv),
             s.oracle.seed, s.oracle.input_distribution, args_.threads,
             setup_.fault ? ", injected fault " + to_string(*setup_.fault) : std::string());
  // The naive merge exp(L) + exp(L_i) is exact arithmetic until a logit leaves exp's range: a PASS on other inputs
  // is the right verdict, not the oracle missing the fault.
  if (setup_.fault == FaultKind::naive_lse_merge && s.oracle.input_distribution != "adversarial")
    fmt::print("  note: naive_lse_merge goes wrong only when exp overflows (logits beyond 88.7 in fp32); {} inputs "
               "keep the logits far below that, so it computes the same attention and PASS is expected: use "
               "oracle.input_distribution=adversarial to see it fail\n",
               s.oracle.input_distribution);
}

void VerifyRunner::write_measurements() {
  fmt::print("  {}\n", describe_gpu_run(*gpu_record_));
  if (!args_.trace_path.empty()) {
    write_gpu_trace(args_.trace_path + suffix_, *gpu_record_, provenance_);
    fmt::print("  measured trace: {}\n", args_.trace_path + suffix_);
  }
  if (!args_.ops_csv_path.empty()) {
    write_gpu_ops_csv(args_.ops_csv_path + suffix_, *gpu_record_);
    fmt::print("  measured ops: {} (input of hcpsim calibrate)\n", args_.ops_csv_path + suffix_);
  }
}

void VerifyRunner::write_dump(CpCommType t, const CpLayout& layout, const HeadSelection& sel, const VerifyRun& run) {
  if (args_.dump_path.empty()) return;
  const Scenario& s = setup_.scenario;
  const auto& fault = setup_.fault;
  DumpContents d;
  d.dtype = setup_.dtype;
  d.inputs = run.inputs;
  d.reference = run.reference;
  d.hcp = run.hcp;
  d.metrics = run.report.tensors;
  const Provenance& p = provenance_;
  d.meta_text = {{"scenario_yaml", p.scenario_yaml},
                 {"scenario_digest", p.scenario_digest},
                 {"overrides", nlohmann::json(p.overrides).dump()},  // a JSON array of strings
                 {"dtype", to_string(setup_.dtype)},
                 {"backend", args_.backend},
                 {"hcpsim_version", p.hcpsim_version},
                 {"compiler", p.compiler},
                 {"x86_level", p.x86_level},
                 {"cuda", p.cuda ? "on" : "off"},
                 {"attn_mask_type", to_string(s.model.attn_mask_type)},
                 {"qkv_format", to_string(s.model.qkv_format)},
                 {"cp_comm_type", to_string(t)},
                 {"input_distribution", s.oracle.input_distribution},
                 {"inject", fault ? to_string(*fault) : std::string()}};
  if (setup_.on_gpu) {
    d.meta_text["gpu_backend"] = gpu_backend_name(*gpu_record_);
    d.meta_text["device"] = gpu_device_name(*gpu_record_);
  }
  d.meta_number = {{"seed", static_cast<double>(s.oracle.seed)},
                   {"a2a_size", static_cast<double>(layout.a2a_size())},
                   {"p2p_size", static_cast<double>(layout.p2p_size())},
                   {"causal", sel.shape.causal ? 1.0 : 0.0},
                   {"softmax_scale", sel.shape.softmax_scale}};
  d.seed = s.oracle.seed;
  d.thd = thd_dump_layout(sel.shape.packing, layout.a2a_size(), layout.p2p_size());
  if (sel.shape.packing.thd()) d.meta_number["pad_between_seqs"] = sel.shape.packing.pad_between_seqs ? 1.0 : 0.0;
  hcpsim::write_dump(args_.dump_path + suffix_, d);
  fmt::print("  dump: {}\n", args_.dump_path + suffix_);
}

void VerifyRunner::verify(CpCommType t) {
  const Scenario& s = setup_.scenario;
  suffix_ = type_suffix(types_, t);
  const auto& fault = setup_.fault;
  const Dtype dtype = setup_.dtype;
  const auto full_shape = attention_shape(s);
  const auto layout = cp_layout_for(s, t);
  const HeadSelection sel = select_heads(full_shape, layout.a2a_size(), s.oracle.heads);
  Schedule sched = build_schedule(t, layout, sel.shape);
  if (fault) sched = inject_fault(sched, *fault);
  VerifyOptions opt =
      verify_options(sel, full_shape, s.oracle.seed, s.oracle.input_distribution, dtype, args_.threads);
  ProgressReporter progress("verify " + to_string(t), kVerifyStages * kVerifyStageUnits, progress_settings());
  const OracleCost cost = estimate_oracle_cost(sel.shape, dtype, args_.threads, layout.cp_size());  // as admit_verify
  progress.announce(fmt::format("~{:.3g} GFLOP, ~{:.3g} GB peak, ~{} on {} thread{}", cost.flops / 1e9,
                                cost.bytes / 1e9, display_duration(cost.seconds), args_.threads,
                                args_.threads == 1 ? "" : "s"),
                    cost.seconds);
  opt.progress = progress_callback(&progress);
  const LoadedReference& loaded = setup_.reference;
  if (loaded.loaded) {
    check_reference(loaded.dump, args_.reference_path, sel.shape, dtype, s.oracle.seed, s.oracle.input_distribution);
    check_reference_inputs(loaded.dump.inputs, args_.reference_path, sel.shape, opt, dtype);
  }
  print_run_header(t, layout, sel);
  if (fault == FaultKind::bf16_accumulation) {
    const Dtype acc = (dtype == Dtype::bf16 || dtype == Dtype::fp16) ? dtype : Dtype::bf16;
    if (acc != dtype) fmt::print("  note: bf16_accumulation needs a 16-bit dtype; measuring with bf16\n");
    nlohmann::json j;
    j["cp_comm_type"] = to_string(t);
    j["inject"] = "bf16_accumulation";
    j["growth"] = report_accumulation_growth(s, t, sel.shape, acc, opt, runner_for(acc));
    json_runs_.push_back(j);
    fmt::print("  result: REPORT (bf16_accumulation is TE's real F16 behaviour: measured, not a failure)\n");
    return;
  }
  GivenReference given;
  if (loaded.loaded) {
    given.inputs = &loaded.dump.inputs;
    given.reference = &loaded.dump.reference;
  }
  progress_ = &progress;
  const ScheduleRunner runner = runner_for(dtype);
  progress_ = nullptr;
  const VerifyRun run = verify_schedule_run(sched, opt, runner, given);
  progress.finish();  // before the table, so that a terminal's bar line ends first
  const VerifyReport& v = run.report;
  print_table(v);
  if (setup_.on_gpu) write_measurements();
  print_result(v, dtype);
  json_runs_.push_back(report_json(v, fault ? to_string(*fault) : std::string()));
  json_runs_.back()["backend"] = args_.backend;
  if (setup_.on_gpu) {
    json_runs_.back()["gpu_backend"] = gpu_backend_name(*gpu_record_);
    json_runs_.back()["device"] = gpu_device_name(*gpu_record_);
  }
  write_dump(t, layout, sel, run);
  all_pass_ = all_pass_ && v.verdict != VerifyVerdict::fail;
  any_judged_ = true;
  any_precision_limited_ = any_precision_limited_ || v.verdict == VerifyVerdict::precision_limited;
}

int cmd_verify(const Common& c, const VerifyArgs& args) {
  if (args.inject == "list") {
    fmt::print("fault injectors (--inject NAME or oracle.inject: NAME):\n{}", injector_list());
    return kExitOk;
  }
  const VerifySetup setup = prepare_verify(c, args);
  const Scenario& s = setup.scenario;
  const auto types = buildable_types(s);
  if (setup.fault &&
      std::any_of(types.begin(), types.end(), [](CpCommType t) { return !cp_variant(t).takes_faults; }))
    throw InputError(s.loc("parallel.cp_comm_type"), "--inject", "fault injectors need a p2p, a2a or a2a+p2p schedule",
                     "drop --inject or use parallel.cp_comm_type=a2a+p2p");
  if (setup.fault == FaultKind::bf16_accumulation)
    for (const auto& [path, option] : {std::pair{args.dump_path, "--dump"}, std::pair{args.trace_path, "--trace"},
                                       std::pair{args.ops_csv_path, "--ops-csv"}})
      if (!path.empty())
        throw InputError(SourceLoc{}, option,
                         "bf16_accumulation measures how the dQ/dK/dV error grows over P = 1, 2, 4, 8 and runs no "
                         "single schedule whose results could be written there",
                         fmt::format("drop {}, or verify without --inject to write a run's {}", option, option));
  // With several comm types (a per-layer list) each writes its dump and measurements to FILE.<type>: those are the
  // paths to check before any work.
  std::vector<RequestedOutput> outputs{{args.json_path, "--json", "JSON summary"}};
  for (CpCommType t : types) {
    const std::string suffix = type_suffix(types, t);
    auto with = [&](const std::string& path) { return path.empty() ? path : path + suffix; };
    outputs.push_back({with(args.dump_path), "--dump", "dump", true});
    outputs.push_back({with(args.trace_path), "--trace", "trace"});
    outputs.push_back({with(args.ops_csv_path), "--ops-csv", "per-op CSV"});
  }
  check_requested_outputs(outputs);
  print_header(s);
  print_warnings(setup.report);
  // The effective scenario: the file after the overrides, with the --dtype and --inject the run used, so running
  // verify on it alone reproduces the run.
  Scenario effective = s;
  effective.oracle.dtype = setup.dtype;
  if (setup.fault) effective.oracle.inject = to_string(*setup.fault);
  const Provenance provenance = scenario_provenance(effective, c.overrides);
  VerifyRunner runner(setup, args, provenance);
  for (CpCommType t : types) runner.verify(t);
  if (!args.json_path.empty()) {
    nlohmann::json j;
    j["scenario"] = s.name;
    j["pass"] = runner.result() == "pass";
    j["result"] = runner.result();
    j["runs"] = runner.runs();
    write_output_file(args.json_path, with_provenance(j.dump(), provenance), "JSON summary", "--json");
  }
  return runner.all_pass() ? kExitOk : kExitFailed;
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
  args->threads = default_threads();
  cmd->add_option("--threads", args->threads, "CPU threads (default: every hardware thread; results are identical for any count)")
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
  add_max_memory_option(cmd, args->max_memory);
  add_quiet_flag(cmd);
  cmd->callback([&exit_code, common, args] {
    if (common->scenario_path.empty() && args->inject != "list")
      throw InputError(SourceLoc{}, "scenario", "missing scenario file", "run 'hcpsim verify SCENARIO.yaml'");
    exit_code = cmd_verify(*common, *args);
  });
  return cmd;
}

}  // namespace hcpsim::app
