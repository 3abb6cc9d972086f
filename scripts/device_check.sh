#!/usr/bin/env bash
# On a GPU host: runs the GPU tests and prints a table of what ran. Expects a build in ./build made with
# HCPSIM_ENABLE_CUDA=ON (carry it, with the shared libraries it needs, to the GPU host).
set -uo pipefail
cd "$(dirname "$0")/.."
echo "| check | result |"
echo "|---|---|"
if command -v nvidia-smi >/dev/null; then
  echo "| nvidia-smi | $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1) |"
fi
if ./build/tests/hcpsim_gpu_tests --reporter compact > /tmp/hcpsim_gpu_tests.txt 2>&1; then r=pass; else r=FAIL; fi
echo "| hcpsim_gpu_tests | $r: $(tail -1 /tmp/hcpsim_gpu_tests.txt) |"
./build/apps/hcpsim --version | sed 's/^/| version | /; s/$/ |/'
