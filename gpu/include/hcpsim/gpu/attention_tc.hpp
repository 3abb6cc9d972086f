#pragma once
/// Tensor-core attention block kernels: the forward and backward of one attention block (AttnFwdArgs,
/// AttnBwdArgs of block_math.hpp) tiled as FlashAttention-2 does, with WMMA 16×16×16 matrix products on bf16 or
/// fp16 inputs and fp32 accumulation. They compute what attn_fwd_row, attn_bwd_delta_row, attn_bwd_dq_row and
/// attn_bwd_dkdv_row compute, up to the rounding points of the tensor-core path:
///   - the score and gradient products take their inputs in the run's 16-bit format (exact: the executor's
///     buffers hold values of that format) and accumulate in fp32 in the hardware's order;
///   - the softmax probabilities P (forward, for P·V and P^T·dO) and dS (backward, for dS·K and dS^T·Q) are
///     rounded to the 16-bit format before their matrix products, as FlashAttention-2 and TE's fused attention
///     do; the running max, running sum, lse and D = Σ dout·out stay fp32;
///   - out, dq, dk, dv are rounded to the format once, at the end (semantics::round_to_dtype).
/// Every kernel is deterministic (no atomics): dK/dV are summed by one thread block per KV tile over the query
/// tiles and the query heads of the GQA group in ascending order; dQ by one thread block per query tile.
/// Source: Dao 2023, "FlashAttention-2" (Algorithms 1 and 2); NVIDIA CUDA C++ Programming Guide, "Warp Matrix
/// Functions" (nvcuda::wmma); docs/algorithm.md §4.4 and §5.2 (the block semantics).

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "hcpsim/gpu/block_math.hpp"

namespace hcpsim::gpu {

/// Query rows per tile and key/value rows per tile of every tensor-core kernel (Br = Bc = 64).
/// Source: FlashAttention-2 §3.3 (block sizes {64, 128} × {64, 128} for head dims 64 and 128); 64 × 64 keeps the
/// backward's four 16-bit tiles and two fp32 score tiles under 104 KiB of shared memory (two blocks per SM).
constexpr int kTensorCoreTileRows = 64;

/// A device view of one buffer [b, rows, heads, width] (bshd, row-major) stored as native bf16: the storage of
/// the benchmark and of TE itself, as opposed to the executor's float storage (TensorRef).
struct TensorRefBf16 {
  __nv_bfloat16* data = nullptr;
  int64_t rows = 0;
  int64_t heads = 0;
  int64_t width = 0;
  HCPSIM_HOST_DEVICE int64_t index(int64_t b, int64_t r, int64_t h, int64_t w) const {
    return ((b * rows + r) * heads + h) * width + w;
  }
  HCPSIM_HOST_DEVICE __nv_bfloat16* at(int64_t b, int64_t r, int64_t h) const { return data + index(b, r, h, 0); }
};

/// AttnFwdArgs with native bf16 storage for q, k, v, out (the format is bf16); lse stays fp32 [batch, ≥ nq, hq, 1].
/// Same row conventions: q rows [q_row0, q_row0 + nq), KV rows [kv_row0, kv_row0 + nk), out and lse rows [0, nq).
struct AttnFwdArgsBf16 {
  TensorRefBf16 q, k, v, out;
  TensorRef lse;
  int64_t batch = 0, q_row0 = 0, nq = 0, kv_row0 = 0, nk = 0;
  BlockMask mask = BlockMask::none;
  float scale = 0;  ///< softmax_scale
};

/// AttnBwdArgs with native bf16 storage for q, k, v, out, dout, dq, dk, dv (the format is bf16); lse is fp32
/// [batch, ≥ q_row0 + nq, hq, 1] and delta fp32 scratch [batch, nq, hq], as in AttnBwdArgs.
struct AttnBwdArgsBf16 {
  TensorRefBf16 q, k, v, out, dout, dq, dk, dv;
  TensorRef lse;
  float* delta = nullptr;
  int64_t batch = 0, q_row0 = 0, nq = 0, kv_row0 = 0, nk = 0;
  BlockMask mask = BlockMask::none;
  float scale = 0;
};

/// True if the tensor-core forward supports `args`: format bf16 or fp16; q, k, v, out widths equal and in
/// {64, 128}; batch, nq, nk ≥ 0 (any row counts, tile multiples or not, zero included); any BlockMask; GQA with
/// k.heads ≥ 1 and q.heads % k.heads == 0; batch and q.heads ≤ 65535 (grid limits); every non-null data pointer
/// 16-byte aligned (vector loads; cudaMalloc gives 256). Otherwise use launch_attn_fwd_clear (kernels.hpp).
bool tensor_core_supported(const AttnFwdArgs& args);
/// True if the tensor-core backward supports `args`: the forward's conditions on q, k, v, out, plus dout, dq, dk,
/// dv of the same width and a non-null delta when nq > 0.
bool tensor_core_supported(const AttnBwdArgs& args);
/// The forward's conditions for native bf16 storage (no format to check).
bool tensor_core_supported(const AttnFwdArgsBf16& args);
/// The backward's conditions for native bf16 storage (no format to check).
bool tensor_core_supported(const AttnBwdArgsBf16& args);

/// Launches the tensor-core forward block on `stream` (asynchronous). For every (b, r, h): out[b, r, h, :]
/// (rows [0, nq)) rounded to args.format and lse[b, r, h] in fp32 natural log, as attn_fwd_row; a row with no
/// visible key gets lse = −inf and out = 0.
/// Grid: ⌈nq/64⌉ × q.heads × batch blocks of 128 threads (4 warps × 16 query rows); dynamic shared memory
/// 45,312 B (dk = 64) or 61,696 B (dk = 128).
/// @return false, launching nothing, when !tensor_core_supported(args); true otherwise (also when there is no
///         row to compute).
/// @throws DeviceError("file:line: kernel launch attn_fwd_tensor_core: ...") when the launch fails.
bool launch_attn_fwd_tensor_core(const AttnFwdArgs& args, cudaStream_t stream);

/// Launches the tensor-core backward block on `stream` (asynchronous): fills args.delta (D_r = Σ dout·out, fp32,
/// as attn_bwd_delta_row), then dk, dv rows [0, nk) (attn_bwd_dkdv_row) and dq rows [0, nq) (attn_bwd_dq_row),
/// rounded to args.format. Deterministic (no atomics).
/// Grids: delta ⌈batch·nq·hq/8⌉ blocks of 256 threads (a warp per row); dK/dV ⌈nk/64⌉ × k.heads × batch and
/// dQ ⌈nq/64⌉ × q.heads × batch blocks of 256 threads (8 warps); dynamic shared memory 72,704 B (dk = 64) or
/// 105,472 B (dk = 128) for each of the last two.
/// @return false, launching nothing, when !tensor_core_supported(args); true otherwise.
/// @throws DeviceError("file:line: kernel launch attn_bwd_..._tensor_core: ...") when a launch fails.
bool launch_attn_bwd_tensor_core(const AttnBwdArgs& args, cudaStream_t stream);

/// launch_attn_fwd_tensor_core for native bf16 storage (the benchmark's path); out is bf16 (round to nearest
/// even of the fp32 result, the same value semantics::round_to_dtype(·, bf16) gives).
bool launch_attn_fwd_tensor_core_bf16(const AttnFwdArgsBf16& args, cudaStream_t stream);
/// launch_attn_bwd_tensor_core for native bf16 storage (the benchmark's path); dq, dk, dv are bf16.
bool launch_attn_bwd_tensor_core_bf16(const AttnBwdArgsBf16& args, cudaStream_t stream);

}  // namespace hcpsim::gpu
