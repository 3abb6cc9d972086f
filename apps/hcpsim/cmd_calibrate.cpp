#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>

#include "app_common.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/interop/megatron_log.hpp"
#include "hcpsim/step/calibration.hpp"

namespace hcpsim::app {
namespace {

struct CalibrateArgs {
  std::string csv;
  std::string gpu = "H100";
  std::string output;
};

/// The base GPU of a --gpu value: a GPU name (H100, H200, A100, B200, any case) or a preset name
/// (preset_of_gpu_name, the mapping check-log uses).
GpuSpec base_gpu(const std::string& name) {
  const auto preset = preset_of_gpu_name(name);
  if (const auto d = datasheet_gpu(name); !preset && d)
    throw InputError(SourceLoc{}, "--gpu",
                     "'" + name + "' is the " + d->name + ", which hcpsim knows by its datasheet peak only (" +
                         d->source + "), not as a cluster preset: the fit needs the GPU's whole model (HBM "
                         "bandwidth, launch overhead), and another GPU's would skew every efficiency",
                     "measure on a GPU with a preset (H100 SXM, H200, A100, B200), or write a cluster.gpu section "
                     "for this GPU in a scenario and time it with simulate");
  if (!preset) {
    std::string names;
    for (const auto& n : cluster_preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw InputError(SourceLoc{}, "--gpu", "unknown GPU '" + name + "'",
                     "use H100, H200, A100, B200 or a preset name (" + names + ")");
  }
  return cluster_preset(*preset, 1)->gpu;
}

int cmd_calibrate(const CalibrateArgs& a) {
  const GpuSpec base = base_gpu(a.gpu);
  const auto rows = read_measured_ops_csv(a.csv);
  if (a.output != "-") check_requested_outputs({{a.output, "-o", "calibration file"}});
  const auto fit = sim::fit_calibration(rows, base, a.csv);
  const std::string yaml = sim::calibration_yaml(fit, a.csv);
  fmt::print("calibrate {} on {} ({} timed row{}; alloc and free rows take no device time and are not read): used "
             "{}, skipped {} (communication)\n",
             a.csv, base.name, rows.size(), rows.size() == 1 ? "" : "s", fit.rows_used, fit.rows_skipped);
  fmt::print("  elementwise: {}  launch overhead {:.3f} us, effective HBM bandwidth {:.1f} GB/s\n",
             fit.fitted_elementwise ? "fitted" : "kept ", fit.gpu.kernel_launch_overhead_s * 1e6,
             fit.gpu.hbm_bandwidth_bytes_per_s / 1e9);
  fmt::print("  gemm bf16:   {}  efficiency {:.4f} (of a large GEMM)\n", fit.fitted_gemm_bf16 ? "fitted" : "kept ",
             fit.gpu.gemm_efficiency_bf16);
  fmt::print("  gemm fp8:    {}  efficiency {:.4f} (of a large GEMM)\n", fit.fitted_gemm_fp8 ? "fitted" : "kept ",
             fit.gpu.gemm_efficiency_fp8);
  fmt::print("  attention:   {} table points measured, {} filled from a neighbour (forward table {} points, {}; "
             "backward table {} points, {})\n",
             fit.attention_points, fit.filled_points, fit.gpu.attn_fwd_table.size(),
             fit.fitted_attn_fwd ? "fitted" : "kept from " + base.name, fit.gpu.attn_bwd_table.size(),
             fit.fitted_attn_bwd ? "fitted" : "kept from " + base.name);
  for (const auto& n : fit.notes) fmt::print("  note: {}\n", n);
  if (a.output.empty() || a.output == "-") {
    fmt::print("\n{}", yaml);
  } else {
    write_output_file(a.output, yaml, "calibration file", "-o");
    fmt::print("  wrote {} (include it with cluster.gpu.calibration: {})\n", a.output, a.output);
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_calibrate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("calibrate", "fit the compute cost model from a measured per-op CSV");
  auto a = std::make_shared<CalibrateArgs>();
  cmd->add_option("measured_csv", a->csv, "per-op CSV (op_kind, dtype, shape columns, bytes, flops, measured_s)")
      ->required();
  cmd->add_option("--gpu", a->gpu, "GPU the CSV was measured on: H100 (default), H200, A100, B200 or a preset name");
  cmd->add_option("-o,--output", a->output, "calibration YAML to write (default: print it)");
  cmd->callback([&exit_code, a] { exit_code = cmd_calibrate(*a); });
  return cmd;
}

}  // namespace hcpsim::app
