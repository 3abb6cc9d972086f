#!/usr/bin/env bash
# Wall time of `hcpsim plan` for Llama-3-8B at 128K tokens over every split of CP = 16 and CP = 64 (8 DGX H100
# nodes so that CP = 64 fits), the sweep bench/RESULTS.md records. Usage: bash bench/plan_bench.sh [build dir]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}/apps/hcpsim"
scenario=scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml
total=0
for cp in 16 64; do
  start=$(date +%s.%N)
  out=$("$bin" plan "$scenario" cluster.nodes=8 --cp "$cp")
  end=$(date +%s.%N)
  t=$(echo "$end - $start" | bc)
  total=$(echo "$total + $t" | bc)
  printf 'plan --cp %-3s %6.2f s  (%s legal options)\n' "$cp" "$t" \
    "$(echo "$out" | sed -n 's/^plan: \([0-9]*\) legal.*/\1/p')"
done
printf 'whole sweep    %6.2f s  (goal: under 2 s)\n' "$total"
