#!/usr/bin/env bash
# Builds everything (CUDA parts too when nvcc is found, or when HCPSIM_ENABLE_CUDA=ON) and runs the whole
# test suite with CTest. GPU tests report "Skipped" on machines without a usable device.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DHCPSIM_ENABLE_CUDA="${HCPSIM_ENABLE_CUDA:-AUTO}" -DHCPSIM_WERROR="${HCPSIM_WERROR:-OFF}"
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
