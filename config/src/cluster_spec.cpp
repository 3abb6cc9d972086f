#include "hcpsim/config/cluster_spec.hpp"

#include "hcpsim/config/attention_backend.hpp"

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
// Source: NVIDIA H200 datasheet (SXM): same Hopper tensor cores as H100 SXM, 141 GB HBM3e at 4.8 TB/s. As for the
// H100, fits are judged against what the driver exposes: nvidia-smi shows 143771 MiB on an H200 SXM (public
// nvidia-smi outputs of H200 nodes, e.g. NVIDIA gpu-operator and cloud setup logs).
constexpr double kH200MemoryBytes = 143771.0 * 1024 * 1024;
constexpr double kH200HbmBytesPerS = 4.8e12;
// Source: NVIDIA A100 datasheet (SXM4 80GB): 312 TFLOP/s dense BF16, 2.039 TB/s HBM2e.
constexpr double kA100PeakBf16FlopsPerS = 312e12;
// "80GB" is 80 GiB (nvidia-smi reports 81920 MiB on an A100-SXM4-80GB).
constexpr double kA100MemoryBytes = 80.0 * 1024 * 1024 * 1024;
constexpr double kA100HbmBytesPerS = 2.039e12;
// Source: NVIDIA DGX B200 datasheet: 72 PFLOP/s FP8 training for 8 GPUs → 4.5 PFLOP/s FP8 dense per GPU,
// 2.25 PFLOP/s dense BF16; 1,440 GB HBM3e for 8 GPUs (180 GB each) at 8 TB/s per GPU. Capacity as the driver
// exposes it: nvidia-smi shows 183359 MiB on a B200 (public nvidia-smi output of a B200 node).
constexpr double kB200PeakBf16FlopsPerS = 2.25e15;
constexpr double kB200MemoryBytes = 183359.0 * 1024 * 1024;
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
// Transformer Engine runs its FP8 dgrad and wgrad GEMMs with the split accumulator (pytorch/module/base.py:
// _2X_ACC_FPROP = False, _2X_ACC_DGRAD = True, _2X_ACC_WGRAD = True, passed to cuBLASLt as
// CUBLASLT_MATMUL_DESC_FAST_ACCUM = !use_split_accumulator): Hopper's FP8 tensor cores accumulate in reduced
// precision, and the split mode promotes the partial sums to FP32 on the CUDA cores, which costs throughput.
// Measured on H100: fast accumulation is "a 1.1x to 1.2x speedup" over it (pytorch/ao issue #2377, torchao's
// FP8 training GEMMs, which make the same fprop-fast / backward-split choice); 1.15 is the middle of that
// range. The FP8 GEMM benchmarks behind kGemmEfficiencyFp8 are read as fast-accumulation figures (the mode
// FP8 GEMM benchmarks report). Blackwell has no separate fast mode (TE PR #2748: "there is no fastAccuMode for
// sm100"): 1 there.
constexpr double kFp8SplitAccumulatorSlowdownHopper = 1.15;

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
// Used where a GPU has no published kernel curves (B200: no FA/cuDNN curves are published for it, so it keeps
// these scalars for every backend); H100, H200 and A100 get the resolved kernel's tables (attention_tables.cpp).
constexpr double kAttnFwdEfficiency = 0.6;
constexpr double kAttnBwdEfficiency = 0.5;

// Source: assumption, order of magnitude only: CUDA kernel launch overhead is commonly quoted at a few µs per
// launch from eager-mode frameworks, and a tiny kernel adds ~1 µs of device time (to be calibrated).
constexpr double kKernelLaunchOverheadS = 3e-6;
// Compute kernels lose speed while a communication kernel runs on the same GPU: NCCL's CTAs (one per channel)
// hold whole SMs, and a GEMM's tiles then need more waves (and share HBM with the copies). Measured: overlapping
// compute with collectives slows the compute by 18.9% on average (max 40%) across A100, H100, MI250 and MI210
// with GPT and Llama training layers (Lee et al. 2025, "Characterizing Compute-Communication Overlap in
// GPU-Accelerated Distributed Deep Learning", arXiv:2507.03114). Consistent with SM occupancy: an NCCL
// all-gather on H100 launches 24 blocks (NVIDIA developer forum, "Compute-Communication Overlap Causes Severe
// GEMM Performance Degradation because of Tail Effect", Nsight Systems trace), and 132 / (132 - 24) = 1.22.
// Used for every preset (B200: no measurement yet, the same factor assumed).
constexpr double kCommSlowdown = 1.189;
// Source: NVIDIA DGX SuperPOD H100 reference architecture: scalable units of 32 nodes, one leaf per rail per
// unit (rail-optimised), non-blocking. The spine count is an assumption (8: one per rail of a unit).
constexpr int64_t kLeafDownlinks = 32;
constexpr int64_t kSpines = 8;
// Source: NVIDIA H100 Tensor Core GPU datasheet / Hopper architecture whitepaper: H100 SXM5 has 132 SMs (H200 the
// same die); A100 whitepaper: 108 SMs; NVIDIA Blackwell architecture technical brief: B200 148 SMs.
constexpr int64_t kHopperSmCount = 132;
constexpr int64_t kA100SmCount = 108;
constexpr int64_t kB200SmCount = 148;

