#pragma once
// The tensor-core attention kernels and their device helpers (templates), included by attention_tc.cu, which
// launches them. Kept apart from the launchers so that a host emulation of the CUDA features they use
// (tests/gpu/tc_emulation.hpp, defining HCPSIM_TC_HOST_EMULATION) can compile exactly these kernel bodies on the
// CPU and check their indexing, masking and barriers without a GPU. Everything is in an anonymous namespace:
// each including translation unit has its own copy.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#if !defined(HCPSIM_TC_HOST_EMULATION)
#include <cuda_fp16.h>
#include <cuda_pipeline_primitives.h>
#include <mma.h>
#endif

#include "hcpsim/gpu/attention_tc.hpp"
#include "hcpsim/gpu/block_math.hpp"

/// Declares the kernel's dynamic shared memory as `name` (the host emulation points it at a per-block buffer).
#if !defined(HCPSIM_TC_SHARED_BYTES)
#define HCPSIM_TC_SHARED_BYTES(name) extern __shared__ __align__(128) unsigned char name[]
#endif

/// Layout of every kernel here: a thread block owns one 64-row tile (query rows for the forward and dQ, KV rows
/// for dK/dV) of one head and one batch entry; warps own 16-row slices of it. Tiles of q, k, v, dout are staged
/// in shared memory as 16-bit values ([64][D + 8], row-major); scores and their gradients as fp32 ([64][64 + 4]).
/// Matrix products use nvcuda::wmma 16×16×16 fragments with fp32 accumulators; element-wise steps (mask, softmax,
/// dS) read the fp32 tiles from shared memory. Source: FlashAttention-2 (Dao 2023) Algorithms 1 and 2.

