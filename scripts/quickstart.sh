#!/usr/bin/env bash
# Fresh Debian 12 machine → packages, build, and the main job on the bundled default scenario:
# validate (layout and process groups), verify (CPU oracle vs float64 full attention), simulate (timing).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DHCPSIM_ENABLE_CUDA="${HCPSIM_ENABLE_CUDA:-AUTO}"
cmake --build build --target hcpsim -j "$(nproc)"
scenario=scenarios/llama32_1b_cp4_a2a_p2p.yaml
./build/apps/hcpsim validate "$scenario"
./build/apps/hcpsim verify "$scenario" --threads "$(nproc)"
./build/apps/hcpsim simulate "$scenario" --trace build/llama32_1b_trace.json
