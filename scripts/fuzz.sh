#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan + UBSan, CUDA off) and runs each for SECONDS (default 600):
#   scripts/fuzz.sh [SECONDS] [all|scenario_loader|dump_reader|shell_words|bridge_config|log_parser|calibration_csv]
# FUZZ_JOBS sets the build's job count (default: all cores). New inputs go to build-fuzz/corpus-NAME/ and crash,
# leak, timeout and out-of-memory inputs to build-fuzz/crashes-NAME/ (the checked-in seeds under
# tests/fuzz/corpus/NAME/ are read, not written). Exit status: the first failing target's.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
target="${2:-all}"
all_targets="scenario_loader dump_reader shell_words bridge_config log_parser calibration_csv"
if [ "$target" = all ]; then
  targets="$all_targets"
elif [[ " $all_targets " == *" $target "* ]]; then
  targets="$target"
else
  echo "fuzz.sh: unknown target '$target'; use all or one of: $all_targets" >&2
  exit 2
fi
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DHCPSIM_ENABLE_CUDA=OFF -DHCPSIM_SANITIZE=ON -DHCPSIM_FUZZ=ON
build_targets=()
for t in $targets; do build_targets+=("${t}_fuzz"); done
cmake --build build-fuzz --target "${build_targets[@]}" -j "${FUZZ_JOBS:-$(nproc)}"

# -max_len: larger than the biggest seed of the target (libFuzzer truncates longer seeds). -timeout: one input
# taking 10 s is a hang. -rss_limit_mb (and the malloc limit it implies): an input asking for 2 GiB is an unbounded
# allocation; every reader here refuses oversized input long before.
status=0
for t in $targets; do
  max_len=8192
  extra=()
  env_opts=""
  case "$t" in
    scenario_loader) max_len=4096 ;;
    log_parser) max_len=16384 ;;
    dump_reader)
      # -fork/-ignore_crashes: keep going when Debian's libhdf5 itself crashes on a malformed file (see
      # docs/robustness.md); crashes are written as crash-* files for triage.
      max_len=65536
      extra=(-fork=1 -ignore_crashes=1)
      env_opts="detect_leaks=0" ;;
  esac
  mkdir -p "build-fuzz/corpus-$t" "build-fuzz/crashes-$t"
  echo "== ${t}_fuzz: ${seconds} s, -max_len=$max_len"
  rc=0
  ASAN_OPTIONS="$env_opts" "./build-fuzz/tests/${t}_fuzz" -max_total_time="$seconds" -max_len="$max_len" \
    -timeout=10 -rss_limit_mb=2048 "${extra[@]}" -artifact_prefix="build-fuzz/crashes-$t/" -print_final_stats=1 \
    "build-fuzz/corpus-$t" "tests/fuzz/corpus/$t" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "== ${t}_fuzz failed (exit $rc); inputs in build-fuzz/crashes-$t/"
    if [ "$status" = 0 ]; then status=$rc; fi
  fi
done
exit $status
