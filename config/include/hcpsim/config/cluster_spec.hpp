#pragma once
/// Cluster description: nodes of GPUs joined by an NVLink/NVSwitch domain and NICs on a leaf/spine fabric.
/// Topology (topology.hpp) turns it into a graph of GPUs, NVSwitches, NICs and switches; the simulator routes
/// every message over that graph.

#include <optional>
#include <cstdint>
#include <string>
#include <vector>

namespace hcpsim {

/// One point of an attention-kernel efficiency table: achieved / peak FLOP/s of one block shape.
/// Shapes are per kernel launch: q_rows × kv_rows of one (batch, head), head_dim = dk.
struct EfficiencyPoint {
  int64_t head_dim = 0;   ///< dk
  int64_t q_rows = 0;     ///< block rows (queries)
  int64_t kv_rows = 0;    ///< block columns (keys)
  bool causal = false;    ///< true: a causal (diagonal) block; false: a full block
  double efficiency = 0;  ///< achieved / peak, in (0, 1]
};

/// One GPU model. All rates are dense (no sparsity).
struct GpuSpec {
  std::string name;                        ///< e.g. "H100-SXM5-80GB"
  double peak_bf16_flops_per_s = 0;        ///< dense bf16/fp16 tensor-core peak
  double memory_bytes = 0;                 ///< HBM capacity
  double hbm_bandwidth_bytes_per_s = 0;    ///< HBM bandwidth
  double attn_fwd_efficiency = 0;          ///< achieved / peak for an attention forward kernel
  double attn_bwd_efficiency = 0;          ///< achieved / peak for an attention backward kernel
  /// Efficiency tables (forward, backward); when non-empty they replace attn_fwd/bwd_efficiency
  /// (interpolation rules: sim/cost_model.hpp table_efficiency). Sources: cluster_spec.cpp.
  std::vector<EfficiencyPoint> attn_fwd_table{};
  std::vector<EfficiencyPoint> attn_bwd_table{};
  /// Fixed cost of every elementwise kernel (launch + ramp), seconds. Source: cluster_spec.cpp kKernelLaunchOverheadS.
  double kernel_launch_overhead_s = 3e-6;
  /// Compute kernels run this many times slower while a communication kernel (NCCL) runs on the same GPU
  /// (NCCL's SMs are taken from compute). ≥ 1; 1 = no slowdown. Source: cluster_spec.cpp kCommSlowdown.
  double compute_slowdown_during_comm = 1.0;
  /// Dense FP8 tensor-core peak (FLOP/s); 0 = the GPU has no FP8 tensor cores (training.fp8 is then rejected).
  double peak_fp8_flops_per_s = 0;
  /// Achieved / dense BF16 peak of a large BF16 GEMM (the linear layers without FP8, the logits GEMM); smaller
  /// shapes fall below it by sim/cost_model.hpp gemm_shape_factor. Source: cluster_spec.cpp kGemmEfficiencyBf16.
  double gemm_efficiency_bf16 = 0.79;
  /// Achieved / dense FP8 peak of a large FP8 GEMM (Transformer Engine FP8 linear layers, training.fp8).
  /// Source: cluster_spec.cpp kGemmEfficiencyFp8.
  double gemm_efficiency_fp8 = 0.69;
  /// How many times longer an FP8 GEMM takes with the split accumulator (periodic promotion of the partial
  /// sums to FP32, which Transformer Engine uses for its dgrad and wgrad GEMMs) than with fast accumulation,
  /// at the same shape. ≥ 1; 1 = no difference (GPUs without the mode, e.g. Blackwell, or no FP8). Source:
  /// cluster_spec.cpp kFp8SplitAccumulatorSlowdownHopper.
  double fp8_split_accumulator_slowdown = 1.0;
  /// Streaming multiprocessors, for wave quantization of GEMM tiles (sim/cost_model.hpp gemm_shape_factor) and
  /// of attention blocks (attention_wave_factor); 0 = unknown, no wave quantization. Source: cluster_spec.cpp
  /// kHopperSmCount and siblings.
  int64_t sm_count = 0;
  /// Whether attention blocks are wave-quantised over sm_count. False for attention efficiencies calibrated from
  /// measured kernels (a calibration file sets it): their shapes already hold their waves.
  bool attn_wave_quantization = true;
  /// Where the efficiencies come from: "assumed (...)" for the presets, or the calibration file that set them
  /// (cluster.gpu.calibration; `hcpsim calibrate` writes such files). Printed by simulate.
  std::string calibration = "assumed (datasheet peaks, published kernel efficiencies)";
};

/// Switch fabric between the nodes' NICs.
/// rail_optimized: leaf (u, r) joins NIC r of the leaf_downlinks nodes of scalable unit u (DGX SuperPOD);
/// fat_tree: leaf i joins NICs [i·leaf_downlinks, (i+1)·leaf_downlinks) in global NIC order. Every leaf links to
/// every spine; one leaf–spine link per direction carries leaf_downlinks · NIC bandwidth / oversubscription / spines.
struct FabricSpec {
  enum class Kind { rail_optimized, fat_tree };
  Kind kind = Kind::rail_optimized;
  int64_t leaf_downlinks = 32;   ///< NIC ports per leaf. Source: cluster_spec.cpp kLeafDownlinks.
  int64_t spines = 8;            ///< spine switches. Source: cluster_spec.cpp kSpines.
  double oversubscription = 1;   ///< leaf downlink : uplink bandwidth, ≥ 1 (1 = non-blocking)
};
/// "rail_optimized" | "fat_tree".
std::string to_string(FabricSpec::Kind k);

/// An explicit topology (cluster.topology in YAML): vertices and full-duplex links. When `vertices` is
/// non-empty it replaces the generated node/fabric graph. GPU vertices, in list order, are global GPUs 0, 1, ….
struct ExplicitTopology {
  struct Vertex {
    std::string name;
    std::string kind;   ///< "gpu" | "nvswitch" | "nic" | "leaf" | "spine"
    int64_t node = -1;  ///< node of a GPU/NVSwitch/NIC (−1 for switches)
  };
  struct Link {
    int64_t a = 0, b = 0;              ///< vertex indices
    double bandwidth_bytes_per_s = 0;  ///< per direction
    double latency_s = 0;              ///< one way
  };
  std::vector<Vertex> vertices;
  std::vector<Link> links;
};

/// One link level: bandwidth per direction per GPU, and one-way latency.
struct LinkSpec {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
};

/// What NCCL's collective algorithms reach on this cluster beyond the link bandwidths (collective_model.hpp).
/// Set by the presets (sources in cluster_spec.cpp); a cluster without a preset keeps these defaults (Hopper's
/// LL caps, no NVLink SHARP).
struct CollectiveSpec {
  /// NVLink SHARP (NVLS) all-reduce bus bandwidth of one node (nccl-tests busbw), bytes/s; 0 = no NVLS.
  double nvls_bus_bytes_per_s = 0;
  /// Latency of one NVLS all-reduce inside a node, seconds.
  double nvls_latency_s = 0;
  /// NCCL's LL-protocol bus-bandwidth cap inside one node (tuning.cc llMaxBws, by GPU generation), bytes/s.
  double ll_max_bytes_per_s = 141e9;
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
  /// NICs per node; GPU g uses NIC g / (gpus_per_node / nics_per_node); 0 = one NIC per GPU.
  int64_t nics_per_node = 0;
  FabricSpec fabric;              ///< leaf/spine fabric between nodes
  ExplicitTopology topology;      ///< explicit graph; empty = generated from the fields above
  CollectiveSpec collectives;     ///< NVLS and protocol caps of NCCL on this cluster (presets only)

  [[nodiscard]] int64_t world_size() const { return nodes * gpus_per_node; }
};

/// The named presets, with datasheet constants (sources in cluster_spec.cpp).
/// @param name  "dgx-h100" | "dgx-h200" | "dgx-a100" | "dgx-b200"
/// @return std::nullopt for an unknown name.
std::optional<ClusterSpec> cluster_preset(const std::string& name, int64_t nodes);

/// The preset names, sorted ("dgx-a100", "dgx-b200", "dgx-h100", "dgx-h200").
std::vector<std::string> cluster_preset_names();

}  // namespace hcpsim
