// The `cluster.gpu` keys: peak rates, memory, attention efficiencies (scalars or tables), and a calibration file
// written by `hcpsim calibrate` whose `gpu:` section is read with the same keys.
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "hcpsim/core/input_file.hpp"
#include "scenario_sections.hpp"

namespace hcpsim {
namespace {

/// A list of {head_dim, q_rows, kv_rows, causal, efficiency}; per (causal, head_dim) the points must form a
/// full q_rows × kv_rows grid (the simulator interpolates on it). An empty list clears the table.
std::vector<EfficiencyPoint> read_efficiency_table(YamlReader& r, const YAML::Node& m, const std::string& P) {
  if (!m.IsSequence())
    r.fail(m, P, "expected a list of points",
           "write '" + P + ": [{head_dim: 128, q_rows: 4096, kv_rows: 4096, causal: false, efficiency: 0.7}, ...]'");
  std::vector<EfficiencyPoint> t;
  std::map<std::pair<bool, int64_t>, std::pair<std::set<int64_t>, std::set<int64_t>>> grids;
  std::map<std::pair<bool, int64_t>, size_t> counts;
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string ip = P + "[" + std::to_string(i) + "]";
    r.check_map(m[i], ip, {"head_dim", "q_rows", "kv_rows", "causal", "efficiency"});
    for (const char* k : {"head_dim", "q_rows", "kv_rows", "efficiency"})
      if (!m[i][k]) r.fail(m[i], ip, std::string("a point needs '") + k + "'", std::string("add '") + k + "'");
    EfficiencyPoint e;
    e.head_dim = r.get_int(m[i]["head_dim"], ip + ".head_dim");
    e.q_rows = r.get_int(m[i]["q_rows"], ip + ".q_rows");
    e.kv_rows = r.get_int(m[i]["kv_rows"], ip + ".kv_rows");
    if (e.head_dim < 1 || e.q_rows < 1 || e.kv_rows < 1)
      r.fail(m[i], ip, "head_dim, q_rows and kv_rows must be ≥ 1", "give the block shape in rows and the head dim");
    if (m[i]["causal"]) e.causal = r.get_bool(m[i]["causal"], ip + ".causal");
    e.efficiency = r.plausible(m[i]["efficiency"], ip + ".efficiency", plausible::kEfficiency);
    auto& grid = grids[{e.causal, e.head_dim}];
    grid.first.insert(e.q_rows);
    grid.second.insert(e.kv_rows);
    ++counts[{e.causal, e.head_dim}];
    t.push_back(e);
  }
  for (const auto& [k, grid] : grids)
    if (grid.first.size() * grid.second.size() != counts[k])
      r.fail(m, P,
             "the points of head_dim " + std::to_string(k.second) + (k.first ? " (causal)" : "") +
                 " do not form a full q_rows x kv_rows grid (or repeat a point)",
             "give one point for every combination of the listed q_rows and kv_rows");
  return t;
}

/// The GPU keys shared by cluster.gpu and a calibration file's `gpu:` section.
void read_gpu_fields(YamlReader& r, const YAML::Node& m, const std::string& P, GpuSpec& g) {
  if (m["name"]) g.name = r.get_string(m["name"], P + ".name");
  if (m["peak_bf16_TFLOP_per_s"])
    g.peak_bf16_flops_per_s = r.plausible(m["peak_bf16_TFLOP_per_s"], P + ".peak_bf16_TFLOP_per_s", plausible::kPeakBf16) * 1e12;
  if (m["memory_GB"]) g.memory_bytes = r.plausible(m["memory_GB"], P + ".memory_GB", plausible::kMemory) * 1e9;
  if (m["hbm_bandwidth_GB_per_s"])
    g.hbm_bandwidth_bytes_per_s =
        r.plausible(m["hbm_bandwidth_GB_per_s"], P + ".hbm_bandwidth_GB_per_s", plausible::kHbmBandwidth) * 1e9;
  for (const char* key : {"attn_fwd_efficiency", "attn_bwd_efficiency"}) {
    if (!m[key]) continue;
    const double e = r.plausible(m[key], P + "." + key, plausible::kEfficiency);
    (std::string(key) == "attn_fwd_efficiency" ? g.attn_fwd_efficiency : g.attn_bwd_efficiency) = e;
    // A scalar efficiency replaces the preset's table for that direction.
    (std::string(key) == "attn_fwd_efficiency" ? g.attn_fwd_table : g.attn_bwd_table).clear();
  }
  for (const char* key : {"attn_fwd_table", "attn_bwd_table"})
    if (m[key]) (std::string(key) == "attn_fwd_table" ? g.attn_fwd_table : g.attn_bwd_table) =
                    read_efficiency_table(r, m[key], P + "." + key);
  if (m["kernel_launch_overhead_us"])
    g.kernel_launch_overhead_s =
        r.plausible(m["kernel_launch_overhead_us"], P + ".kernel_launch_overhead_us", plausible::kLaunchOverhead) / 1e6;
  if (m["compute_slowdown_during_comm"])
    g.compute_slowdown_during_comm =
        r.plausible(m["compute_slowdown_during_comm"], P + ".compute_slowdown_during_comm", plausible::kSlowdown);
  if (m["peak_fp8_TFLOP_per_s"])
    g.peak_fp8_flops_per_s = r.plausible(m["peak_fp8_TFLOP_per_s"], P + ".peak_fp8_TFLOP_per_s", plausible::kPeakFp8) * 1e12;
  // gemm_efficiency is the key of files written before BF16 and FP8 GEMMs had separate efficiencies; it meant
  // the BF16 one (read_gpu's provenance line says so).
  if (m["gemm_efficiency"] && m["gemm_efficiency_bf16"])
    r.fail(m["gemm_efficiency"], P + ".gemm_efficiency", "given together with gemm_efficiency_bf16, which replaces it",
           "keep only '" + P + ".gemm_efficiency_bf16'");
  for (const char* key : {"gemm_efficiency", "gemm_efficiency_bf16", "gemm_efficiency_fp8"}) {
    if (!m[key]) continue;
    const double e = r.plausible(m[key], P + "." + key, plausible::kEfficiency);
    (std::string(key) == "gemm_efficiency_fp8" ? g.gemm_efficiency_fp8 : g.gemm_efficiency_bf16) = e;
  }
  if (m["fp8_split_accumulator_slowdown"])
    g.fp8_split_accumulator_slowdown = r.plausible(m["fp8_split_accumulator_slowdown"],
                                                   P + ".fp8_split_accumulator_slowdown", plausible::kSlowdown);
  if (m["attn_wave_quantization"])
    g.attn_wave_quantization = r.get_bool(m["attn_wave_quantization"], P + ".attn_wave_quantization");
  if (m["sm_count"]) {
    g.sm_count = r.get_int(m["sm_count"], P + ".sm_count");
    if (g.sm_count < 0 || g.sm_count > 100000)
      r.fail(m["sm_count"], P + ".sm_count", "must be in [0, 100000]",
             "give the GPU's streaming multiprocessors (132 on H100 SXM5), or 0 for no wave quantization");
  }
}

/// cluster.gpu.calibration: a file written by `hcpsim calibrate` (path relative to the scenario file), whose
/// `gpu:` section sets the GPU fields before the other keys of cluster.gpu (which win).
void read_calibration(YamlReader& r, const YAML::Node& n, const std::string& P, GpuSpec& gpu) {
  const std::string rel = r.get_string(n, P);
  std::filesystem::path path(rel);
  const std::string file = r.file();
  if (path.is_relative() && !file.empty() && !std::filesystem::path(file).parent_path().empty())
    path = std::filesystem::path(file).parent_path() / path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    r.fail(n, P, "calibration file '" + path.string() + "' is not a regular file",
           "give a path relative to the scenario file, written by 'hcpsim calibrate MEASURED.csv -o FILE'");
  // A calibration file is a few hundred lines; refuse anything huge rather than read it into memory.
  constexpr std::uintmax_t kMaxCalibrationBytes = std::uintmax_t{64} << 20;
  if (std::filesystem::file_size(path, ec) > kMaxCalibrationBytes)
    r.fail(n, P, "calibration file '" + path.string() + "' is larger than 64 MiB", "give a file written by 'hcpsim calibrate'");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path.string());
  } catch (const YAML::BadFile&) {
    r.fail(n, P, "cannot open calibration file '" + path.string() + "'",
           "give a path relative to the scenario file, written by 'hcpsim calibrate MEASURED.csv -o FILE'");
  } catch (const YAML::Exception& e) {
    r.fail(n, P, "calibration file '" + path.string() + "' is not valid YAML (" + e.msg + ")",
           "regenerate it with 'hcpsim calibrate'");
  }
  if (!root.IsMap() || !root["gpu"] || !root["gpu"].IsMap())
    r.fail(n, P, "calibration file '" + path.string() + "' has no 'gpu:' section",
           "regenerate it with 'hcpsim calibrate'");
  note_input_file(path.string());  // no output of this command may replace it
  // Errors inside the calibration file name that file (keys keep their cluster.gpu.* paths).
  const std::string scenario_file = r.file();
  r.set_file(path.string());
  r.set_echo_contents(false);
  const std::string cp = "cluster.gpu";
  const YAML::Node g = root["gpu"];
  r.check_map(g, cp, {"name", "peak_bf16_TFLOP_per_s", "memory_GB", "hbm_bandwidth_GB_per_s", "attn_fwd_efficiency",
                      "attn_bwd_efficiency", "kernel_launch_overhead_us", "compute_slowdown_during_comm",
                      "attn_fwd_table", "attn_bwd_table", "peak_fp8_TFLOP_per_s", "gemm_efficiency",
                      "gemm_efficiency_bf16", "gemm_efficiency_fp8", "fp8_split_accumulator_slowdown", "sm_count", "attn_wave_quantization"});
  read_gpu_fields(r, g, cp, gpu);
  // Calibrated attention efficiencies are fitted from measured kernels at their own shapes, so their wave
  // quantization is already in them; the preset's SM count would count it twice.
  for (const char* key : {"attn_fwd_efficiency", "attn_bwd_efficiency", "attn_fwd_table", "attn_bwd_table"})
    if (g[key]) gpu.attn_wave_quantization = false;
  r.set_file(scenario_file);
  r.set_echo_contents(true);
  std::string what = path.string();
  if (root["source"] && root["source"].IsScalar()) what += " (fitted from " + root["source"].as<std::string>() + ")";
  gpu.calibration = "calibrated: " + what;
}

}  // namespace

