#!/usr/bin/env bash
# Byte comparison of what two hcpsim binaries write for a fixed set of simulate and plan commands (run with --quiet,
# so no progress line differs): the check that an engine or network change leaves every reported number and
# timeline as it was (bench/RESULTS.md records each use). Usage:
#   bash bench/compare_outputs.sh OLD_BINARY NEW_BINARY
# Prints one line per command (same / DIFFERENT, with the differing files, or FAILED with the exit statuses) and
# exits 1 when any output differs or any command fails on either side.
set -euo pipefail
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ] || [ -d "$1" ] || [ -d "$2" ]; then
  echo "usage: bash bench/compare_outputs.sh OLD_BINARY NEW_BINARY (two executable hcpsim files)" >&2
  exit 2
fi
old=$(realpath -e -- "$1")
new=$(realpath -e -- "$2")
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
big=scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml
# name | arguments (outputs named in the arguments land in the scratch folder of each binary)
commands=(
  "default|simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml --json out.json --trace trace.json --step-trace step.json"
  "8b_128k|simulate $big --json out.json --trace trace.json --step-trace step.json"
  "8b_128k_p2p|simulate $big parallel.cp_comm_type=p2p parallel.hierarchical_context_parallel_sizes=null --json out.json --trace trace.json"
  "8b_64k_a2a|simulate $big parallel.context_parallel_size=8 model.seq_length=65536 parallel.cp_comm_type=a2a parallel.hierarchical_context_parallel_sizes=null --json out.json --trace trace.json"
  "8b_128k_allgather|simulate $big parallel.cp_comm_type=all_gather parallel.hierarchical_context_parallel_sizes=null --json out.json"
  "8b_cp128|simulate $big parallel.context_parallel_size=128 cluster.nodes=16 model.seq_length=524288 parallel.hierarchical_context_parallel_sizes=[8,16] --json out.json --step-trace step.json"
  "8b_cp64_p2p|simulate $big parallel.context_parallel_size=64 cluster.nodes=8 model.seq_length=262144 parallel.cp_comm_type=p2p parallel.hierarchical_context_parallel_sizes=null --json out.json --trace trace.json"
  "70b|simulate scenarios/llama3_70b_256k_tp8_cp8_8xdgx_h100.yaml --json out.json --step-trace step.json"
  "70b_plan|plan scenarios/llama3_70b_256k_tp8_cp8_8xdgx_h100.yaml --json plan.json --csv plan.csv"
  "8b_plan|plan $big --gpus 32 --tp 1,2 --json plan.json"
)
for f in validation/steps/*.yaml; do
  commands+=("$(basename "$f" .yaml)|simulate $f --json out.json")
done
status=0
for entry in "${commands[@]}"; do
  name=${entry%%|*}
  read -r -a args <<< "${entry#*|}"
  for side in old new; do
    mkdir -p "$work/$side/$name"
    bin=$old
    [ "$side" = new ] && bin=$new
    # Scenario paths are relative to the repository; the outputs go to the scratch folder.
    rc=0
    (cd "$work/$side/$name" && "$bin" "${args[0]}" --quiet "$root/${args[1]}" "${args[@]:2}" > stdout.txt \
      2> stderr.txt) || rc=$?
    echo "$rc" > "$work/$side/$name/exit_status"
    # The first stdout lines name the scenario file by its path, which is the same for both sides.
  done
  rc_old=$(cat "$work/old/$name/exit_status")
  rc_new=$(cat "$work/new/$name/exit_status")
  if [ "$rc_old" != 0 ] || [ "$rc_new" != 0 ]; then
    printf '%-44s FAILED (exit %s / %s): %s\n' "$name" "$rc_old" "$rc_new" "$(head -c 300 "$work/new/$name/stderr.txt")"
    status=1
  elif diff -rq "$work/old/$name" "$work/new/$name" > "$work/diff.txt"; then
    printf '%-44s same (%s files)\n' "$name" "$(find "$work/old/$name" -type f | wc -l)"
  else
    printf '%-44s DIFFERENT: %s\n' "$name" "$(tr '\n' ' ' < "$work/diff.txt")"
    status=1
  fi
done
exit $status
