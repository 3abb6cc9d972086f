#pragma once
/// The calibration file a scenario includes with `cluster.gpu.calibration: FILE` (written by `hcpsim calibrate`).
/// Its one owner: written here, read by the scenario loader (the `gpu:` keys of cluster.gpu, config/src/load_gpu.cpp).

#include <string>
#include <vector>

#include "hcpsim/config/cluster_spec.hpp"

namespace hcpsim {

/// The file's text: each of `comment_lines` as a "# " line, `source: "<csv>"` and a `gpu:` section with the keys
/// of cluster.gpu (name, peak_bf16_TFLOP_per_s, peak_fp8_TFLOP_per_s when set, memory_GB, hbm_bandwidth_GB_per_s,
/// kernel_launch_overhead_us, compute_slowdown_during_comm, gemm_efficiency_bf16, gemm_efficiency_fp8, sm_count, attn_fwd_efficiency,
/// attn_bwd_efficiency, attn_fwd_table, attn_bwd_table) in the loader's units (TFLOP/s, GB = 1e9 bytes, GB/s, µs).
/// Numbers are printed with 17 significant digits, so the loader reads back the same doubles; strings are escaped
/// by yaml-cpp's emitter (the rule of io/yaml_text.hpp).
std::string calibration_file_yaml(const GpuSpec& gpu, const std::string& source_csv,
                                  const std::vector<std::string>& comment_lines);

}  // namespace hcpsim
