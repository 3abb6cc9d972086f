#include "hcpsim/config/cluster_spec.hpp"

namespace hcpsim {
namespace {

// Source: NVIDIA H100 Tensor Core GPU datasheet (SXM5): 989.4 TFLOP/s dense BF16, "80 GB" HBM3 at 3.35 TB/s.
constexpr double kH100PeakBf16FlopsPerS = 989.4e12;
// The "80 GB" is 80 GiB of HBM3, of which the driver exposes 81559 MiB (nvidia-smi --query-gpu=memory.total on
// an H100 SXM5 80GB); that is the capacity PyTorch's allocator can fill, so memory fits are judged against it.
constexpr double kH100MemoryBytes = 81559.0 * 1024 * 1024;
constexpr double kH100HbmBytesPerS = 3.35e12;
// Source: NVIDIA H100 SXM5 datasheet: 1,979 TFLOP/s dense FP8 (3,958 with sparsity); H200 SXM the same.
constexpr double kH100PeakFp8FlopsPerS = 1978.9e12;
// Source: NVIDIA H200 datasheet (SXM): same Hopper tensor cores as H100 SXM, 141 GB HBM3e at 4.8 TB/s (kept as
// decimal GB until a device-reported capacity is measured).
constexpr double kH200MemoryBytes = 141e9;
constexpr double kH200HbmBytesPerS = 4.8e12;
// Source: NVIDIA A100 datasheet (SXM4 80GB): 312 TFLOP/s dense BF16, 2.039 TB/s HBM2e.
constexpr double kA100PeakBf16FlopsPerS = 312e12;
// "80GB" is 80 GiB (nvidia-smi reports 81920 MiB on an A100-SXM4-80GB).
constexpr double kA100MemoryBytes = 80.0 * 1024 * 1024 * 1024;
constexpr double kA100HbmBytesPerS = 2.039e12;
// Source: NVIDIA DGX B200 datasheet: 72 PFLOP/s FP8 training for 8 GPUs → 4.5 PFLOP/s FP8 dense per GPU,
// 2.25 PFLOP/s dense BF16; 1,440 GB HBM3e for 8 GPUs (180 GB each) at 8 TB/s per GPU.
constexpr double kB200PeakBf16FlopsPerS = 2.25e15;
constexpr double kB200MemoryBytes = 180e9;
constexpr double kB200HbmBytesPerS = 8e12;
constexpr double kB200PeakFp8FlopsPerS = 4.5e15;
// Source: a large cuBLAS BF16 GEMM reaches about 780 TFLOP/s on an H100 SXM5 (public cuBLAS benchmark of
// square 8192-sized GEMMs; secondary): 780 / 989.4 = 0.79 of the dense BF16 peak. Used for every preset GPU
// (A100 and B200 have no measurement here: assumed the same fraction until calibrated with `hcpsim calibrate`).
constexpr double kGemmEfficiencyBf16 = 780.0 / 989.4;
// Source: NVIDIA technical blog "Boosting Matrix Multiplication Speed and Flexibility with NVIDIA cuBLAS 12.9"
// (2025): FP8 matmuls on Hopper run 1.75x the BF16 baseline for large matmuls. 1.75 · 780 / 1978.9 = 0.69 of
// the dense FP8 peak. Smaller shapes lose more (the blog: "at least 1.25x for most other cases"), which
// gemm_shape_factor reproduces through the fixed per-tile fill time that FP8's faster main loop exposes twice.
constexpr double kGemmEfficiencyFp8 = 1.75 * 780.0 / 1978.9;
// Source: NVIDIA datasheets / architecture whitepapers: H100 SXM5 and H200 SXM 132 SMs, A100 SXM4 108,
// B200 148 (2 dies of 74 enabled SMs).
constexpr int64_t kH100SmCount = 132;
constexpr int64_t kA100SmCount = 108;
constexpr int64_t kB200SmCount = 148;

// Source: NVLink4 (H100/H200 SXM) 900 GB/s bidirectional = 450 GB/s per direction per GPU through NVSwitch.
constexpr double kNvlink4BytesPerS = 450e9;
// Source: NVLink3 (A100 SXM) 600 GB/s bidirectional = 300 GB/s per direction.
constexpr double kNvlink3BytesPerS = 300e9;
// Source: NVLink5 (B200) 1.8 TB/s bidirectional = 900 GB/s per direction.
constexpr double kNvlink5BytesPerS = 900e9;
// Source: ConnectX-7 400 Gb/s per GPU rail (50 GB/s line rate); 46–48 GB/s achieved in nccl-tests busbw
// (docs/architecture.md "Numbers we stand on"). hcpsim uses the achieved 48 GB/s.
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

// Source: FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608) Figures 5 and 6: H100 SXM5 BF16 TFLOP/s of
// FlashAttention-3 at sequence length 512 … 16k (batch·seqlen = 16k tokens, 2048 hidden), read off the plots to
// about ±5% and divided by the 989.4 TFLOP/s peak. Index: head dim {64, 128}, square blocks of n = 512 … 16384
// rows, causal or not. A non-square block (r × c) takes the value of the square block of the same area,
// n = sqrt(r·c) (assumption). Used for H100 and H200 (same SMs); A100 and B200 keep the scalar efficiencies.
constexpr int64_t kFa3SeqLens[] = {512, 1024, 2048, 4096, 8192, 16384};
constexpr double kFa3FwdD64[] = {0.33, 0.42, 0.48, 0.50, 0.51, 0.51};
constexpr double kFa3FwdD128[] = {0.45, 0.56, 0.65, 0.70, 0.73, 0.75};
constexpr double kFa3FwdCausalD64[] = {0.17, 0.26, 0.35, 0.42, 0.46, 0.48};
constexpr double kFa3FwdCausalD128[] = {0.20, 0.33, 0.48, 0.60, 0.67, 0.72};
constexpr double kFa3BwdD64[] = {0.27, 0.33, 0.38, 0.41, 0.43, 0.44};
constexpr double kFa3BwdD128[] = {0.31, 0.40, 0.47, 0.52, 0.55, 0.57};
constexpr double kFa3BwdCausalD64[] = {0.18, 0.25, 0.31, 0.36, 0.40, 0.42};
constexpr double kFa3BwdCausalD128[] = {0.21, 0.30, 0.39, 0.46, 0.51, 0.54};

// Source: assumption, order of magnitude only: CUDA kernel launch overhead is commonly quoted at a few µs per
// launch from eager-mode frameworks, and a tiny kernel adds ~1 µs of device time (to be calibrated).
constexpr double kKernelLaunchOverheadS = 3e-6;
// Source: assumption: no slowdown by default. NCCL kernels occupy a few SMs (NCCL_MIN/MAX_NCHANNELS, 1 block
// per channel) out of 132 on H100, a few percent; set cluster.gpu.compute_slowdown_during_comm to calibrate.
constexpr double kCommSlowdown = 1.0;
// Source: NVIDIA DGX SuperPOD H100 reference architecture: scalable units of 32 nodes, one leaf per rail per
// unit (rail-optimised), non-blocking. The spine count is an assumption (8: one per rail of a unit).
constexpr int64_t kLeafDownlinks = 32;
constexpr int64_t kSpines = 8;

std::vector<EfficiencyPoint> fa3_table(const double (&d64)[6], const double (&d128)[6], const double (&c64)[6],
                                       const double (&c128)[6]) {
  std::vector<EfficiencyPoint> t;
  for (int causal = 0; causal < 2; ++causal) {
    for (int64_t hd : {64, 128}) {
      const double* e = causal ? (hd == 64 ? c64 : c128) : (hd == 64 ? d64 : d128);
      for (size_t i = 0; i < 6; ++i) {
        for (size_t j = 0; j < 6; ++j) {
          // Area-equivalent square block: sqrt(r·c) sits between seqlens i and j in log2 space at (i+j)/2.
          const double pos = static_cast<double>(i + j) / 2;
          const auto lo = static_cast<size_t>(pos);
          const double frac = pos - static_cast<double>(lo);
          const double v = frac == 0 ? e[lo] : e[lo] * (1 - frac) + e[lo + 1] * frac;
          t.push_back({hd, kFa3SeqLens[i], kFa3SeqLens[j], causal == 1, v});
        }
      }
    }
  }
  return t;
}

ClusterSpec dgx(const char* preset, int64_t nodes, GpuSpec gpu, double nvlink_bytes_per_s, double nic_bytes_per_s,
                int64_t sm_count) {
  ClusterSpec c;
  c.preset = preset;
  c.nodes = nodes;
  c.gpus_per_node = 8;  // Source: every DGX node listed here has 8 GPUs, one NIC rail per GPU.
  c.gpu = std::move(gpu);
  c.nvlink = {nvlink_bytes_per_s, kNvlinkLatencyS};
  c.network = {nic_bytes_per_s, kNetworkLatencyS};
  c.message_latency_s = kMessageLatencyS;
  c.nics_per_node = 8;  // Source: DGX H100/H200/A100/B200 user guides: 8 single-port compute NICs, one per GPU.
  c.fabric.leaf_downlinks = kLeafDownlinks;
  c.fabric.spines = kSpines;
  c.gpu.kernel_launch_overhead_s = kKernelLaunchOverheadS;
  c.gpu.compute_slowdown_during_comm = kCommSlowdown;
  c.gpu.sm_count = sm_count;
  c.gpu.gemm_efficiency_bf16 = kGemmEfficiencyBf16;
  c.gpu.gemm_efficiency_fp8 = kGemmEfficiencyFp8;
  c.gpu.calibration = std::string("assumed: preset ") + preset +
                      " (datasheet peaks; attention efficiencies from FlashAttention-2/3; large-GEMM efficiency "
                      "BF16 0.79, FP8 0.69)";
  return c;
}

}  // namespace

std::string to_string(FabricSpec::Kind k) {
  return k == FabricSpec::Kind::fat_tree ? "fat_tree" : "rail_optimized";
}

std::optional<ClusterSpec> cluster_preset(const std::string& name, int64_t nodes) {
  if (name == "dgx-h100" || name == "dgx-h200") {
    const bool h100 = name == "dgx-h100";
    auto c = dgx(h100 ? "dgx-h100" : "dgx-h200", nodes,
                 {h100 ? "H100-SXM5-80GB" : "H200-SXM-141GB", kH100PeakBf16FlopsPerS,
                  h100 ? kH100MemoryBytes : kH200MemoryBytes, h100 ? kH100HbmBytesPerS : kH200HbmBytesPerS,
                  kAttnFwdEfficiency, kAttnBwdEfficiency},
                 kNvlink4BytesPerS, kCx7AchievedBytesPerS, kH100SmCount);
    c.gpu.peak_fp8_flops_per_s = kH100PeakFp8FlopsPerS;
    c.gpu.attn_fwd_table = fa3_table(kFa3FwdD64, kFa3FwdD128, kFa3FwdCausalD64, kFa3FwdCausalD128);
    c.gpu.attn_bwd_table = fa3_table(kFa3BwdD64, kFa3BwdD128, kFa3BwdCausalD64, kFa3BwdCausalD128);
    return c;
  }
  if (name == "dgx-a100")
    return dgx("dgx-a100", nodes,
               {"A100-SXM4-80GB", kA100PeakBf16FlopsPerS, kA100MemoryBytes, kA100HbmBytesPerS, kAttnFwdEfficiency,
                kAttnBwdEfficiency},
               kNvlink3BytesPerS, kCx6AchievedBytesPerS, kA100SmCount);
  if (name == "dgx-b200") {
    auto c = dgx("dgx-b200", nodes,
                 {"B200-180GB", kB200PeakBf16FlopsPerS, kB200MemoryBytes, kB200HbmBytesPerS, kAttnFwdEfficiency,
                  kAttnBwdEfficiency},
                 kNvlink5BytesPerS, kCx7AchievedBytesPerS, kB200SmCount);
    c.gpu.peak_fp8_flops_per_s = kB200PeakFp8FlopsPerS;
    return c;
  }
  return std::nullopt;
}

std::vector<std::string> cluster_preset_names() { return {"dgx-a100", "dgx-b200", "dgx-h100", "dgx-h200"}; }

}  // namespace hcpsim
