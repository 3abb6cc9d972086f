#!/usr/bin/env bash
# Builds what scripts/device_check.sh runs on a GPU host that has CUDA 13, CMake and ninja but no Debian
# development libraries and no network (TOOLCHAIN.md "More traps"): the binaries for x86-64-v3 and sm_90, the
# non-system shared libraries they need (from ldd; never libcuda, libcudart, libcublas or libnccl: the GPU host's
# own are used), and CPU reference dumps of the default scenario made here.
# Output: ./device-bundle (git-ignored; about 50 MiB). Usage: bash scripts/make_device_bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
B=device-bundle
# HCPSIM_CUDA_ARCH: the GPU host's architecture (90 = H100/H200, 80 = A100; "80;90" for both, slower to build).
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DHCPSIM_ENABLE_CUDA=ON \
  -DHCPSIM_X86_LEVEL=x86-64-v3 -DCMAKE_CUDA_ARCHITECTURES="${HCPSIM_CUDA_ARCH:-90}" >/dev/null
cmake --build build-device -j "$(nproc)" --target hcpsim hcpsim_gpu_tests hcpsim_gpu_attention_bench
rm -rf "$B" && mkdir -p "$B/bin" "$B/lib"
cp build-device/apps/hcpsim build-device/tests/hcpsim_gpu_tests \
   build-device/bench/gpu/hcpsim_gpu_attention_bench "$B/bin/"
# Shared libraries: everything ldd resolves except glibc's own and the CUDA/NCCL libraries of the GPU host.
for exe in "$B"/bin/*; do
  ldd "$exe" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*|libcudart.so*|libcublas*|libnccl.so*) ;;
    *) cp -L "$lib" "$B/lib/" ;;
  esac
done
strip --strip-unneeded "$B"/bin/*
# CPU dumps of the default scenario at 512 tokens (about 10 MiB each, so the bundle stays
# well under 64 MiB); device_check.sh makes the GPU dumps with the same overrides and compares.
for dt in fp32 bf16; do
  "$B/bin/hcpsim" verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=512 --dtype "$dt" \
    --threads "$(nproc)" --dump "$B/cpu_compare_$dt.h5" >/dev/null
done
du -sh "$B"
