#!/usr/bin/env bash
# Wall time and peak memory of the `hcpsim verify` a user runs first: the bundled default scenario (Llama-3.2-1B,
# a2a+p2p [2, 2], 8192 tokens, fp32) on 1 and 2 threads and by default, and the same with every head checked
# (oracle.heads=all). Min and median of 3 runs each, as bench/RESULTS.md records them; the outputs of the 1- and
# 2-thread runs must be byte-identical (the script stops otherwise).
# Usage: bash bench/verify_bench.sh [build dir]...
# With several build dirs (e.g. a "before" and an "after" build) each row runs them in turn, run 1 of every build,
# then run 2 of every build, ..., so that all of them see the same load; the script then also says whether their
# JSON reports are byte-identical.
set -euo pipefail
cd "$(dirname "$0")/.."
builds=("$@")
[[ ${#builds[@]} -gt 0 ]] || builds=(build)
scenario=scenarios/llama32_1b_cp4_a2a_p2p.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
row() {  # row NAME ARGS...: per build, min / median wall seconds and max RSS of 3 runs
  local name=$1; shift
  local i b
  for i in 1 2 3; do
    for b in "${!builds[@]}"; do
      /usr/bin/time -f '%e %M' -o "$tmp/t" "${builds[$b]}/apps/hcpsim" verify "$scenario" "$@" \
        --json "$tmp/$b.$name.$i.json" > "$tmp/$b.$name.$i.out" 2>/dev/null
      cat "$tmp/t" >> "$tmp/$b.$name.times"
    done
  done
  for b in "${!builds[@]}"; do
    local sorted rss
    sorted=$(cut -d' ' -f1 "$tmp/$b.$name.times" | sort -n)
    rss=$(cut -d' ' -f2 "$tmp/$b.$name.times" | sort -n | tail -1)
    printf '%-34s %-28s min %6.2f s  median %6.2f s  peak RSS %5d MiB\n' "$name" "${builds[$b]}" \
      "$(echo "$sorted" | sed -n 1p)" "$(echo "$sorted" | sed -n 2p)" $(( rss / 1024 ))
  done
}
row "default, --threads 1" --threads 1
row "default, --threads 2" --threads 2
row "default (every hardware thread)"
for b in "${!builds[@]}"; do
  cmp -s "$tmp/$b.default, --threads 1.1.json" "$tmp/$b.default, --threads 2.1.json" ||
    { echo "${builds[$b]}: 1 vs 2 threads differ" >&2; exit 1; }
done
row "oracle.heads=all, --threads 2" oracle.heads=all --threads 2
for b in "${!builds[@]}"; do
  [[ $b -eq 0 ]] && continue
  for name in "default, --threads 2" "oracle.heads=all, --threads 2"; do
    if cmp -s "$tmp/0.$name.1.json" "$tmp/$b.$name.1.json"; then same=identical; else same=DIFFERENT; fi
    echo "JSON report of '$name': ${builds[0]} vs ${builds[$b]}: $same"
  done
done
