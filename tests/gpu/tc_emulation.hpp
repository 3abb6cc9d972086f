#pragma once
// Host emulation of the CUDA features the tensor-core kernels use (gpu/src/attention_tc_kernels.cuh), so that the
// kernel bodies compile with the host compiler and run on the CPU: every CUDA thread of a block is a std::thread,
// __syncthreads/__syncwarp are std::barrier waits, warp shuffles go through a per-warp buffer, cp.async is a
// memcpy, and WMMA fragments hold the whole 16x16 tile in every lane (load/store/mma compute the tile product in
// fp32 from the 16-bit inputs). Shared memory is poisoned with 0xFF bytes (NaN) before each block, so a read
// before a write surfaces in the outputs. This checks indexing, masking, barrier placement and numerics, not the
// hardware's fragment layouts or timing.
#define HCPSIM_TC_HOST_EMULATION 1
#define HCPSIM_TC_SHARED_BYTES(name) unsigned char* name = emu::g_smem
#define __host__
#define __device__
#define __global__
#define __shared__
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <barrier>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
#include <cmath>
#include <cassert>

#define __launch_bounds__(...)
namespace emu {
struct Idx { unsigned x = 0, y = 0, z = 0; };
inline thread_local Idx thread_idx;
inline Idx block_idx, grid_dim;
inline unsigned char* g_smem = nullptr;
inline std::barrier<>* block_barrier = nullptr;
inline std::vector<std::barrier<>*> warp_barriers;
inline float shfl_buf[64][32];
}
#define threadIdx emu::thread_idx
#define blockIdx emu::block_idx
#define gridDim emu::grid_dim

inline int emu_warp() { return static_cast<int>(emu::thread_idx.x) / 32; }
inline int emu_lane() { return static_cast<int>(emu::thread_idx.x) % 32; }
inline void __syncthreads() { emu::block_barrier->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::warp_barriers[emu_warp()]->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int mask) {
  const int w = emu_warp(), l = emu_lane();
  __syncwarp();
  emu::shfl_buf[w][l] = v;
  __syncwarp();
  const float r = emu::shfl_buf[w][l ^ mask];
  __syncwarp();
  return r;
}
inline float4 __ldg(const float4* p) { return *p; }
inline uint4 __ldg(const uint4* p) { return *p; }
inline void __pipeline_memcpy_async(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
inline void __pipeline_commit() {}
inline void __pipeline_wait_prior(size_t) {}

namespace nvcuda::wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
struct row_major {}; struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  enum { num_elements = 256 };
  using elem = std::conditional_t<std::is_same_v<Use, accumulator>, float, T>;
  elem x[256];
};
template <class Use, class T, class L>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L>& f, const T* p, unsigned ldm) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      // canonical x[row*16 + col] of the logical matrix (A: m×k, B: k×n)
      if constexpr (std::is_same_v<L, row_major>) f.x[r * 16 + c] = p[r * ldm + c];
      else f.x[r * 16 + c] = p[r + c * ldm];
    }
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t l) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = l == mem_row_major ? p[r * ldm + c] : p[r + c * ldm];
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t l) {
  if (emu_lane() != 0) return;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) (l == mem_row_major ? p[r * ldm + c] : p[r + c * ldm]) = f.x[r * 16 + c];
}
inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float v) { for (auto& e : f.x) e = v; }
template <class T, class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, T, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[256];
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float s = c.x[m * 16 + n];
      for (int k = 0; k < 16; ++k) s += static_cast<float>(a.x[m * 16 + k]) * static_cast<float>(b.x[k * 16 + n]);
      out[m * 16 + n] = s;
    }
  std::memcpy(d.x, out, sizeof out);
}
}  // namespace nvcuda::wmma

namespace emu {
/// Runs kernel(args) over grid (gx, gy, gz) with `threads` threads per block and `smem` bytes of shared memory.
template <class F>
void launch(unsigned gx, unsigned gy, unsigned gz, int threads, size_t smem, F body) {
  std::vector<unsigned char> shared(smem + 256);
  grid_dim = {gx, gy, gz};
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        block_idx = {x, y, z};
        // poison shared memory: a read before a write shows as NaN
        std::memset(shared.data(), 0xFF, shared.size());
        g_smem = shared.data();
        std::barrier<> bb(threads);
        block_barrier = &bb;
        std::vector<std::unique_ptr<std::barrier<>>> wb;
        warp_barriers.clear();
        for (int w = 0; w < threads / 32; ++w) {
          wb.push_back(std::make_unique<std::barrier<>>(32));
          warp_barriers.push_back(wb.back().get());
        }
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
          ts.emplace_back([t, &body] {
            thread_idx = {static_cast<unsigned>(t), 0, 0};
            body();
          });
        for (auto& t : ts) t.join();
      }
}
}  // namespace emu
