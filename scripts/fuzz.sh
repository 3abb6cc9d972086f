#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan + UBSan, CUDA off) and runs each for SECONDS (default 600):
#   scripts/fuzz.sh [SECONDS] [all|scenario_loader|dump_reader]
# New inputs go to build-fuzz/corpus-*/ (the checked-in seeds under tests/fuzz/corpus/ are read, not written).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DHCPSIM_ENABLE_CUDA=OFF -DHCPSIM_SANITIZE=ON -DHCPSIM_FUZZ=ON
target="${2:-all}"
cmake --build build-fuzz --target scenario_loader_fuzz dump_reader_fuzz -j "$(nproc)"
if [ "$target" = all ] || [ "$target" = scenario_loader ]; then
  mkdir -p build-fuzz/corpus-scenario_loader
  ./build-fuzz/tests/scenario_loader_fuzz -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 build-fuzz/corpus-scenario_loader tests/fuzz/corpus/scenario_loader
fi
if [ "$target" = all ] || [ "$target" = dump_reader ]; then
  # -fork/-ignore_crashes: keep going when Debian's libhdf5 itself crashes on a malformed file (see
  # docs/robustness.md); crashes are written as crash-* files for triage.
  mkdir -p build-fuzz/corpus-dump_reader build-fuzz/crashes-dump_reader
  ASAN_OPTIONS=detect_leaks=0 ./build-fuzz/tests/dump_reader_fuzz -max_total_time="$seconds" -max_len=65536 \
    -timeout=10 -rss_limit_mb=4096 -fork=1 -ignore_crashes=1 -artifact_prefix=build-fuzz/crashes-dump_reader/ \
    -print_final_stats=1 build-fuzz/corpus-dump_reader tests/fuzz/corpus/dump_reader
fi