namespace hcpsim::gpu {

namespace {


namespace wmma = nvcuda::wmma;

/// Rows (query or key/value) per tile; also the column chunk of the output staging.
/// Source: attention_tc.hpp kTensorCoreTileRows (FlashAttention-2 §3.3).
constexpr int kTile = kTensorCoreTileRows;
/// WMMA fragment edge (m = n = k = 16). Source: CUDA C++ Programming Guide, Warp Matrix Functions, the only
/// shape with bf16 inputs besides 32×8×16 and 8×32×16.
constexpr int kFrag = 16;
/// Threads per warp. Source: CUDA C++ Programming Guide, SIMT architecture.
constexpr int kWarpSize = 32;
/// Warps of the forward kernel: 4 × 16 = 64 query rows, each warp a full row slice (online softmax per warp).
/// Source: FlashAttention-2 §3.3 (4 warps per thread block for the forward).
constexpr int kFwdWarps = 4;
constexpr int kFwdThreads = kFwdWarps * kWarpSize;
/// Minimum resident thread blocks per SM requested of the forward: on sm_90 three (registers capped at 168 per
/// thread; 3 × 61,696 B of shared memory for dk = 128 fit the H100/H200's 228 KiB), on sm_80 two (the A100's
/// 164 KiB holds only two, so a tighter register cap would only spill). Chosen per __CUDA_ARCH__ as the CUDA C++
/// Programming Guide's __launch_bounds__ example does (the host pass never uses it for a launch configuration).
/// Source: NVIDIA H100 and A100 architecture whitepapers, SM resources tables.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr int kFwdMinBlocksPerSm = 2;
#else
constexpr int kFwdMinBlocksPerSm = 3;
#endif
/// Warps of the backward kernels: warps 0–3 own the first product of a 16-row slice, warps 4–7 the second
/// (S and dP, then dV and dK, or the two column halves of dQ), so both halves of the block stay busy.
/// Source: FlashAttention-2 §3.3 (8 warps per thread block for the backward).
constexpr int kBwdWarps = 8;
constexpr int kBwdThreads = kBwdWarps * kWarpSize;
/// Minimum resident thread blocks per SM requested of the backward kernels: on sm_90 two (registers capped at
/// 128 per thread; 2 × 105,472 B of shared memory for dk = 128 fit the H100/H200's 228 KiB), on sm_80 one (the
/// A100's 164 KiB holds one such block). Device passes only. Source: NVIDIA H100 and A100 architecture
/// whitepapers, SM resources tables.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr int kBwdMinBlocksPerSm = 1;
#else
constexpr int kBwdMinBlocksPerSm = 2;
#endif
/// Padding (16-bit elements) of every 16-bit shared tile row: keeps WMMA's ldm a multiple of 8 elements (16 bytes)
/// and shifts successive rows by 4 banks, so fragment loads of 16 rows do not all hit one bank.
/// Source: CUDA C++ Programming Guide, wmma::load_matrix_sync (ldm multiple of 8 for 16-bit types).
constexpr int kPadHalf = 8;
/// Padding (fp32 elements) of every fp32 shared tile row: ldm multiple of 4 for float, 4-bank shift per row.
/// Source: CUDA C++ Programming Guide, wmma::store_matrix_sync (ldm multiple of 4 for float).
constexpr int kPadFloat = 4;
/// Bytes of one bf16 or fp16 element. Source: IEEE 754 binary16; bfloat16 = top half of binary32.
constexpr int kHalfBytes = 2;
/// log2(e) in fp32: exp(x) is evaluated as exp2(x·log2 e), the form the hardware's ex2 instruction takes.
/// Source: FlashAttention-2 reference implementation's softmax (scale_softmax_log2); M_LOG2E = 1.4426950408889634.
constexpr float kLog2e = 1.4426950408889634f;
/// Largest gridDim.y and gridDim.z. Source: CUDA C++ Programming Guide, Table "Technical Specifications per
/// Compute Capability" (maximum y- or z-dimension of a grid of thread blocks: 65535).
constexpr int64_t kMaxGridYz = 65535;
/// Largest gridDim.x. Source: the same table (2^31 − 1).
constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
/// 16-bit (P, dS) pairs per thread in the element-wise step of the backward: a 64 × 64 tile over 256 threads.
/// Source: kTile, kBwdThreads.
constexpr int kPairsPerThread = kTile * kTile / 2 / (kBwdWarps * kWarpSize);
/// Rows of the delta kernel per thread block: one warp per (b, r, h) row.
/// Source: kBwdWarps, the same 256-thread block size as the backward kernels.
constexpr int kDeltaRowsPerBlock = kBwdWarps;

template <class T>
using FragA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, T, wmma::row_major>;
template <class T>
using FragBRow = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::row_major>;
template <class T>
using FragBCol = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;

/// Leading dimensions (elements) of the shared tiles for head dim D.
template <int D>
struct Pitch {
  static constexpr int half_tile = D + kPadHalf;       ///< q, k, v, dout tiles: [64][D + 8] 16-bit
  static constexpr int scores = kTile + kPadFloat;     ///< S, dP tiles and output staging: [·][64 + 4] fp32
  static constexpr int probs = kTile + kPadHalf;       ///< P, dS tiles: [·][64 + 8] 16-bit
  static constexpr size_t half_tile_bytes = size_t{kTile} * half_tile * kHalfBytes;
  static constexpr size_t score_tile_bytes = size_t{kTile} * scores * sizeof(float);
};

/// Shared memory of the forward kernel (byte offsets): k [64][D+8], v [64][D+8], then a work area holding first
/// the q tile [64][D+8] (read once into registers) and afterwards the per-warp S [16][68] fp32 and P [16][72]
/// 16-bit tiles, then one fp32 per row (rescale factors).
template <int D>
struct FwdSmem {
  using P = Pitch<D>;
  static constexpr size_t k = 0;
  static constexpr size_t v = P::half_tile_bytes;
  static constexpr size_t work = 2 * P::half_tile_bytes;
  static constexpr size_t scores_bytes = size_t{kFwdWarps} * kFrag * P::scores * sizeof(float);
  static constexpr size_t probs_bytes = size_t{kFwdWarps} * kFrag * P::probs * kHalfBytes;
  static constexpr size_t work_bytes =
      P::half_tile_bytes > scores_bytes + probs_bytes ? P::half_tile_bytes : scores_bytes + probs_bytes;
  static constexpr size_t probs = work + scores_bytes;
  static constexpr size_t rows = work + work_bytes;
  static constexpr size_t bytes = rows + size_t{kFwdWarps} * kFrag * sizeof(float);
};

/// Shared memory of the dK/dV and dQ kernels (byte offsets): four 16-bit tiles [64][D+8] (k, v, q, dout), two
/// fp32 tiles [64][68] (S and dP; P and dS overwrite them as 16-bit [64][72]; output staging uses both as one
/// [128][68] area), then per query row: lse·log2 e, delta (fp32) and a visible-key count (int64).
template <int D>
struct BwdSmem {
  using P = Pitch<D>;
  static constexpr size_t k = 0;
  static constexpr size_t v = P::half_tile_bytes;
  static constexpr size_t q = 2 * P::half_tile_bytes;
  static constexpr size_t dout = 3 * P::half_tile_bytes;
  static constexpr size_t f = 4 * P::half_tile_bytes;
  static constexpr size_t g = f + P::score_tile_bytes;
  static constexpr size_t lse = g + P::score_tile_bytes;
  static constexpr size_t delta = lse + size_t{kTile} * sizeof(float);
  static constexpr size_t visible = delta + size_t{kTile} * sizeof(float);
  static constexpr size_t bytes = visible + size_t{kTile} * sizeof(int64_t);
};

static_assert(FwdSmem<64>::bytes == 45312 && FwdSmem<128>::bytes == 61696, "attention_tc.hpp documents these");
static_assert(BwdSmem<64>::bytes == 72704 && BwdSmem<128>::bytes == 105472, "attention_tc.hpp documents these");
static_assert(BwdSmem<128>::f % 128 == 0 && BwdSmem<64>::f % 128 == 0, "WMMA tiles need 32-byte alignment");
static_assert(FwdSmem<128>::probs % 128 == 0 && FwdSmem<64>::probs % 128 == 0, "WMMA tiles need 32-byte alignment");

/// A device view [b, rows, heads, width] of storage type S (float: the executor's; __nv_bfloat16: native).
template <class S>
struct View {
  S* data = nullptr;
  int64_t rows = 0, heads = 0, width = 0;
  __device__ S* at(int64_t b, int64_t r, int64_t h) const { return data + ((b * rows + r) * heads + h) * width; }
  __device__ int64_t row_stride() const { return heads * width; }
};

template <class S, class Ref>
View<S> view_of(const Ref& ref) {
  return View<S>{ref.data, ref.rows, ref.heads, ref.width};
}

/// Forward arguments for storage type S; `group` = q heads per kv head.
template <class S>
struct FwdParams {
  View<S> q, k, v, out;
  TensorRef lse;
  int64_t batch = 0, q_row0 = 0, nq = 0, kv_row0 = 0, nk = 0, group = 1;
  BlockMask mask = BlockMask::none;
  float scale = 0;
  Dtype format = Dtype::bf16;
};

/// Backward arguments for storage type S; `group` = q heads per kv head.
template <class S>
struct BwdParams {
  View<S> q, k, v, out, dout, dq, dk, dv;
  TensorRef lse;
  float* delta = nullptr;
  int64_t batch = 0, q_row0 = 0, nq = 0, kv_row0 = 0, nk = 0, group = 1;
  BlockMask mask = BlockMask::none;
  float scale = 0;
  Dtype format = Dtype::bf16;
};

template <class T>
__device__ inline T to_16bit(float x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(x);
  } else {
    return __float2bfloat16_rn(x);
  }
}

/// Two 16-bit values packed in 32 bits (element 0 at the lower address).
template <class T>
using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

/// Rounds two fp32 values to T (nearest even) and packs them, x at the lower address.
template <class T>
__device__ inline Pair<T> pack_pair(float x, float y) {
  if constexpr (std::is_same_v<T, __half>) {
    return __floats2half2_rn(x, y);
  } else {
    return __floats2bfloat162_rn(x, y);
  }
}

/// Stores 4 floats (exactly representable in T) as T at p (8-byte aligned).
template <class T>
__device__ inline void store4(T* p, float4 x) {
  reinterpret_cast<Pair<T>*>(p)[0] = pack_pair<T>(x.x, x.y);
  reinterpret_cast<Pair<T>*>(p)[1] = pack_pair<T>(x.z, x.w);
}

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

/// Final rounding of an output element: semantics::round_to_dtype for float storage (the run's format), round to
/// nearest even for bf16 storage (the same value).
__device__ inline void store_out(float* p, float x, Dtype format) { *p = semantics::round_to_dtype(x, format); }
__device__ inline void store_out(__nv_bfloat16* p, float x, Dtype) { *p = __float2bfloat16_rn(x); }

/// Cooperative copy of rows [0, valid_rows) of a [64, D] tile (row i at src + i·stride, elements of S) into the
/// shared 16-bit tile dst [64][D + 8]; rows [valid_rows, 64) become zeros (never NaN, whatever the buffer holds
/// past the block). src must be 16-byte aligned and stride a multiple of 8. Float storage is converted through
/// registers (4 vectors in flight per thread); bf16 storage is copied with cp.async (no data registers; the
/// loops are only partly unrolled so that their addresses are not all held across the KV loop), committed as
/// one group: call wait_tile_loads before the barrier that publishes the tile.
template <class T, int D, int kThreads, class S>
__device__ void load_tile(T* dst, const S* src, int64_t stride, int valid_rows) {
  constexpr int ld = Pitch<D>::half_tile;
  if constexpr (std::is_same_v<S, float>) {
    constexpr int kPerRow = D / 4;
    static_assert((kTile * kPerRow) % kThreads == 0, "whole vectors per thread");
#pragma unroll 4
    for (int it = 0; it < kTile * kPerRow / kThreads; ++it) {
      const int i = it * kThreads + static_cast<int>(threadIdx.x);
      const int r = i / kPerRow;
      const int c = (i % kPerRow) * 4;
      float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (r < valid_rows) x = __ldg(reinterpret_cast<const float4*>(src + r * stride + c));
      store4(dst + r * ld + c, x);
    }
  } else {
    static_assert(std::is_same_v<S, __nv_bfloat16> && std::is_same_v<T, __nv_bfloat16>, "bf16 storage only");
    constexpr int kPerRow = D / 8;
    static_assert((kTile * kPerRow) % kThreads == 0, "whole vectors per thread");
#pragma unroll 2
    for (int it = 0; it < kTile * kPerRow / kThreads; ++it) {
      const int i = it * kThreads + static_cast<int>(threadIdx.x);
      const int r = i / kPerRow;
      const int c = (i % kPerRow) * 8;
      if (r < valid_rows) {
        __pipeline_memcpy_async(dst + r * ld + c, src + r * stride + c, sizeof(uint4));
      } else {
        *reinterpret_cast<uint4*>(dst + r * ld + c) = make_uint4(0u, 0u, 0u, 0u);
      }
    }
    __pipeline_commit();
  }
}

/// Waits until this thread's tile copies, except the newest kPending groups, have landed in shared memory (a
/// no-op for float storage, whose copies are synchronous). A __syncthreads must follow before other threads read
/// the tiles.
template <int kPending>
__device__ inline void wait_tile_loads() {
  __pipeline_wait_prior(kPending);
}

/// One warp: dst[16][64] (fp32, pitch Pitch<D>::scores) = A · Bᵀ with A = a_rows [16][D] and B = b_rows [64][D],
/// both shared 16-bit tiles of pitch D + 8. S = Q·Kᵀ, dP = dO·Vᵀ, Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ all have this form.
template <class T, int D>
__device__ void product_abt(const T* a_rows, const T* b_rows, float* dst) {
  constexpr int ld = Pitch<D>::half_tile;
  FragAcc acc[kTile / kFrag];
#pragma unroll
  for (int j = 0; j < kTile / kFrag; ++j) wmma::fill_fragment(acc[j], 0.0f);
#pragma unroll
  for (int kk = 0; kk < D / kFrag; ++kk) {
    FragA<T> a;
    wmma::load_matrix_sync(a, a_rows + kk * kFrag, ld);
#pragma unroll
    for (int j = 0; j < kTile / kFrag; ++j) {
      FragBCol<T> bt;  // Bᵀ (D × 64) is B (64 × D, row-major) read column-major
      wmma::load_matrix_sync(bt, b_rows + j * kFrag * ld + kk * kFrag, ld);
      wmma::mma_sync(acc[j], a, bt, acc[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < kTile / kFrag; ++j)
    wmma::store_matrix_sync(dst + j * kFrag, acc[j], Pitch<D>::scores, wmma::mem_row_major);
}

/// One warp: acc[f] += A · B[:, 16f : 16f + 16] for f < kFrags, with A = a_rows [16][64] (16-bit, pitch 64 + 8:
/// P, Pᵀ, dS or dSᵀ) and B = b [64][·] (16-bit, pitch D + 8, already offset to the first column).
template <class T, int D, int kFrags>
__device__ void product_ab_accumulate(FragAcc (&acc)[kFrags], const T* a_rows, const T* b) {
  constexpr int ld = Pitch<D>::half_tile;
  FragA<T> a[kTile / kFrag];
#pragma unroll
  for (int kk = 0; kk < kTile / kFrag; ++kk) wmma::load_matrix_sync(a[kk], a_rows + kk * kFrag, Pitch<D>::probs);
#pragma unroll
  for (int f = 0; f < kFrags; ++f) {
#pragma unroll
    for (int kk = 0; kk < kTile / kFrag; ++kk) {
      FragBRow<T> bb;
      wmma::load_matrix_sync(bb, b + kk * kFrag * ld + f * kFrag, ld);
      wmma::mma_sync(acc[f], a[kk], bb, acc[f]);
    }
  }
}

/// One warp: writes its 16 × 16·kFrags fp32 block acc (rows row0.., columns col0..) times `mult`, rounded, to
/// dst[b, row, head, col0 + ·] for rows < rows_end, staging each 64-column chunk through stage [16][68] fp32.
template <class S, int kFrags>
__device__ void write_warp_block(const FragAcc (&acc)[kFrags], float* stage, const View<S>& dst, int64_t b,
                                 int64_t row0, int64_t rows_end, int64_t head, int col0, float mult,
                                 Dtype format) {
  constexpr int kPassFrags = kFrags < kTile / kFrag ? kFrags : kTile / kFrag;
  constexpr int kCols = kPassFrags * kFrag;
  constexpr int ld = kTile + kPadFloat;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
#pragma unroll
  for (int pass = 0; pass < kFrags / kPassFrags; ++pass) {
    __syncwarp();
#pragma unroll
    for (int j = 0; j < kPassFrags; ++j)
      wmma::store_matrix_sync(stage + j * kFrag, acc[pass * kPassFrags + j], ld, wmma::mem_row_major);
    __syncwarp();
    for (int r = 0; r < kFrag; ++r) {
      const int64_t row = row0 + r;
      if (row >= rows_end) break;
      S* out = dst.at(b, row, head) + col0 + pass * kCols;
      for (int c = lane; c < kCols; c += kWarpSize) store_out(out + c, stage[r * ld + c] * mult, format);
    }
  }
  __syncwarp();
}

/// One warp: multiplies row r of the 16-row accumulator block acc by factor[r], where row_of[e] is the row of
/// element e of any accumulator fragment (the element layout is the same for every fragment of one type).
template <int kFrags>
__device__ void scale_rows(FragAcc (&acc)[kFrags], const float* factor, const int (&row_of)[FragAcc::num_elements]) {
  float f_e[FragAcc::num_elements];
#pragma unroll
  for (int e = 0; e < FragAcc::num_elements; ++e) f_e[e] = factor[row_of[e]];
#pragma unroll
  for (int f = 0; f < kFrags; ++f) {
#pragma unroll
    for (int e = 0; e < FragAcc::num_elements; ++e) acc[f].x[e] *= f_e[e];
  }
}

/// Number of 64-row tiles covering n rows.
__host__ __device__ inline int64_t tile_count(int64_t n) { return (n + kTile - 1) / kTile; }

// ---------------------------------------------------------------------------------------------------------------
// Forward: one block per (query tile, q head, batch entry); KV tiles in ascending order with online softmax.
// ---------------------------------------------------------------------------------------------------------------

/// Thread block (128 threads) of the forward: q rows [r0, r0 + 64) of head h against KV tiles [0, ⌈visible/64⌉)
/// of kv head h / group. Warp w owns rows r0 + 16w..; lanes 2i and 2i+1 own row i of the warp's slice for the
/// softmax (even and odd columns). O stays in accumulator fragments; its per-row rescale uses a fragment holding
/// each element's row index (loaded from a [16][16] table, so it shares the accumulators' element layout).
template <class S, class T, int D>
__global__ void __launch_bounds__(kFwdThreads, kFwdMinBlocksPerSm) attn_fwd_tc_kernel(const FwdParams<S> p) {
  using L = FwdSmem<D>;
  using P = Pitch<D>;
  HCPSIM_TC_SHARED_BYTES(tc_smem);
  T* k_s = reinterpret_cast<T*>(tc_smem + L::k);  // [64][D+8]
  T* v_s = reinterpret_cast<T*>(tc_smem + L::v);  // [64][D+8]
  T* q_s = reinterpret_cast<T*>(tc_smem + L::work);  // [64][D+8], before the KV loop only
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  float* s_w = reinterpret_cast<float*>(tc_smem + L::work) + warp * kFrag * P::scores;  // [16][68] fp32
  T* p_w = reinterpret_cast<T*>(tc_smem + L::probs) + warp * kFrag * P::probs;           // [16][72]
  float* row_w = reinterpret_cast<float*>(tc_smem + L::rows) + warp * kFrag;             // [16]

  // Heaviest tiles first under a causal mask (the last query tiles see the most keys).
  const int64_t q_tile = int64_t{gridDim.x} - 1 - blockIdx.x;
  const int64_t h = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t g = h / p.group;
  const int64_t r0 = q_tile * kTile;
  const int q_valid = static_cast<int>(p.nq - r0 < kTile ? p.nq - r0 : kTile);

  load_tile<T, D, kFwdThreads>(q_s, p.q.at(b, p.q_row0 + r0, h), p.q.row_stride(), q_valid);
  wait_tile_loads<0>();
  __syncthreads();
  FragA<T> q_frag[D / kFrag];  // the warp's 16 query rows, held for the whole KV loop
#pragma unroll
  for (int kk = 0; kk < D / kFrag; ++kk)
    wmma::load_matrix_sync(q_frag[kk], q_s + warp * kFrag * P::half_tile + kk * kFrag, P::half_tile);
  __syncthreads();  // the work area becomes S and P

  for (int i = lane; i < kFrag * kFrag; i += kWarpSize) s_w[(i / kFrag) * P::scores + i % kFrag] = float(i / kFrag);
  __syncwarp();
  int row_of[FragAcc::num_elements];  // row (0..15) of accumulator element e, in every accumulator fragment
  {
    FragAcc rows;
    wmma::load_matrix_sync(rows, s_w, P::scores, wmma::mem_row_major);
#pragma unroll
    for (int e = 0; e < FragAcc::num_elements; ++e) row_of[e] = static_cast<int>(rows.x[e]);
  }
  FragAcc o[D / kFrag];
#pragma unroll
  for (int f = 0; f < D / kFrag; ++f) wmma::fill_fragment(o[f], 0.0f);

  const int my_row = lane >> 1;
  const int parity = lane & 1;
  const int64_t r_mine = r0 + warp * kFrag + my_row;
  const int64_t visible_mine = r_mine < p.nq ? semantics::visible_columns(p.mask, r_mine, p.nq, p.nk).end : 0;
  float row_max = -INFINITY;  // natural-log units, as attn_fwd_row
  float row_sum = 0.0f;
  // The keys any row of the tile sees (every IR mask's ranges start at key 0).
  const int64_t kv_end =
      semantics::tile_columns(semantics::block_mask_desc(p.mask, p.nq, p.nk), r0, r0 + q_valid - 1, p.nk).end;
  const int64_t kv_tiles = tile_count(kv_end);
  const float* s_row = s_w + my_row * P::scores;
  T* p_row = p_w + my_row * P::probs;

  for (int64_t t = 0; t < kv_tiles; ++t) {
    const int64_t c0 = t * kTile;
    const int kv_valid = static_cast<int>(p.nk - c0 < kTile ? p.nk - c0 : kTile);
    __syncthreads();  // every warp is done with the previous k, v tiles
    load_tile<T, D, kFwdThreads>(k_s, p.k.at(b, p.kv_row0 + c0, g), p.k.row_stride(), kv_valid);
    load_tile<T, D, kFwdThreads>(v_s, p.v.at(b, p.kv_row0 + c0, g), p.v.row_stride(), kv_valid);
    wait_tile_loads<1>();  // k has landed; v may still be in flight during S and the softmax
    __syncthreads();

    // S = Q·Kᵀ (16 × 64, fp32, unscaled) for the warp's rows.
#pragma unroll
    for (int j = 0; j < kTile / kFrag; ++j) {
      FragAcc s;
      wmma::fill_fragment(s, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / kFrag; ++kk) {
        FragBCol<T> kt;
        wmma::load_matrix_sync(kt, k_s + j * kFrag * P::half_tile + kk * kFrag, P::half_tile);
        wmma::mma_sync(s, q_frag[kk], kt, s);
      }
      wmma::store_matrix_sync(s_w + j * kFrag, s, P::scores, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of the row's 64 scores: masked keys (c ≥ visible, which covers c ≥ nk) count as −inf.
    const int64_t limit64 = visible_mine - c0;
    const int limit = static_cast<int>(limit64 < 0 ? 0 : (limit64 > kTile ? kTile : limit64));
    float tile_max = -INFINITY;
#pragma unroll 8
    for (int j = 0; j < kTile / 2; ++j) {
      const int c = 2 * j + parity;
      if (c < limit) tile_max = fmaxf(tile_max, s_row[c] * p.scale);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float new_max = fmaxf(row_max, tile_max);
    const float max_used = new_max == -INFINITY ? 0.0f : new_max;  // a row with no key yet: every p is 0
    const float rescale = exp2f((row_max - max_used) * kLog2e);      // exp(−inf) = 0 on the first keys
    float tile_sum = 0.0f;
#pragma unroll 8
    for (int j = 0; j < kTile / 2; ++j) {
      const int c = 2 * j + parity;
      const float e = c < limit ? exp2f((s_row[c] * p.scale - max_used) * kLog2e) : 0.0f;
      tile_sum += e;                // the sum is fp32, as FlashAttention's row sum
      p_row[c] = to_16bit<T>(e);     // P is rounded to the 16-bit format for P·V (TE's rounding point)
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    row_sum = row_sum * rescale + tile_sum;
    row_max = new_max;
    if (parity == 0) row_w[my_row] = rescale;
    wait_tile_loads<0>();
    __syncthreads();  // v is visible to every warp (and row_w to the warp)

    // O = O·diag(rescale) + P·V.
    scale_rows(o, row_w, row_of);
    product_ab_accumulate<T, D, D / kFrag>(o, p_w, v_s);
  }

  // out = O / sum (0 for a row that saw no key), lse = max + log(sum) (−inf for such a row).
  __syncwarp();
  if (parity == 0) row_w[my_row] = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
  __syncwarp();
  scale_rows(o, row_w, row_of);
  if (parity == 0 && r_mine < p.nq)
    p.lse.at(b, r_mine, h)[0] = visible_mine == 0 ? -INFINITY : row_max + logf(row_sum);
  write_warp_block<S, D / kFrag>(o, s_w, p.out, b, r0 + warp * kFrag, p.nq, h, 0, 1.0f, p.format);
}

// ---------------------------------------------------------------------------------------------------------------
// Backward.
// ---------------------------------------------------------------------------------------------------------------

/// D_r = Σ_w dout[r, w]·out[r, w] (fp32), one warp per (b, r, h) row, into delta[(b·nq + r)·hq + h].
template <class S>
__global__ void __launch_bounds__(kBwdThreads) attn_bwd_delta_tc_kernel(const BwdParams<S> p) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t item = int64_t{blockIdx.x} * kDeltaRowsPerBlock + static_cast<int>(threadIdx.x) / kWarpSize;
  const int64_t hq = p.q.heads;
  if (item >= p.batch * p.nq * hq) return;
  const int64_t h = item % hq;
  const int64_t r = (item / hq) % p.nq;
  const int64_t b = item / (hq * p.nq);
  const S* o = p.out.at(b, p.q_row0 + r, h);
  const S* d = p.dout.at(b, p.q_row0 + r, h);
  float sum = 0.0f;
  for (int64_t w = lane; w < p.out.width; w += kWarpSize) sum += to_float(d[w]) * to_float(o[w]);
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) p.delta[(b * p.nq + r) * hq + h] = sum;
}

/// Loads the per-query-row constants of query tile rows [rq0, rq0 + 64) of head h: lse·log2 e, delta and the
/// number of visible keys (0 for rows past nq, whose p is then 0).
template <class S>
__device__ void load_row_constants(const BwdParams<S>& p, int64_t b, int64_t h, int64_t rq0, float* lse_s,
                                   float* delta_s, int64_t* visible_s) {
  const int j = static_cast<int>(threadIdx.x);
  if (j >= kTile) return;
  const int64_t r = rq0 + j;
  const bool valid = r < p.nq;
  lse_s[j] = valid ? p.lse.at(b, p.q_row0 + r, h)[0] * kLog2e : 0.0f;
  delta_s[j] = valid ? p.delta[(b * p.nq + r) * p.q.heads + h] : 0.0f;
  visible_s[j] = valid ? semantics::visible_columns(p.mask, r, p.nq, p.nk).end : 0;
}

/// Thread block (256 threads) of dK and dV for KV rows [c0, c0 + 64) of kv head g: loops over the q heads of the
/// group and the query tiles that see the KV tile, in ascending order. Per query tile:
///   A. warps 0–3: Sᵀ = K·Qᵀ (their 16 KV rows × 64 queries); warps 4–7: dPᵀ = V·dOᵀ;
///   B. all threads: Pᵀ = exp(scale·Sᵀ − lse) (masked to 0), dSᵀ = Pᵀ ∘ (dPᵀ − delta), both rounded to 16 bits;
///   C. warps 0–3: dV += Pᵀ·dO; warps 4–7: dK += dSᵀ·Q (dK scaled by softmax_scale at the end).
template <class S, class T, int D>
__global__ void __launch_bounds__(kBwdThreads, kBwdMinBlocksPerSm) attn_bwd_dkdv_tc_kernel(const BwdParams<S> p) {
  using L = BwdSmem<D>;
  using P = Pitch<D>;
  HCPSIM_TC_SHARED_BYTES(tc_smem);
  T* k_s = reinterpret_cast<T*>(tc_smem + L::k);        // [64][D+8]
  T* v_s = reinterpret_cast<T*>(tc_smem + L::v);        // [64][D+8]
  T* q_s = reinterpret_cast<T*>(tc_smem + L::q);        // [64][D+8]
  T* do_s = reinterpret_cast<T*>(tc_smem + L::dout);    // [64][D+8]
  float* f_s = reinterpret_cast<float*>(tc_smem + L::f);  // Sᵀ [64 kv][68] fp32
  float* g_s = reinterpret_cast<float*>(tc_smem + L::g);  // dPᵀ [64 kv][68] fp32
  T* pt_s = reinterpret_cast<T*>(tc_smem + L::f);       // Pᵀ [64 kv][72], over Sᵀ
  T* dst_s = reinterpret_cast<T*>(tc_smem + L::g);      // dSᵀ [64 kv][72], over dPᵀ
  float* lse_s = reinterpret_cast<float*>(tc_smem + L::lse);
  float* delta_s = reinterpret_cast<float*>(tc_smem + L::delta);
  int64_t* visible_s = reinterpret_cast<int64_t*>(tc_smem + L::visible);

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const bool second_half = warp >= kBwdWarps / 2;  // warps 4–7: dPᵀ and dK
  const int wrow = (warp % (kBwdWarps / 2)) * kFrag;
  const int64_t c0 = int64_t{blockIdx.x} * kTile;
  const int64_t g = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int kv_valid = static_cast<int>(p.nk - c0 < kTile ? p.nk - c0 : kTile);
  const float scale_log2 = p.scale * kLog2e;

  load_tile<T, D, kBwdThreads>(k_s, p.k.at(b, p.kv_row0 + c0, g), p.k.row_stride(), kv_valid);
  load_tile<T, D, kBwdThreads>(v_s, p.v.at(b, p.kv_row0 + c0, g), p.v.row_stride(), kv_valid);
  wait_tile_loads<0>();  // published by the first __syncthreads of the loop
  FragAcc acc[D / kFrag];  // dV (warps 0–3) or dK/scale (warps 4–7) of the warp's 16 KV rows
#pragma unroll
  for (int f = 0; f < D / kFrag; ++f) wmma::fill_fragment(acc[f], 0.0f);

  // A column's first seeing row never decreases with the column: no query row before r_first sees any key of
  // this tile (semantics::visible_rows).
  const int64_t r_first = semantics::visible_rows(p.mask, c0, p.nq, p.nk).begin;
  const int64_t q_tiles = tile_count(p.nq);
  const int64_t t_first = r_first >= p.nq ? q_tiles : r_first / kTile;

  for (int64_t hh = 0; hh < p.group; ++hh) {
    const int64_t h = g * p.group + hh;
    for (int64_t t = t_first; t < q_tiles; ++t) {
      const int64_t rq0 = t * kTile;
      const int q_valid = static_cast<int>(p.nq - rq0 < kTile ? p.nq - rq0 : kTile);
      __syncthreads();  // every warp is done with the previous q, dout tiles and P/dS
      load_tile<T, D, kBwdThreads>(q_s, p.q.at(b, p.q_row0 + rq0, h), p.q.row_stride(), q_valid);
      load_tile<T, D, kBwdThreads>(do_s, p.dout.at(b, p.q_row0 + rq0, h), p.dout.row_stride(), q_valid);
      load_row_constants(p, b, h, rq0, lse_s, delta_s, visible_s);
      wait_tile_loads<0>();
      __syncthreads();

      // A.
      if (second_half) {
        product_abt<T, D>(v_s + wrow * P::half_tile, do_s, g_s + wrow * P::scores);
      } else {
        product_abt<T, D>(k_s + wrow * P::half_tile, q_s, f_s + wrow * P::scores);
      }
      __syncthreads();

      // B. Thread (warp w, lane l) owns the query pair j = 2l, 2l + 1 and KV rows i = w, w + 8, ...: the
      // per-query constants are read once, the fp32 tiles as consecutive float2 (no bank conflict), and P, dS are
      // held as packed 16-bit pairs until the barrier after which they overwrite Sᵀ, dPᵀ.
      {
        const int j = 2 * lane;
        const float lse0 = lse_s[j], lse1 = lse_s[j + 1];
        const float delta0 = delta_s[j], delta1 = delta_s[j + 1];
        const int64_t seen0 = visible_s[j] - c0, seen1 = visible_s[j + 1] - c0;  // KV row i seen iff i < seen
        Pair<T> p_pair[kPairsPerThread];
        Pair<T> ds_pair[kPairsPerThread];
#pragma unroll
        for (int it = 0; it < kPairsPerThread; ++it) {
          const int i = it * kBwdWarps + warp;
          const float2 s2 = *reinterpret_cast<const float2*>(f_s + i * P::scores + j);
          const float2 dp2 = *reinterpret_cast<const float2*>(g_s + i * P::scores + j);
          const float p0 = i < seen0 ? exp2f(s2.x * scale_log2 - lse0) : 0.0f;
          const float p1 = i < seen1 ? exp2f(s2.y * scale_log2 - lse1) : 0.0f;
          p_pair[it] = pack_pair<T>(p0, p1);
          ds_pair[it] = pack_pair<T>(p0 * (dp2.x - delta0), p1 * (dp2.y - delta1));  // fp32 P, as FlashAttention-2
        }
        __syncthreads();  // Pᵀ, dSᵀ overwrite Sᵀ, dPᵀ
#pragma unroll
        for (int it = 0; it < kPairsPerThread; ++it) {
          const int i = it * kBwdWarps + warp;
          *reinterpret_cast<Pair<T>*>(pt_s + i * P::probs + j) = p_pair[it];
          *reinterpret_cast<Pair<T>*>(dst_s + i * P::probs + j) = ds_pair[it];
        }
      }
      __syncthreads();

      // C.
      if (second_half) {
        product_ab_accumulate<T, D, D / kFrag>(acc, dst_s + wrow * P::probs, q_s);
      } else {
        product_ab_accumulate<T, D, D / kFrag>(acc, pt_s + wrow * P::probs, do_s);
      }
    }
  }

  __syncthreads();  // the staging area overlaps other warps' Pᵀ, dSᵀ rows
  float* stage = f_s + warp * kFrag * P::scores;  // [16][68] per warp over Sᵀ and dPᵀ
  if (second_half) {
    write_warp_block<S, D / kFrag>(acc, stage, p.dk, b, c0 + wrow, p.nk, g, 0, p.scale, p.format);
  } else {
    write_warp_block<S, D / kFrag>(acc, stage, p.dv, b, c0 + wrow, p.nk, g, 0, 1.0f, p.format);
  }
}

/// Thread block (256 threads) of dQ for query rows [rq0, rq0 + 64) of head h: loops over the KV tiles the rows
/// see, in ascending order. Per KV tile:
///   A. warps 0–3: S = Q·Kᵀ (their 16 query rows × 64 keys); warps 4–7: dP = dO·Vᵀ;
///   B. all threads: P = exp(scale·S − lse) (masked to 0), dS = P ∘ (dP − delta) rounded to 16 bits;
///   C. warp w: dQ[16 rows of w % 4, columns (w / 4)·D/2 ..] += dS·K (scaled by softmax_scale at the end).
template <class S, class T, int D>
__global__ void __launch_bounds__(kBwdThreads, kBwdMinBlocksPerSm) attn_bwd_dq_tc_kernel(const BwdParams<S> p) {
  using L = BwdSmem<D>;
  using P = Pitch<D>;
  HCPSIM_TC_SHARED_BYTES(tc_smem);
  T* k_s = reinterpret_cast<T*>(tc_smem + L::k);
  T* v_s = reinterpret_cast<T*>(tc_smem + L::v);
  T* q_s = reinterpret_cast<T*>(tc_smem + L::q);
  T* do_s = reinterpret_cast<T*>(tc_smem + L::dout);
  float* f_s = reinterpret_cast<float*>(tc_smem + L::f);  // S [64 q][68] fp32
  float* g_s = reinterpret_cast<float*>(tc_smem + L::g);  // dP [64 q][68] fp32
  T* ds_s = reinterpret_cast<T*>(tc_smem + L::f);       // dS [64 q][72], over S
  float* lse_s = reinterpret_cast<float*>(tc_smem + L::lse);
  float* delta_s = reinterpret_cast<float*>(tc_smem + L::delta);
  int64_t* visible_s = reinterpret_cast<int64_t*>(tc_smem + L::visible);

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const bool second_half = warp >= kBwdWarps / 2;
  const int wrow = (warp % (kBwdWarps / 2)) * kFrag;
  constexpr int kHalfCols = D / 2;
  const int wcol = second_half ? kHalfCols : 0;
  // Heaviest tiles first under a causal mask.
  const int64_t rq0 = (int64_t{gridDim.x} - 1 - blockIdx.x) * kTile;
  const int64_t h = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t g = h / p.group;
  const int q_valid = static_cast<int>(p.nq - rq0 < kTile ? p.nq - rq0 : kTile);
  const float scale_log2 = p.scale * kLog2e;

  load_tile<T, D, kBwdThreads>(q_s, p.q.at(b, p.q_row0 + rq0, h), p.q.row_stride(), q_valid);
  load_tile<T, D, kBwdThreads>(do_s, p.dout.at(b, p.q_row0 + rq0, h), p.dout.row_stride(), q_valid);
  load_row_constants(p, b, h, rq0, lse_s, delta_s, visible_s);
  wait_tile_loads<0>();  // published by the first __syncthreads of the loop
  FragAcc acc[kHalfCols / kFrag];
#pragma unroll
  for (int f = 0; f < kHalfCols / kFrag; ++f) wmma::fill_fragment(acc[f], 0.0f);

  const int64_t kv_end =
      semantics::tile_columns(semantics::block_mask_desc(p.mask, p.nq, p.nk), rq0, rq0 + q_valid - 1, p.nk).end;
  const int64_t kv_tiles = tile_count(kv_end);
  for (int64_t t = 0; t < kv_tiles; ++t) {
    const int64_t c0 = t * kTile;
    const int kv_valid = static_cast<int>(p.nk - c0 < kTile ? p.nk - c0 : kTile);
    __syncthreads();  // every warp is done with the previous k, v tiles and dS
    load_tile<T, D, kBwdThreads>(k_s, p.k.at(b, p.kv_row0 + c0, g), p.k.row_stride(), kv_valid);
    load_tile<T, D, kBwdThreads>(v_s, p.v.at(b, p.kv_row0 + c0, g), p.v.row_stride(), kv_valid);
    wait_tile_loads<0>();
    __syncthreads();

    // A.
    if (second_half) {
      product_abt<T, D>(do_s + wrow * P::half_tile, v_s, g_s + wrow * P::scores);
    } else {
      product_abt<T, D>(q_s + wrow * P::half_tile, k_s, f_s + wrow * P::scores);
    }
    __syncthreads();

    // B. Thread (warp w, lane l) owns the key pair j = 2l, 2l + 1 and query rows i = w, w + 8, ... (broadcast
    // reads of the per-row constants, consecutive float2 reads of the fp32 tiles); dS is held as packed 16-bit
    // pairs until the barrier after which it overwrites S.
    {
      const int j = 2 * lane;
      Pair<T> ds_pair[kPairsPerThread];
#pragma unroll
      for (int it = 0; it < kPairsPerThread; ++it) {
        const int i = it * kBwdWarps + warp;
        const int64_t seen = visible_s[i] - c0;  // key j of the tile is seen iff j < seen
        const float lse_i = lse_s[i];
        const float delta_i = delta_s[i];
        const float2 s2 = *reinterpret_cast<const float2*>(f_s + i * P::scores + j);
        const float2 dp2 = *reinterpret_cast<const float2*>(g_s + i * P::scores + j);
        const float p0 = j < seen ? exp2f(s2.x * scale_log2 - lse_i) : 0.0f;
        const float p1 = j + 1 < seen ? exp2f(s2.y * scale_log2 - lse_i) : 0.0f;
        ds_pair[it] = pack_pair<T>(p0 * (dp2.x - delta_i), p1 * (dp2.y - delta_i));
      }
      __syncthreads();  // dS overwrites S
#pragma unroll
      for (int it = 0; it < kPairsPerThread; ++it) {
        const int i = it * kBwdWarps + warp;
        *reinterpret_cast<Pair<T>*>(ds_s + i * P::probs + j) = ds_pair[it];
      }
    }
    __syncthreads();

    // C.
    product_ab_accumulate<T, D, kHalfCols / kFrag>(acc, ds_s + wrow * P::probs, k_s + wcol);
  }

  __syncthreads();  // the staging area overlaps other warps' dS rows
  float* stage = f_s + warp * kFrag * P::scores;  // [16][68] per warp over S and dP
  write_warp_block<S, kHalfCols / kFrag>(acc, stage, p.dq, b, rq0 + wrow, p.nq, h, wcol, p.scale, p.format);
}

// ---------------------------------------------------------------------------------------------------------------
// Host side.
// ---------------------------------------------------------------------------------------------------------------

bool aligned_16(const void* ptr) { return (reinterpret_cast<std::uintptr_t>(ptr) & 15u) == 0; }

template <class Ref>
bool width_and_alignment_ok(const Ref& ref, int64_t width) {
  return ref.width == width && aligned_16(ref.data);
}

/// The shape conditions shared by every entry point (see tensor_core_supported in attention_tc.hpp).
bool shape_supported(int64_t batch, int64_t nq, int64_t nk, int64_t hq, int64_t hkv, int64_t head_dim) {
  if (head_dim != 64 && head_dim != 128) return false;
  if (batch < 0 || nq < 0 || nk < 0) return false;
  if (hkv < 1 || hq < 1 || hq % hkv != 0) return false;
  if (batch > kMaxGridYz || hq > kMaxGridYz) return false;
  if (tile_count(nq) > kMaxGridX || tile_count(nk) > kMaxGridX) return false;
  // The delta kernel's grid: ⌈batch·nq·hq / 8⌉ blocks (checked without overflow: each factor is bounded above).
  if (nq > 0 && batch > 0 && (kMaxGridX * kDeltaRowsPerBlock) / (batch * hq) < nq) return false;
  return true;
}

template <class Args>
bool fwd_views_ok(const Args& a) {
  const int64_t d = a.q.width;
  return shape_supported(a.batch, a.nq, a.nk, a.q.heads, a.k.heads, d) && width_and_alignment_ok(a.q, d) &&
         width_and_alignment_ok(a.k, d) && width_and_alignment_ok(a.v, d) && width_and_alignment_ok(a.out, d);
}

template <class Args>
bool bwd_views_ok(const Args& a) {
  const int64_t d = a.q.width;
  return shape_supported(a.batch, a.nq, a.nk, a.q.heads, a.k.heads, d) && width_and_alignment_ok(a.q, d) &&
         width_and_alignment_ok(a.k, d) && width_and_alignment_ok(a.v, d) && width_and_alignment_ok(a.out, d) &&
         width_and_alignment_ok(a.dout, d) && width_and_alignment_ok(a.dq, d) && width_and_alignment_ok(a.dk, d) &&
         width_and_alignment_ok(a.dv, d) && (a.nq == 0 || a.delta != nullptr);
}

bool format_supported(Dtype format) { return format == Dtype::bf16 || format == Dtype::fp16; }

/// The parameters forward and backward share: q, k, v, lse, batch, row ranges, GQA group, mask, scale, format.
template <class S, class Params, class Args>
void fill_common_params(Params& p, const Args& a, Dtype format) {
  p.q = view_of<S>(a.q);
  p.k = view_of<S>(a.k);
  p.v = view_of<S>(a.v);
  p.out = view_of<S>(a.out);
  p.lse = a.lse;
  p.batch = a.batch;
  p.q_row0 = a.q_row0;
  p.nq = a.nq;
  p.kv_row0 = a.kv_row0;
  p.nk = a.nk;
  p.group = a.q.heads / a.k.heads;
  p.mask = a.mask;
  p.scale = a.scale;
  p.format = format;
}

template <class S, class Args>
FwdParams<S> fwd_params(const Args& a, Dtype format) {
  FwdParams<S> p;
  fill_common_params<S>(p, a, format);
  return p;
}

template <class S, class Args>
BwdParams<S> bwd_params(const Args& a, Dtype format) {
  BwdParams<S> p;
  fill_common_params<S>(p, a, format);
  p.dout = view_of<S>(a.dout);
  p.dq = view_of<S>(a.dq);
  p.dk = view_of<S>(a.dk);
  p.dv = view_of<S>(a.dv);
  p.delta = a.delta;
  return p;
}

}  // namespace

}  // namespace hcpsim::gpu
