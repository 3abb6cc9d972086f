#!/usr/bin/env bash
# Times the hostile-input paths that once ran for minutes or gigabytes:
#   1. `import megatron-args` of a one-line launch command with 200,000 unmodelled flags (word columns);
#   2. `verify` of a 1M-token, all-heads scenario, which admission control refuses before allocating.
# usage: bash bench/robustness_bench.sh [path/to/hcpsim]   (results: bench/RESULTS.md, "Hostile inputs")
set -eu
H=$(realpath "${1:-build/apps/hcpsim}")
S=$(cd "$(dirname "$0")/.." && pwd)/scenarios/llama32_1b_cp4_a2a_p2p.yaml
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 -c "print('python pretrain_gpt.py --num-attention-heads 8 --hidden-size 1024 --seq-length 1024 --num-layers 2 ' + ' '.join('--x%d 1' % i for i in range(200000)))" > "$W/long.sh"
echo "import of a 200,000-flag line:"
/usr/bin/time -f "  %e s wall, %M KB peak RSS, exit %x" "$H" import megatron-args "$W/long.sh" -o "$W/long.yaml" > /dev/null 2> "$W/err" || true
tail -1 "$W/err"
echo "verify model.seq_length=1048576 oracle.heads=all (refused by admission control):"
/usr/bin/time -f "  %e s wall, %M KB peak RSS, exit %x" "$H" verify "$S" model.seq_length=1048576 oracle.heads=all > /dev/null 2> "$W/err" || true
tail -1 "$W/err"
