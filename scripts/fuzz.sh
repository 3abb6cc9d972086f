#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan + UBSan, CUDA off) and runs each for SECONDS (default 600).
# New inputs go to build-fuzz/corpus-*/ (the checked-in seeds under tests/fuzz/corpus/ are read, not written).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DHCPSIM_ENABLE_CUDA=OFF -DHCPSIM_SANITIZE=ON -DHCPSIM_FUZZ=ON
cmake --build build-fuzz --target scenario_loader_fuzz -j "$(nproc)"
mkdir -p build-fuzz/corpus-scenario_loader
./build-fuzz/tests/scenario_loader_fuzz -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 build-fuzz/corpus-scenario_loader tests/fuzz/corpus/scenario_loader
