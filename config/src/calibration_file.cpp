#include "hcpsim/config/calibration_file.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace hcpsim {

namespace {

/// The shortest text that reads back as exactly `v` (fmt's default): 989.4, not 989.39999999999998.
std::string g17(double v) { return fmt::format("{}", v); }

/// A double-quoted scalar escaped by yaml-cpp's emitter: the rule of io/yaml_text.hpp (config does not use io).
std::string double_quoted(const std::string& text) {
  YAML::Emitter out;
  out << YAML::DoubleQuoted << text;
  return out.c_str();
}

}  // namespace

std::string calibration_file_yaml(const GpuSpec& g, const std::string& source_csv,
                                  const std::vector<std::string>& comment_lines) {
  std::string out;
  for (const auto& line : comment_lines) out += "# " + line + "\n";
  out += "source: " + double_quoted(source_csv) + "\n";
  out += "gpu:\n";
  out += "  name: " + double_quoted(g.name) + "\n";
  out += fmt::format("  peak_bf16_TFLOP_per_s: {}\n", g17(g.peak_bf16_flops_per_s / 1e12));
  if (g.peak_fp8_flops_per_s > 0) out += fmt::format("  peak_fp8_TFLOP_per_s: {}\n", g17(g.peak_fp8_flops_per_s / 1e12));
  out += fmt::format("  memory_GB: {}\n", g17(g.memory_bytes / 1e9));
  out += fmt::format("  hbm_bandwidth_GB_per_s: {}\n", g17(g.hbm_bandwidth_bytes_per_s / 1e9));
  out += fmt::format("  kernel_launch_overhead_us: {}\n", g17(g.kernel_launch_overhead_s * 1e6));
  out += fmt::format("  compute_slowdown_during_comm: {}\n", g17(g.compute_slowdown_during_comm));
  out += fmt::format("  gemm_efficiency_bf16: {}\n", g17(g.gemm_efficiency_bf16));
  out += fmt::format("  gemm_efficiency_fp8: {}\n", g17(g.gemm_efficiency_fp8));
  out += fmt::format("  fp8_split_accumulator_slowdown: {}\n", g17(g.fp8_split_accumulator_slowdown));
  out += fmt::format("  sm_count: {}\n", g.sm_count);
  out += fmt::format("  attn_wave_quantization: {}\n", g.attn_wave_quantization ? "true" : "false");
  out += fmt::format("  attn_fwd_efficiency: {}\n", g17(g.attn_fwd_efficiency));
  out += fmt::format("  attn_bwd_efficiency: {}\n", g17(g.attn_bwd_efficiency));
  for (const bool forward : {true, false}) {
    const auto& t = forward ? g.attn_fwd_table : g.attn_bwd_table;
    out += forward ? "  attn_fwd_table:" : "  attn_bwd_table:";
    if (t.empty()) {
      out += " []\n";
      continue;
    }
    out += "\n";
    for (const auto& p : t)
      out += fmt::format("    - {{head_dim: {}, q_rows: {}, kv_rows: {}, causal: {}, efficiency: {}}}\n", p.head_dim,
                         p.q_rows, p.kv_rows, p.causal ? "true" : "false", g17(p.efficiency));
  }
  return out;
}

}  // namespace hcpsim
