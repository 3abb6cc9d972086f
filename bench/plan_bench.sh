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
  # Every split of this CP at the scenario's TP, PP, VP, recompute and micro-batch (the sweep's own dimensions).
  out=$("$bin" plan "$scenario" cluster.nodes=8 --cp "$cp" --fixed tp,pp,vp,recompute,micro_batch 2>/dev/null)
  end=$(date +%s.%N)
  t=$(echo "$end - $start" | bc)
  total=$(echo "$total + $t" | bc)
  printf 'plan --cp %-3s %6.2f s  (%s simulated options)\n' "$cp" "$t" \
    "$(echo "$out" | sed -n 's/^plan: [0-9]* configurations, \([0-9]*\) simulated.*/\1/p')"
done
printf 'whole sweep    %6.2f s  (goal: under 2 s)\n' "$total"
# The default configuration search of the bundled Llama-3-70B 256K scenario (TP x CP variant x [A, P] x PP x VP x
# recompute x micro-batch on 64 GPUs per replica), min and median of 3.
times=()
for i in 1 2 3; do
  start=$(date +%s.%N)
  out=$("$bin" plan scenarios/llama3_70b_256k_tp8_cp8_8xdgx_h100.yaml 2>/dev/null)
  end=$(date +%s.%N)
  times+=("$(echo "$end - $start" | bc)")
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
printf '70B default search  min %5.2f s  median %5.2f s  (%s)\n' "$(echo "$sorted" | sed -n 1p)" \
  "$(echo "$sorted" | sed -n 2p)" "$(echo "$out" | sed -n 's/^plan: \([0-9]* configurations, [0-9]* simulated\).*/\1/p')"
