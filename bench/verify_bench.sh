#!/usr/bin/env bash
# Wall time and peak memory of the `hcpsim verify` a user runs first: the bundled default scenario (Llama-3.2-1B,
# a2a+p2p [2, 2], 8192 tokens, fp32) on 1 and 2 threads and by default, and the same with every head checked
# (oracle.heads=all). Min and median of 3 runs each, as bench/RESULTS.md records them; the outputs of the 1- and
# 2-thread runs must be byte-identical (the script stops otherwise).
# Usage: bash bench/verify_bench.sh [build dir]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}/apps/hcpsim"
scenario=scenarios/llama32_1b_cp4_a2a_p2p.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
row() {  # row NAME ARGS...: min / median wall seconds and max RSS of 3 runs
  local name=$1; shift
  local times=() rss=0
  for i in 1 2 3; do
    /usr/bin/time -f '%e %M' -o "$tmp/t" "$bin" verify "$scenario" "$@" --json "$tmp/$name.$i.json" > "$tmp/$name.$i.out" 2>/dev/null
    read -r t m < "$tmp/t"
    times+=("$t")
    (( m > rss )) && rss=$m
  done
  sorted=$(printf '%s\n' "${times[@]}" | sort -n)
  printf '%-34s min %6.2f s  median %6.2f s  peak RSS %5d MiB\n' "$name" "$(echo "$sorted" | sed -n 1p)" \
    "$(echo "$sorted" | sed -n 2p)" $(( rss / 1024 ))
}
row "default, --threads 1" --threads 1
row "default, --threads 2" --threads 2
row "default (every hardware thread)"
cmp -s "$tmp/default, --threads 1.1.json" "$tmp/default, --threads 2.1.json" || { echo "1 vs 2 threads differ" >&2; exit 1; }
row "oracle.heads=all, --threads 2" oracle.heads=all --threads 2
