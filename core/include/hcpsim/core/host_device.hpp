#pragma once
/// HCPSIM_HOST_DEVICE marks a function that host and device code both call: `__host__ __device__` when nvcc
/// compiles the translation unit (__CUDACC__), nothing otherwise, so the same inline definition serves the CPU
/// oracle, the host replay and the CUDA kernels. Functions marked with it use no std containers, no exceptions and
/// no host-only library calls (docs/architecture.md "Where to add things": op meaning).

#if defined(__CUDACC__)
#define HCPSIM_HOST_DEVICE __host__ __device__
#else
#define HCPSIM_HOST_DEVICE
#endif