/// A DGX preset of `nodes` nodes with `gpu` (`sm_count` SMs), whose attention efficiencies are the tables of the
/// kernel TE picks by default on it (attention_backend auto; the scenario's backend re-resolves in load_cluster.cpp),
/// and NCCL's collective constants `collectives`.
ClusterSpec dgx(const char* preset, int64_t nodes, GpuSpec gpu, int64_t sm_count, double nvlink_bytes_per_s,
                double nic_bytes_per_s, CollectiveSpec collectives) {
  ClusterSpec c;
  c.collectives = collectives;
  c.preset = preset;
  c.nodes = nodes;
  c.gpus_per_node = 8;  // Source: every DGX node listed here has 8 GPUs, one NIC rail per GPU.
  c.gpu = std::move(gpu);
  c.gpu.sm_count = sm_count;
  apply_attention_kernel(c.gpu, resolve_attention_kernel(c.gpu.name, std::nullopt, AttentionBackend::auto_select).kernel);
  c.nvlink = {nvlink_bytes_per_s, kNvlinkLatencyS};
  c.network = {nic_bytes_per_s, kNetworkLatencyS};
  c.message_latency_s = kMessageLatencyS;
  c.nics_per_node = 8;  // Source: DGX H100/H200/A100/B200 user guides: 8 single-port compute NICs, one per GPU.
  c.fabric.leaf_downlinks = kLeafDownlinks;
  c.fabric.spines = kSpines;
  c.gpu.kernel_launch_overhead_s = kKernelLaunchOverheadS;
  c.gpu.compute_slowdown_during_comm = kCommSlowdown;
  c.gpu.gemm_efficiency_bf16 = kGemmEfficiencyBf16;
  c.gpu.gemm_efficiency_fp8 = kGemmEfficiencyFp8;
  c.gpu.calibration = std::string("assumed: preset ") + preset +
                      " (datasheet peaks; attention efficiencies from published FlashAttention-2/3 and cuDNN curves; "
                      "large-GEMM efficiency BF16 0.79, FP8 0.69; compute 1.189x slower while communication "
                      "runs)";
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
                 kHopperSmCount, kNvlink4BytesPerS, kCx7AchievedBytesPerS,
                 // NVSwitch gen 3 with NVLink SHARP
                 {kNvlsHopperBusBytesPerS, kNvlsLatencyS, kLlMaxHopperBytesPerS});
    c.gpu.peak_fp8_flops_per_s = kH100PeakFp8FlopsPerS;
    c.gpu.fp8_split_accumulator_slowdown = kFp8SplitAccumulatorSlowdownHopper;
    c.gpu.calibration.pop_back();  // the closing parenthesis of dgx's description
    c.gpu.calibration += "; FP8 dgrad/wgrad GEMMs with TE's split accumulator 1.15x slower)";
    return c;
  }
  if (name == "dgx-a100")  // no NVLS: the A100's NVSwitch gen 2 has no NVLink SHARP
    return dgx("dgx-a100", nodes,
               {"A100-SXM4-80GB", kA100PeakBf16FlopsPerS, kA100MemoryBytes, kA100HbmBytesPerS, kAttnFwdEfficiency,
                kAttnBwdEfficiency},
               kA100SmCount, kNvlink3BytesPerS, kCx6AchievedBytesPerS, {0, 0, kLlMaxAmpereBytesPerS});
  if (name == "dgx-b200") {
    auto c = dgx("dgx-b200", nodes,
                 {"B200-180GB", kB200PeakBf16FlopsPerS, kB200MemoryBytes, kB200HbmBytesPerS, kAttnFwdEfficiency,
                  kAttnBwdEfficiency},
                 kB200SmCount, kNvlink5BytesPerS, kCx7AchievedBytesPerS,
                 {kNvlsBlackwellBusBytesPerS, kNvlsLatencyS, kLlMaxBlackwellBytesPerS});
    c.gpu.peak_fp8_flops_per_s = kB200PeakFp8FlopsPerS;
    return c;
  }
  return std::nullopt;
}

std::vector<std::string> cluster_preset_names() { return {"dgx-a100", "dgx-b200", "dgx-h100", "dgx-h200"}; }

}  // namespace hcpsim
