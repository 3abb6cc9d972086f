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
// Source: achieved large-GEMM rates relative to dense peak: cuBLAS BF16 GEMMs of transformer shapes reach
// ~700 TFLOP/s on H100 SXM (≈ 0.7 of 989), and Megatron-LM's reported end-to-end MFU of 40–50% for dense
// GPT models implies linear-layer efficiencies of 0.6–0.75 (Narayanan et al. 2021; NVIDIA Megatron-LM
// performance tables). Assumption until calibrated with `hcpsim calibrate`.
constexpr double kGemmEfficiency = 0.7;

// NVLink per direction per GPU as NCCL's ring reaches it, not the datasheet's 450 / 300 / 900 GB/s: NCCL's
// topology model (src/graph/topo.h) rates one NVLink at SM90_NVLINK_BW 20.6 GB/s (Hopper), SM80_NVLINK_BW
// 20.0 (Ampere), SM100_NVLINK_BW 40.1 (Blackwell) per direction, times the GPU's links: 18 NVLink4 (H100/H200
// SXM datasheet), 12 NVLink3 (A100 SXM), 18 NVLink5 (B200). 370.8 GB/s is also where the DGX H100 all-reduce
// curve sits below its NVLS part (NVIDIA dgxc-benchmarking nccl/README.md: 362 GB/s at 64 MB).
constexpr double kNvlink4BytesPerS = 18 * 20.6e9;
constexpr double kNvlink3BytesPerS = 12 * 20.0e9;
constexpr double kNvlink5BytesPerS = 18 * 40.1e9;
// NVLink SHARP all-reduce inside one DGX H100/H200: bus bandwidth and latency fitted (max relative error
// 2.2%) on the DGX H100 8-GPU all-reduce busbw curve, 1 MB … 16 GB (NVIDIA dgxc-benchmarking nccl/README.md:
// 67, 237, 362, 401, 466, 480 GB/s at 1 MB, 16 MB, 64 MB, 128 MB, 1 GB, 16 GB), together with NCCL's ring
// LL/LL128 terms (collective_model.cpp) which win below ~32 MB. The fitted 74 µs is larger than the 23–25 µs
// NCCL's tuner assumes for NVLS (src/graph/tuning.cc): the measured curve reaches its bandwidth later.
constexpr double kNvlsHopperBusBytesPerS = 470e9;
constexpr double kNvlsLatencyS = 74e-6;
// B200 (NVLink5): the Hopper NVLS rate scaled by the NVLink rate (40.1 / 20.6, topo.h) and NCCL's NVLS efficiency
// (Blackwell 0.74 / Hopper 0.85, tuning.cc nvlsEfficiency). Assumption until a DGX B200 curve is calibrated.
constexpr double kNvlsBlackwellBusBytesPerS = kNvlsHopperBusBytesPerS * (40.1 / 20.6) * (0.74 / 0.85);
// NCCL's LL bus-bandwidth cap inside one node by GPU generation (src/graph/tuning.cc llMaxBws, "N1" column):
// Ampere 87.7, Hopper 141, Blackwell 282 GB/s.
constexpr double kLlMaxAmpereBytesPerS = 87.7e9;
constexpr double kLlMaxHopperBytesPerS = 141e9;
constexpr double kLlMaxBlackwellBytesPerS = 282e9;
// Source: ConnectX-7 400 Gb/s per GPU rail (50 GB/s line rate); 46–48 GB/s achieved in nccl-tests busbw
// (docs/architecture.md "Numbers we stand on"). hcpsim uses the achieved 48 GB/s.
constexpr double kCx7AchievedBytesPerS = 48e9;
// Source: ConnectX-6 HDR 200 Gb/s per GPU rail on DGX A100 (25 GB/s line rate); ~24 GB/s achieved, scaled from
// the CX-7 line/achieved ratio.
constexpr double kCx6AchievedBytesPerS = 24e9;
// Latencies of one point-to-point message as NCCL's cost model puts them for the Simple protocol (the one NCCL
// uses for the MB-sized CP and pipeline messages; src/graph/tuning.cc): base latency 8.4 µs per operation, plus
// the hardware latency of one ring step: NVLink 3.4 µs, network 14.0 µs.
constexpr double kNvlinkLatencyS = 3.4e-6;
constexpr double kNetworkLatencyS = 14.0e-6;
// (µs / 1e6, as the YAML loader converts, so that a written scenario says 8.4.)
constexpr double kMessageLatencyS = 8.4 / 1e6;
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
                CollectiveSpec collectives) {
  ClusterSpec c;
  c.collectives = collectives;
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
  c.gpu.gemm_efficiency = kGemmEfficiency;
  c.gpu.calibration = std::string("assumed: preset ") + preset +
                      " (datasheet peaks; attention efficiencies from FlashAttention-2/3; GEMM efficiency 0.7)";
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
                 kNvlink4BytesPerS, kCx7AchievedBytesPerS,
                 // NVSwitch gen 3 with NVLink SHARP
                 {kNvlsHopperBusBytesPerS, kNvlsLatencyS, kLlMaxHopperBytesPerS});
    c.gpu.peak_fp8_flops_per_s = kH100PeakFp8FlopsPerS;
    c.gpu.attn_fwd_table = fa3_table(kFa3FwdD64, kFa3FwdD128, kFa3FwdCausalD64, kFa3FwdCausalD128);
    c.gpu.attn_bwd_table = fa3_table(kFa3BwdD64, kFa3BwdD128, kFa3BwdCausalD64, kFa3BwdCausalD128);
    return c;
  }
  if (name == "dgx-a100")  // no NVLS: the A100's NVSwitch gen 2 has no NVLink SHARP
    return dgx("dgx-a100", nodes,
               {"A100-SXM4-80GB", kA100PeakBf16FlopsPerS, kA100MemoryBytes, kA100HbmBytesPerS, kAttnFwdEfficiency,
                kAttnBwdEfficiency},
               kNvlink3BytesPerS, kCx6AchievedBytesPerS, {0, 0, kLlMaxAmpereBytesPerS});
  if (name == "dgx-b200") {
    auto c = dgx("dgx-b200", nodes,
                 {"B200-180GB", kB200PeakBf16FlopsPerS, kB200MemoryBytes, kB200HbmBytesPerS, kAttnFwdEfficiency,
                  kAttnBwdEfficiency},
                 kNvlink5BytesPerS, kCx7AchievedBytesPerS,
                 {kNvlsBlackwellBusBytesPerS, kNvlsLatencyS, kLlMaxBlackwellBytesPerS});
    c.gpu.peak_fp8_flops_per_s = kB200PeakFp8FlopsPerS;
    return c;
  }
  return std::nullopt;
}

std::vector<std::string> cluster_preset_names() { return {"dgx-a100", "dgx-b200", "dgx-h100", "dgx-h200"}; }

}  // namespace hcpsim
