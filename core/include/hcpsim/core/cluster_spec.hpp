#pragma once
/// Cluster description: nodes of GPUs joined by an NVLink/NVSwitch domain and NICs on a fabric.
/// Issue-level model: two link levels (intra-node, inter-node); the full topology graph builds on this.

#include <optional>
#include <cstdint>
#include <string>
#include <vector>

namespace hcpsim {

/// One GPU model. All rates are dense (no sparsity).
struct GpuSpec {
  std::string name;                        ///< e.g. "H100-SXM5-80GB"
  double peak_bf16_flops_per_s = 0;        ///< dense bf16/fp16 tensor-core peak
  double memory_bytes = 0;                 ///< HBM capacity
  double hbm_bandwidth_bytes_per_s = 0;    ///< HBM bandwidth
  double attn_fwd_efficiency = 0;          ///< achieved / peak for an attention forward kernel
  double attn_bwd_efficiency = 0;          ///< achieved / peak for an attention backward kernel
};

/// One link level: bandwidth per direction per GPU, and one-way latency.
struct LinkSpec {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
};

/// A homogeneous cluster: `nodes` × `gpus_per_node` GPUs.
struct ClusterSpec {
  std::string preset;             ///< "dgx-h100", ... or "" for an explicit description
  int64_t nodes = 1;
  int64_t gpus_per_node = 8;
  GpuSpec gpu;
  LinkSpec nvlink;                ///< GPU ↔ GPU inside a node (through NVSwitch), per direction per GPU
  LinkSpec network;               ///< GPU ↔ GPU across nodes: one NIC rail per GPU, per direction
  double message_latency_s = 0;   ///< per-message software cost (NCCL launch + protocol)

  [[nodiscard]] int64_t world_size() const { return nodes * gpus_per_node; }
};

/// The named presets, with datasheet constants (sources in cluster_spec.cpp).
/// @param name  "dgx-h100" | "dgx-h200" | "dgx-a100" | "dgx-b200"
/// @return std::nullopt for an unknown name.
std::optional<ClusterSpec> cluster_preset(const std::string& name, int64_t nodes);

/// The preset names, sorted ("dgx-a100", "dgx-b200", "dgx-h100", "dgx-h200").
std::vector<std::string> cluster_preset_names();

}  // namespace hcpsim
