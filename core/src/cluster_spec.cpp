#include "hcpsim/core/cluster_spec.hpp"

namespace hcpsim {
namespace {

// Source: NVIDIA H100 Tensor Core GPU datasheet (SXM5): 989.4 TFLOP/s dense BF16, 80 GB HBM3 at 3.35 TB/s.
constexpr double kH100PeakBf16FlopsPerS = 989.4e12;
constexpr double kH100MemoryBytes = 80e9;
constexpr double kH100HbmBytesPerS = 3.35e12;
// Source: NVIDIA H200 datasheet (SXM): same Hopper tensor cores as H100 SXM, 141 GB HBM3e at 4.8 TB/s.
constexpr double kH200MemoryBytes = 141e9;
constexpr double kH200HbmBytesPerS = 4.8e12;
// Source: NVIDIA A100 datasheet (SXM4 80GB): 312 TFLOP/s dense BF16, 2.039 TB/s HBM2e.
constexpr double kA100PeakBf16FlopsPerS = 312e12;
constexpr double kA100MemoryBytes = 80e9;
constexpr double kA100HbmBytesPerS = 2.039e12;
// Source: NVIDIA DGX B200 datasheet: 72 PFLOP/s FP8 training for 8 GPUs → 4.5 PFLOP/s FP8 dense per GPU,
// 2.25 PFLOP/s dense BF16; 1,440 GB HBM3e for 8 GPUs (180 GB each) at 8 TB/s per GPU.
constexpr double kB200PeakBf16FlopsPerS = 2.25e15;
constexpr double kB200MemoryBytes = 180e9;
constexpr double kB200HbmBytesPerS = 8e12;

// Source: NVLink4 (H100/H200 SXM) 900 GB/s bidirectional = 450 GB/s per direction per GPU through NVSwitch.
constexpr double kNvlink4BytesPerS = 450e9;
// Source: NVLink3 (A100 SXM) 600 GB/s bidirectional = 300 GB/s per direction.
constexpr double kNvlink3BytesPerS = 300e9;
// Source: NVLink5 (B200) 1.8 TB/s bidirectional = 900 GB/s per direction.
constexpr double kNvlink5BytesPerS = 900e9;
// Source: ConnectX-7 400 Gb/s per GPU rail (50 GB/s line rate); 46–48 GB/s achieved in nccl-tests busbw
// (DESIGN.md "Numbers we stand on"). hcpsim uses the achieved 48 GB/s.
constexpr double kCx7AchievedBytesPerS = 48e9;
// Source: ConnectX-6 HDR 200 Gb/s per GPU rail on DGX A100 (25 GB/s line rate); ~24 GB/s achieved, scaled from
// the CX-7 line/achieved ratio.
constexpr double kCx6AchievedBytesPerS = 24e9;
// Assumption (order of magnitude, to be calibrated from measured timelines): one NVSwitch hop ≈ 1 µs,
// one InfiniBand leaf/spine path ≈ 3 µs, NCCL per-message launch/protocol cost ≈ 5 µs.
constexpr double kNvlinkLatencyS = 1e-6;
constexpr double kNetworkLatencyS = 3e-6;
constexpr double kMessageLatencyS = 5e-6;
// Source: FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608), H100 BF16: forward reaches 600–740 TFLOP/s
// (60–75% of peak) for head dim 64–128 at long sequence length; backward about 450–550 TFLOP/s (≈ 50%).
// The same fractions are assumed for A100 (FlashAttention-2 reports 50–73% forward) and B200 until calibrated.
constexpr double kAttnFwdEfficiency = 0.6;
constexpr double kAttnBwdEfficiency = 0.5;

ClusterSpec dgx(const char* preset, int64_t nodes, GpuSpec gpu, double nvlink_bytes_per_s, double nic_bytes_per_s) {
  ClusterSpec c;
  c.preset = preset;
  c.nodes = nodes;
  c.gpus_per_node = 8;  // Source: every DGX node listed here has 8 GPUs, one NIC rail per GPU.
  c.gpu = std::move(gpu);
  c.nvlink = {nvlink_bytes_per_s, kNvlinkLatencyS};
  c.network = {nic_bytes_per_s, kNetworkLatencyS};
  c.message_latency_s = kMessageLatencyS;
  return c;
}

}  // namespace

std::optional<ClusterSpec> cluster_preset(const std::string& name, int64_t nodes) {
  if (name == "dgx-h100")
    return dgx("dgx-h100", nodes,
               {"H100-SXM5-80GB", kH100PeakBf16FlopsPerS, kH100MemoryBytes, kH100HbmBytesPerS, kAttnFwdEfficiency,
                kAttnBwdEfficiency},
               kNvlink4BytesPerS, kCx7AchievedBytesPerS);
  if (name == "dgx-h200")
    return dgx("dgx-h200", nodes,
               {"H200-SXM-141GB", kH100PeakBf16FlopsPerS, kH200MemoryBytes, kH200HbmBytesPerS, kAttnFwdEfficiency,
                kAttnBwdEfficiency},
               kNvlink4BytesPerS, kCx7AchievedBytesPerS);
  if (name == "dgx-a100")
    return dgx("dgx-a100", nodes,
               {"A100-SXM4-80GB", kA100PeakBf16FlopsPerS, kA100MemoryBytes, kA100HbmBytesPerS, kAttnFwdEfficiency,
                kAttnBwdEfficiency},
               kNvlink3BytesPerS, kCx6AchievedBytesPerS);
  if (name == "dgx-b200")
    return dgx("dgx-b200", nodes,
               {"B200-180GB", kB200PeakBf16FlopsPerS, kB200MemoryBytes, kB200HbmBytesPerS, kAttnFwdEfficiency,
                kAttnBwdEfficiency},
               kNvlink5BytesPerS, kCx7AchievedBytesPerS);
  return std::nullopt;
}

std::vector<std::string> cluster_preset_names() { return {"dgx-a100", "dgx-b200", "dgx-h100", "dgx-h200"}; }

}  // namespace hcpsim
