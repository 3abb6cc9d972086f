#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cmath>

#include "app_common.hpp"
#include "hcpsim/core/scenario_loader.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/oracles/verify.hpp"
#if defined(HCPSIM_HAVE_CUDA)
#include "hcpsim/gpu/device_info.hpp"
#endif

namespace hcpsim::app {
namespace {

int cmd_verify(const Common& c, const std::string& backend, int threads) {
  Scenario s = load_scenario(c.scenario_path, c.overrides);
  if (backend != "cpu" && backend != "gpu")
    throw InputError(SourceLoc{}, "--backend", "unknown backend '" + backend + "'", "use --backend cpu or gpu");
  if (threads < 1) throw InputError(SourceLoc{}, "--threads", "must be at least 1", "use --threads 1 or more");
  const auto report = validate_scenario(s, ValidationScope::attention);
  if (backend == "gpu") {
#if defined(HCPSIM_HAVE_CUDA)
    const auto probe = gpu::probe_devices();
    if (probe.devices.empty()) throw DeviceError(probe.status);
    throw DeviceError("the GPU executor is not part of this version of hcpsim (found " +
                      std::to_string(probe.devices.size()) + " device(s)); use --backend cpu");
#else
    throw DeviceError("hcpsim was built without CUDA (HCPSIM_ENABLE_CUDA=OFF); use --backend cpu");
#endif
  }
  print_header(s);
  print_warnings(report);
  const auto types = buildable_types(s);
  const auto shape = attention_shape(s);
  if (s.oracle.dtype != Dtype::fp64)
    fmt::print("note: oracle.dtype is {}, but this version's CPU executor runs in fp64 only "
               "(no {} emulation yet); the comparison below is fp64 vs the fp64 reference\n",
               to_string(s.oracle.dtype), to_string(s.oracle.dtype));
  bool all_pass = true;
  for (CpCommType t : types) {
    const auto layout = cp_layout_for(s, t);
    const auto sched = build_schedule(t, layout, shape);
    fmt::print("\nverify {} [A={}, P={}] on the CPU in fp64 ({} virtual ranks, heads per TP rank {}/{}, seed {}, "
               "inputs {}, threads {})\n",
               to_string(t), layout.a2a_size(), layout.p2p_size(), layout.cp_size(), shape.heads_q, shape.heads_kv,
               s.oracle.seed, s.oracle.input_distribution, threads);
    const auto v = verify_schedule(sched, s.oracle.seed, s.oracle.input_distribution, threads);
    fmt::print("  {:<12} {:<22} {:>13} {:>13} {:>10}  {}\n", "tensor", "shape", "max_abs_err", "rel_l2_err",
               "tolerance", "result");
    for (const auto& e : v.tensors) {
      fmt::print("  {:<12} {:<22} {:>13.3e} {:>13.3e} {:>10.1e}  {}\n", e.tensor, join(e.shape), e.max_abs_err,
                 e.rel_l2_err, e.tolerance, e.pass ? "pass" : (e.finite ? "FAIL" : "FAIL (non-finite)"));
    }
    fmt::print("  result: {}\n", v.pass ? "PASS (HCP equals full attention)" : "FAIL");
    all_pass = all_pass && v.pass;
  }
  return all_pass ? kExitOk : kExitFailed;
}

}  // namespace

CLI::App* add_verify_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("verify", "run the HCP schedule numerically and compare with full attention");
  auto common = std::make_shared<Common>();
  auto backend = std::make_shared<std::string>("cpu");
  auto threads = std::make_shared<int>(1);
  add_scenario_args(cmd, *common);
  cmd->add_option("--backend", *backend, "cpu (Eigen, fp64) or gpu")->capture_default_str();
  cmd->add_option("--threads", *threads, "CPU threads (results are identical for any count)")->capture_default_str();
  cmd->callback([&exit_code, common, backend, threads] { exit_code = cmd_verify(*common, *backend, *threads); });
  return cmd;
}

}  // namespace hcpsim::app
