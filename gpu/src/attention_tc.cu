#include "hcpsim/gpu/attention_tc.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "attention_tc_kernels.cuh"
#include "hcpsim/gpu/cuda_check.hpp"

namespace hcpsim::gpu {

namespace {

template <class S, class T, int D>
void run_fwd(const FwdParams<S>& p, cudaStream_t stream) {
  if (p.batch == 0 || p.nq == 0) return;
  constexpr size_t smem = FwdSmem<D>::bytes;
  const auto kernel = attn_fwd_tc_kernel<S, T, D>;
  HCPSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int{smem}));
  const dim3 grid(static_cast<unsigned>(tile_count(p.nq)), static_cast<unsigned>(p.q.heads),
                  static_cast<unsigned>(p.batch));
  kernel<<<grid, kFwdThreads, smem, stream>>>(p);
  HCPSIM_LAUNCH_CHECK("attn_fwd_tensor_core");
}

template <class S, class T, int D>
void run_bwd(const BwdParams<S>& p, cudaStream_t stream) {
  if (p.batch == 0) return;
  constexpr size_t smem = BwdSmem<D>::bytes;
  if (p.nq > 0) {
    const int64_t rows = p.batch * p.nq * p.q.heads;
    const auto blocks = static_cast<unsigned>((rows + kDeltaRowsPerBlock - 1) / kDeltaRowsPerBlock);
    attn_bwd_delta_tc_kernel<S><<<blocks, kBwdThreads, 0, stream>>>(p);
    HCPSIM_LAUNCH_CHECK("attn_bwd_delta_tensor_core");
  }
  if (p.nk > 0) {
    const auto kernel = attn_bwd_dkdv_tc_kernel<S, T, D>;
    HCPSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int{smem}));
    const dim3 grid(static_cast<unsigned>(tile_count(p.nk)), static_cast<unsigned>(p.k.heads),
                    static_cast<unsigned>(p.batch));
    kernel<<<grid, kBwdThreads, smem, stream>>>(p);
    HCPSIM_LAUNCH_CHECK("attn_bwd_dkdv_tensor_core");
  }
  if (p.nq > 0) {
    const auto kernel = attn_bwd_dq_tc_kernel<S, T, D>;
    HCPSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int{smem}));
    const dim3 grid(static_cast<unsigned>(tile_count(p.nq)), static_cast<unsigned>(p.q.heads),
                    static_cast<unsigned>(p.batch));
    kernel<<<grid, kBwdThreads, smem, stream>>>(p);
    HCPSIM_LAUNCH_CHECK("attn_bwd_dq_tensor_core");
  }
}

}  // namespace

bool tensor_core_supported(const AttnFwdArgs& args) { return format_supported(args.format) && fwd_views_ok(args); }
bool tensor_core_supported(const AttnBwdArgs& args) { return format_supported(args.format) && bwd_views_ok(args); }
bool tensor_core_supported(const AttnFwdArgsBf16& args) { return fwd_views_ok(args); }
bool tensor_core_supported(const AttnBwdArgsBf16& args) { return bwd_views_ok(args); }

bool launch_attn_fwd_tensor_core(const AttnFwdArgs& args, cudaStream_t stream) {
  if (!tensor_core_supported(args)) return false;
  const FwdParams<float> p = fwd_params<float>(args, args.format);
  const bool bf16 = args.format == Dtype::bf16;
  if (args.q.width == 64) {
    if (bf16) run_fwd<float, __nv_bfloat16, 64>(p, stream);
    else run_fwd<float, __half, 64>(p, stream);
  } else {
    if (bf16) run_fwd<float, __nv_bfloat16, 128>(p, stream);
    else run_fwd<float, __half, 128>(p, stream);
  }
  return true;
}

bool launch_attn_bwd_tensor_core(const AttnBwdArgs& args, cudaStream_t stream) {
  if (!tensor_core_supported(args)) return false;
  const BwdParams<float> p = bwd_params<float>(args, args.format);
  const bool bf16 = args.format == Dtype::bf16;
  if (args.q.width == 64) {
    if (bf16) run_bwd<float, __nv_bfloat16, 64>(p, stream);
    else run_bwd<float, __half, 64>(p, stream);
  } else {
    if (bf16) run_bwd<float, __nv_bfloat16, 128>(p, stream);
    else run_bwd<float, __half, 128>(p, stream);
  }
  return true;
}

bool launch_attn_fwd_tensor_core_bf16(const AttnFwdArgsBf16& args, cudaStream_t stream) {
  if (!tensor_core_supported(args)) return false;
  const FwdParams<__nv_bfloat16> p = fwd_params<__nv_bfloat16>(args, Dtype::bf16);
  if (args.q.width == 64) {
    run_fwd<__nv_bfloat16, __nv_bfloat16, 64>(p, stream);
  } else {
    run_fwd<__nv_bfloat16, __nv_bfloat16, 128>(p, stream);
  }
  return true;
}

bool launch_attn_bwd_tensor_core_bf16(const AttnBwdArgsBf16& args, cudaStream_t stream) {
  if (!tensor_core_supported(args)) return false;
  const BwdParams<__nv_bfloat16> p = bwd_params<__nv_bfloat16>(args, Dtype::bf16);
  if (args.q.width == 64) {
    run_bwd<__nv_bfloat16, __nv_bfloat16, 64>(p, stream);
  } else {
    run_bwd<__nv_bfloat16, __nv_bfloat16, 128>(p, stream);
  }
  return true;
}

}  // namespace hcpsim::gpu
