#pragma once
// The plausible range of every cluster, GPU and model-size number a scenario gives, checked when the scenario is
// loaded (YamlReader::plausible), so that `validate` refuses what `simulate` cannot time: a rate of 1e-300 or a
// bandwidth of 1e308 is a typo, not a machine. Each range spans every machine in use with a wide margin on both
// sides; the bounds and their reasons are listed in docs/robustness.md ("Plausible ranges").

namespace hcpsim::plausible {

/// A closed range [lo, hi] in the unit of the key it guards, with the reason for its bounds.
struct Range {
  double lo = 0;
  double hi = 0;
  const char* unit = "";
  const char* why = "";
};

// Link bandwidth per direction: 1 Gb/s Ethernet is 0.125 GB/s; NVLink 5 is 900 GB/s per GPU per direction
// (NVIDIA B200 datasheet), InfiniBand XDR 800 Gb/s is 100 GB/s.
inline constexpr Range kLinkBandwidth{0.1, 10000, "GB/s", "from 1 Gb/s Ethernet to 10x NVLink 5"};
// One-way link and message latencies: sub-microsecond NVLink hops to ~10 µs InfiniBand messages; 100 ms is a WAN.
inline constexpr Range kLatency{0, 1e5, "us", "0 to 100 ms"};
// Dense BF16 peak: V100 125 (tensor FP16), A100 312, H100 SXM5 989.4, B200 2250 TFLOP/s (NVIDIA datasheets).
inline constexpr Range kPeakBf16{1, 1e5, "TFLOP/s", "from a small accelerator to 40x a B200"};
// Dense FP8 peak: H100 SXM5 1978.9, B200 4500 TFLOP/s; 0 = the GPU has no FP8 tensor cores.
inline constexpr Range kPeakFp8{0, 2e5, "TFLOP/s", "0 (no FP8) to 40x a B200"};
// Device memory: 16 GB (V100) to 192 GB (B200), 288 GB (B300).
inline constexpr Range kMemory{1, 1e5, "GB", "1 GB to 100 TB"};
// HBM bandwidth: A100 2039, H100 SXM5 3350, H200 4800, B200 8000 GB/s.
inline constexpr Range kHbmBandwidth{10, 1e6, "GB/s", "from DDR-class memory to 100x a B200's HBM3e"};
// Kernel launch overhead: ~3–5 µs on current GPUs; 10 ms would be a stalled driver.
inline constexpr Range kLaunchOverhead{0, 1e4, "us", "0 to 10 ms"};
// Achieved / peak rate of a kernel class (attention, GEMM): measured kernels reach 0.2–0.8 (docs/validation.md);
// below 1% a kernel is not using the tensor cores at all.
inline constexpr Range kEfficiency{0.01, 1, "", "achieved/peak, from 1% to 100%"};
// Memory the framework holds besides the model (CUDA context, allocator reserve, NCCL buffers): a few GB.
inline constexpr Range kFrameworkMemory{0, 1e5, "GB", "0 to 100 TB"};
// Compute time with concurrent communication over time without.
inline constexpr Range kSlowdown{1, 10, "", "1 (no slowdown) to 10x"};
// Fabric oversubscription, downlink : uplink bandwidth.
inline constexpr Range kOversubscription{1, 1000, "", "1:1 (non-blocking) to 1000:1"};
// Counts: GPUs per node (8 in a DGX, 72 in an NVL72 rack domain) and nodes (the largest published clusters hold
// ~10^5 GPUs).
inline constexpr Range kGpusPerNode{1, 1024, "", "1 to 1024 GPUs in one scale-up domain"};
inline constexpr Range kNodes{1, 1e5, "", "1 to 100000 nodes"};
// Model sizes: attention heads (Llama 3.1 405B has 128, the largest published models a few hundred) and head
// dims (64–256 in practice; TE's fused kernels take up to 256).
inline constexpr Range kHeads{1, 16384, "", "1 to 16384 heads"};
inline constexpr Range kHeadDim{1, 16384, "", "1 to 16384 channels per head"};

}  // namespace hcpsim::plausible
