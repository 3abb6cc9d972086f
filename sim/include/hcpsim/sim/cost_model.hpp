#pragma once
/// Cost model: the duration of every compute op of a Schedule from a roofline with a per-GPU efficiency table,
/// and the contention-free message formula (message_ps) that the flow-level network model
/// (flow_network.hpp) reproduces exactly when flows do not share links. The simulator times messages with the
/// flow model; the closed forms here are kept as references for tests and quick estimates.
///
/// Kernel times are for a kernel that has the GPU to itself; the simulator divides the GPU between kernels that
/// run at the same time and slows compute while communication kernels run (simulator.hpp, SimOptions).
///
/// Every duration is computed in seconds as one expression and rounded once by seconds_to_ps().

#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/schedule.hpp"
#include "hcpsim/core/types.hpp"
#include "hcpsim/sim/event_queue.hpp"

namespace hcpsim::sim {

/// Dense FP32 (TF32 tensor core) peak as a fraction of the dense BF16 peak.
/// Source: NVIDIA datasheets: H100 SXM 494.7 vs 989.4 TFLOP/s (TF32 vs BF16, dense); A100 SXM 156 vs 312;
/// B200 1.1 vs 2.25 PFLOP/s (≈ 0.49). Assumption: an fp32 attention kernel runs on TF32 tensor cores at the
/// same efficiency (attn_fwd/bwd_efficiency) as a bf16 one. TE itself has no fp32 FlashAttention path;
/// fp32 schedules exist for the oracle scenarios, and timing them is an estimate only.
constexpr double kFp32PeakFraction = 0.5;

/// Dense FP64 (tensor core) peak as a fraction of the dense BF16 peak.
/// Source: NVIDIA H100 SXM datasheet: 66.9 TFLOP/s FP64 tensor core vs 989.4 TFLOP/s BF16 (dense).
/// Used for every GPU model (A100: 19.5/312 = 0.0625; B200 is lower); fp64 schedules are oracle-only.
constexpr double kFp64PeakFraction = 66.9 / 989.4;

/// The two link levels of the two-level cluster model (ClusterSpec::nvlink, ClusterSpec::network).
enum class LinkLevel { intra_node = 0, inter_node = 1 };
/// Number of LinkLevel values (for arrays indexed by level).
constexpr int kLinkLevelCount = 2;
/// "intra_node" | "inter_node".
std::string to_string(LinkLevel level);

/// The level a message between two GPUs crosses: intra_node when both sit on the same node.
/// @param node_a, node_b  node indices (0-based) of the two GPUs.
LinkLevel link_level(int64_t node_a, int64_t node_b);

/// ClusterSpec::nvlink for intra_node, ClusterSpec::network for inter_node.
const LinkSpec& link_spec(const ClusterSpec& cluster, LinkLevel level);

/// Tensor-core peak of `dtype` as a fraction of GpuSpec::peak_bf16_flops_per_s: 1 for bf16/fp16,
/// kFp32PeakFraction for fp32, kFp64PeakFraction for fp64.
double peak_fraction(Dtype dtype);

/// Compulsory HBM traffic of an attention block op in bytes: every input row range it reads once and every
/// output buffer it writes once (flash-attention kernels keep the score matrix on chip).
/// Forward: q[q_rows], k[kv_rows], v[kv_rows] read; out, lse written.
/// Backward: q, out, dout, lse at q_rows and k, v at kv_rows read; dq, dk, dv written.
/// Derived from the buffer declarations, because Op::bytes is defined for comm and elementwise ops only.
/// @param op       an attn_fwd_block or attn_bwd_block op of `program`; HCPSIM_ASSERT otherwise.
/// @param program  the rank program owning the op's buffers.
int64_t attention_block_hbm_bytes(const Op& op, const RankProgram& program);

/// Roofline time of an attention block: max(flops / (peak_bf16 · peak_fraction(dtype) · efficiency),
/// hbm_bytes / hbm_bandwidth), efficiency = gpu.attn_fwd_efficiency (forward) or gpu.attn_bwd_efficiency
/// (backward). No launch overhead: attention kernels are long compared to it.
/// @param kind  OpKind::attn_fwd_block or OpKind::attn_bwd_block; HCPSIM_ASSERT otherwise.
/// @param flops ≥ 0; @param hbm_bytes ≥ 0. The GPU rates and efficiencies must be > 0 (HCPSIM_ASSERT).
/// @return duration in ps.
TimePs attention_block_ps(OpKind kind, double flops, int64_t hbm_bytes, Dtype dtype, const GpuSpec& gpu);

/// Efficiency (achieved / peak) of an attention block from a GpuSpec table (attn_fwd_table / attn_bwd_table).
/// Lookup: points of the block's mask class (causal or not; all points if the table has none of that class);
/// the two tabulated head dims around `head_dim` (clamped at the ends), linear in head dim between them; for
/// each, bilinear interpolation in (log2 q_rows, log2 kv_rows) over that head dim's grid, clamped at its edges.
/// @param table  non-empty; for each (causal, head_dim) the points must form a full rows × cols grid
///   (HCPSIM_ASSERT naming the missing corner otherwise). @param q_rows, kv_rows ≥ 1.
double table_efficiency(const std::vector<EfficiencyPoint>& table, int64_t head_dim, int64_t q_rows, int64_t kv_rows,
                        bool causal);

/// Query (forward) or key (backward) rows per thread block of a FlashAttention-style kernel: the grid is
/// ceil(rows / 128) × batch × heads. Source: FlashAttention-2 (Dao 2023, arXiv:2307.08691) §3.2 (forward
/// parallel over query blocks, backward over key blocks), flash_fwd_launch_template.h run_mha_fwd_hdim128
/// (kBlockM = 128); FlashAttention-3 hopper/tile_size.h (kBlockM = 128 for head dim 128). Used for every head dim
/// and for cuDNN as well (assumption).
inline constexpr int64_t kAttentionTileRows = 128;
/// Tiles of the shape the published curves were measured at: batch·seqlen = 16K tokens, 16 heads, so
/// (16384 / 128) · 16 = 2048 tiles at every tabulated length 512 … 16K. Source: FlashAttention-3 (arXiv:2407.08608)
/// §4.1 benchmark setup.
inline constexpr int64_t kAttentionReferenceTiles = 16384 / kAttentionTileRows * 16;

/// Fraction of the last wave that is busy: w / ceil(w), w = tiles / sm_count (one tile per SM at a time,
/// assumption). Example: 2048 tiles on 132 SMs → 15.52 / 16 = 0.9697. @param tiles ≥ 1, sm_count ≥ 1.
double attention_wave_factor(int64_t tiles, int64_t sm_count);

/// Wave-quantization correction of a tabulated efficiency for a block of `tiles` tiles:
/// attention_wave_factor(tiles) / attention_wave_factor(kAttentionReferenceTiles), so the published shape
/// reproduces exactly and only a different tile count changes the time. 1 when sm_count is 0.
double attention_wave_correction(int64_t tiles, int64_t sm_count);

/// The fraction of a FlashAttention-style kernel's work that is useful for one q_rows × kv_rows (sub-)block:
/// its pairs over the pairs of the block rounded up to whole kAttentionTileRows tiles in both dimensions
/// (bottom-right causal when `causal`), so 1 for multiples of 128 (the tabulated shapes) and ≈ n(n+1)/2 / 8256 for
/// a causal sequence of n < 128 tokens, which still occupies a whole 128 × 128 tile. Source: FlashAttention-2
/// §3.1-3.2 (work in kBlockM × kBlockN tiles; varlen batches pad each sequence to its own tiles).
/// @param q_rows, kv_rows ≥ 0 (1 when either is 0).
double attention_tile_factor(int64_t q_rows, int64_t kv_rows, bool causal);

/// Efficiency of an attention block op with a document mask (THD): one varlen launch over its per-sequence
/// sub-blocks (document_sub_blocks), each at table_efficiency of its own (q rows, kv rows) — or the scalar — times
/// attention_tile_factor, combined so that times add (Σ pairs / Σ pairs_s / e_s), then wave-corrected over the
/// launch's Σ_s ceil(rows_s / 128) × batch × heads tiles and capped at 1 when tabulated; so many short sequences
/// run slower per FLOP than one long one.
/// Efficiency of an attention block op without one: table_efficiency over the op's (dk, q rows, kv rows, mask ≠ none) times
/// attention_wave_correction of its tiles (ceil(q_rows / 128) forward, ceil(kv_rows / 128) backward, × batch ×
/// query heads of the q buffer), capped at 1, when the GPU's table for its direction is non-empty; else
/// gpu.attn_fwd_efficiency / attn_bwd_efficiency (scalars are taken as they are).
double attention_block_efficiency(const Op& op, const RankProgram& program, const GpuSpec& gpu);

/// attention_block_ps with an explicit efficiency in (0, 1] instead of the GPU's scalar one.
TimePs attention_block_ps(OpKind kind, double flops, int64_t hbm_bytes, Dtype dtype, const GpuSpec& gpu,
                          double efficiency);

/// Time of a memory-bound elementwise kernel (lse_merge, out_correction, copy):
/// gpu.kernel_launch_overhead_s + bytes / hbm_bandwidth. @param bytes ≥ 0 read + written. @return ps.
TimePs elementwise_ps(int64_t bytes, const GpuSpec& gpu);

/// Output tile of the GEMM wave-quantization model: 128 × 256, the tile of CUTLASS's and cuBLAS's Hopper
/// warp-specialized BF16/FP8 kernels for large GEMMs (CUTLASS media/docs/efficient_gemm.md; CUTLASS 3 example
/// 48_hopper_warp_specialized_gemm uses 128x256 tiles for its peak numbers).
constexpr int64_t kGemmTileRows = 128;
constexpr int64_t kGemmTileCols = 256;
/// Fixed time of one output tile outside its K main loop (pipeline fill of the shared-memory stages and the
/// epilogue), as K elements of the BF16 main loop; FP8's main loop runs twice as fast per K, so the same time is
/// twice as many FP8 K elements (768). Fitted (4 points, rms 2.8%, worst 5.3%) on published H800-SXM FP8 GEMM
/// rates at M = 4096 (DeepGEMM PR #74, 128x128 tiles; secondary): K 512 → 591, 1536 → 999, 2048 → 1031,
/// 16384 → 1404 TFLOP/s (H800 SXM has H100 SXM's 132 SMs and FP8 tensor rate). tests/step/training_step_test.cpp
/// checks the fit.
constexpr int64_t kGemmTileFillK = 384;
/// The square GEMM size at which gemm_efficiency_bf16 / _fp8 were measured (cluster_spec.cpp): the shape
/// factor is 1 there.
constexpr int64_t kGemmReferenceSize = 8192;

/// Efficiency multiplier of an m × n × k GEMM relative to the measured large GEMM (kGemmReferenceSize³):
///   q(m, n) / q(ref) · f(k) / f(ref), where
///   q = tiles / (ceil(tiles / sm_count) · sm_count), tiles = ceil(m / 128) · ceil(n / 256) (wave quantization:
///       the last wave of tiles leaves SMs idle), 1 when gpu.sm_count is 0;
///   f(k) = k / (k + fill), fill = kGemmTileFillK (BF16) or 2 · kGemmTileFillK (FP8) (per-tile fill and epilogue).
/// The factor may exceed 1 slightly for shapes whose last wave is fuller than the reference's; gemm_ps caps the
/// efficiency at 1. @param m, n, k ≥ 1 (HCPSIM_ASSERT). Source: wave quantization as in NVIDIA's "Matrix
/// Multiplication Background User's Guide" (Deep Learning Performance docs, "Wave Quantization").
double gemm_shape_factor(int64_t m, int64_t n, int64_t k, bool fp8, const GpuSpec& gpu);

/// Time of an m × n × k GEMM: launch overhead + max(2·m·n·k / (peak · efficiency), bytes / HBM bandwidth),
/// peak = gpu.peak_fp8_flops_per_s and efficiency = gemm_efficiency_fp8 when `shape.fp8` (divided by
/// fp8_split_accumulator_slowdown, floored at 1, when `shape.split_accumulator`), else peak_bf16 ·
/// peak_fraction(dtype) and gemm_efficiency_bf16; efficiency multiplied by gemm_shape_factor, capped at 1.
/// @param bytes compulsory HBM traffic. HCPSIM_ASSERT when the needed rate is not > 0 or a dimension is < 1.
/// @return ps. Source: roofline model (Williams et al. 2009) with the efficiencies of cluster_spec.cpp.
TimePs gemm_ps(const GemmOp& shape, int64_t bytes, Dtype dtype, const GpuSpec& gpu);

/// Duration of a non-communication op of `program`: attention blocks by attention_block_ps (with
/// attention_block_hbm_bytes, attention_block_efficiency and the schedule's element type), GEMMs by gemm_ps,
/// elementwise ops (and lse_merge, out_correction, copy) by elementwise_ps(op.bytes), alloc/free 0. @param dtype  AttentionShape::dtype of the schedule.
/// HCPSIM_ASSERT for communication ops (their time depends on peers and the network).
TimePs compute_op_ps(const Op& op, const RankProgram& program, Dtype dtype, const GpuSpec& gpu);

// Message and collective sizes are core's lowered byte counts (message_send_bytes, collective_peer_bytes in
// hcpsim/core/lowering.hpp).

/// Time of one point-to-point message of `bytes` crossing `level`, from rendezvous to delivery:
/// message_latency_s + link latency_s + bytes / link bandwidth (NCCL send/recv bus factor 1, docs/architecture.md "Numbers we stand on").
/// @return ps. HCPSIM_ASSERT if the link bandwidth is not > 0.
TimePs message_ps(int64_t bytes, LinkLevel level, const ClusterSpec& cluster);

}  // namespace hcpsim::sim