void read_gpu(YamlReader& r, const YAML::Node& m, const std::string& P, bool all_required, GpuSpec& g) {
  const std::vector<std::string> keys{"name", "peak_bf16_TFLOP_per_s", "memory_GB", "hbm_bandwidth_GB_per_s",
                                      "attn_fwd_efficiency", "attn_bwd_efficiency"};
  std::vector<std::string> allowed = keys;
  allowed.insert(allowed.end(),
                 {"kernel_launch_overhead_us", "compute_slowdown_during_comm", "attn_fwd_table", "attn_bwd_table",
                  "peak_fp8_TFLOP_per_s", "gemm_efficiency", "gemm_efficiency_bf16", "gemm_efficiency_fp8",
                  "fp8_split_accumulator_slowdown", "sm_count", "attn_wave_quantization", "calibration"});
  r.check_map(m, P, allowed);
  if (m["calibration"]) read_calibration(r, m["calibration"], P + ".calibration", g);
  if (all_required && !m["calibration"])
    for (const auto& k : keys)
      if (!m[k]) r.fail(m, P, "explicit gpu without '" + k + "'", "add '" + P + "." + k + "'");
  read_gpu_fields(r, m, P, g);
  // The provenance line names what the scenario itself set, so a preset's or calibration file's description
  // ("GEMM efficiency 0.7") is never left standing for a value the scenario replaced.
  std::string set_here;
  for (const char* key : {"peak_bf16_TFLOP_per_s", "peak_fp8_TFLOP_per_s", "memory_GB", "hbm_bandwidth_GB_per_s",
                          "gemm_efficiency", "gemm_efficiency_bf16", "gemm_efficiency_fp8", "fp8_split_accumulator_slowdown", "sm_count", "attn_wave_quantization",
                          "attn_fwd_efficiency", "attn_bwd_efficiency", "attn_fwd_table",
                          "attn_bwd_table", "kernel_launch_overhead_us", "compute_slowdown_during_comm"}) {
    if (!m[key]) continue;
    // Appends rather than `"literal" + std::string`, which trips GCC 12's -Wrestrict false positive at -O3.
    if (!set_here.empty()) set_here.append(", ");
    set_here.append(key);
    if (m[key].IsScalar()) set_here.append(" ").append(m[key].as<std::string>());
    if (std::string_view(key) == "gemm_efficiency") set_here.append(" (the older key, read as gemm_efficiency_bf16)");
  }
  if (!set_here.empty()) {
    std::string line = (all_required && !m["calibration"]) ? std::string("explicit cluster.gpu: ")
                                                           : g.calibration + "; set in the scenario: ";
    g.calibration = line.append(set_here);
  }
}

}  // namespace hcpsim
