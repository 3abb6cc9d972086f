#!/usr/bin/env bash
# Wall time and peak RSS of `hcpsim simulate` (attention alone + whole training step) for Llama-3-8B at S = 4096·CP
# tokens: a2a+p2p [8, CP/8] on CP/8 DGX H100 nodes and the plain p2p ring, min and median of `runs` runs (the
# numbers bench/RESULTS.md records). Usage:
#   bash bench/simulate_bench.sh [build dir] [runs] [CP sizes] [comm types] [--threads values]
# e.g. bash bench/simulate_bench.sh build 3 "512 1024 2048" "a2a+p2p p2p" "1 2"; needs /usr/bin/time. With several
# --threads values each run round runs them in turn (so all see the same load) and a row is printed per value;
# without, the command's default (every hardware thread).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}/apps/hcpsim"
runs="${2:-3}"
cps="${3:-512 1024 2048}"
types="${4:-a2a+p2p}"
read -r -a thread_counts <<< "${5:-default}"
scenario=scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml
for type in $types; do
  for cp in $cps; do
    p=$((cp / 8))
    args=(parallel.context_parallel_size="$cp" cluster.nodes="$p" model.seq_length=$((cp * 4096)))
    if [ "$type" = p2p ]; then
      args+=(parallel.cp_comm_type=p2p parallel.hierarchical_context_parallel_sizes=null)
    else
      args+=("parallel.hierarchical_context_parallel_sizes=[8,$p]")
    fi
    declare -A results=()
    for _ in $(seq "$runs"); do
      for th in "${thread_counts[@]}"; do
        extra=()
        [ "$th" = default ] || extra=(--threads "$th")
        # The admission estimate counts the unreduced attention; the reduced runs need far less.
        results[$th]+="$(/usr/bin/time -f "%e %M" "$bin" simulate --quiet --max-memory 64G "$scenario" "${args[@]}" \
          "${extra[@]}" 2>&1 >/dev/null | tail -1)"$'\n'
      done
    done
    for th in "${thread_counts[@]}"; do
      t=$(printf '%s' "${results[$th]}" | awk 'NF {print $1}' | sort -n)
      m=$(printf '%s' "${results[$th]}" | awk 'NF {print $2}' | sort -n)
      mid=$(( (runs + 1) / 2 ))
      printf '%-8s CP=%-5s threads %-7s time min %6.2f s median %6.2f s   peak RSS min %7.0f MB median %7.0f MB\n' \
        "$type" "$cp" "$th" "$(echo "$t" | sed -n 1p)" "$(echo "$t" | sed -n "${mid}p")" \
        "$(echo "$(echo "$m" | sed -n 1p) / 1024" | bc)" "$(echo "$(echo "$m" | sed -n "${mid}p") / 1024" | bc)"
    done
    unset results
  done
done
