#!/usr/bin/env bash
# Runs hcpsim on hostile inputs and prints the robustness table of docs/robustness.md: per input class, the cases
# run, the exit codes seen, and how many crashed (killed by a signal), hung (killed by the timeout) or clobbered a
# file (an input's content changed, or a device or link was replaced by a regular file).
#   usage: bash scripts/robustness_table.sh [path/to/hcpsim]      (default build/apps/hcpsim; needs root for mknod)
set -u
H=$(realpath "${1:-build/apps/hcpsim}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
S=$ROOT/scenarios/llama32_1b_cp4_a2a_p2p.yaml
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"

declare -A CASES CODES CRASH HANG CLOB
CLASSES=()
# A file's type, and its checksum when it is a regular file (a device such as /dev/full reads forever).
fingerprint() {
  local kind
  kind=$(stat -c '%F %t:%T' "$1" 2>/dev/null)
  [[ -f $1 && ! -L $1 ]] && kind+=" $(sha256sum "$1" | cut -c1-16)"
  [[ -L $1 ]] && kind+=" -> $(readlink "$1")"
  echo "$kind"
}
# case CLASS EXPECTED_RC WATCHED_FILES -- COMMAND...: runs COMMAND with a 30 s timeout; a watched file clobbered
# is one whose checksum or file type changed.
case_() {
  local class=$1 want=$2 watch=$3; shift 4
  [[ -n ${CASES[$class]+x} ]] || { CLASSES+=("$class"); CASES[$class]=0; CODES[$class]=""; CRASH[$class]=0; HANG[$class]=0; CLOB[$class]=0; }
  local before=""
  for f in $watch; do before+="$(fingerprint "$f");"; done
  local t0=$SECONDS
  timeout 30 "$@" > out.txt 2>&1 < /dev/null
  local rc=$?
  local after=""
  for f in $watch; do after+="$(fingerprint "$f");"; done
  CASES[$class]=$((CASES[$class] + 1))
  [[ " ${CODES[$class]} " == *" $rc "* ]] || CODES[$class]="${CODES[$class]} $rc"
  if [[ $rc == 124 ]]; then HANG[$class]=$((HANG[$class] + 1)); elif [[ $rc -ge 128 ]]; then CRASH[$class]=$((CRASH[$class] + 1)); fi
  [[ $before == "$after" ]] || CLOB[$class]=$((CLOB[$class] + 1))
  [[ $rc == "$want" ]] || echo "unexpected: rc=$rc (expected $want): $*" >&2
  [[ -z ${ROBUSTNESS_VERBOSE:-} ]] || echo "$((SECONDS - t0)) s rc=$rc: $*" >&2
}

# ---- scenario files ----
mkfifo fifo.yaml; mknod zero c 1 5; mkdir dir.yaml; ln -s loop_b.yaml loop_a.yaml; ln -s loop_a.yaml loop_b.yaml
cp "$S" big.yaml; head -c $((17 << 20)) /dev/zero | tr '\0' '#' >> big.yaml
printf 'schema_version: 1\nmodel: {num_attention_heads: 8, kv_channels: 16, seq_length: 128, seq_length: 64}\nparallel: {context_parallel_size: 4, cp_comm_type: p2p}\n' > dup.yaml
python3 -c "print('schema_version: 1\nmodel: ' + '['*100000 + ']'*100000)" > deep.yaml
for f in fifo.yaml zero dir.yaml loop_a.yaml big.yaml dup.yaml deep.yaml missing.yaml; do
  case_ "scenario files" 2 "" -- "$H" validate "$f"
done
# ---- numbers out of range ----
for ov in cluster.nvlink.bandwidth_GB_per_s=1e308 cluster.gpu.hbm_bandwidth_GB_per_s=1e308 \
          cluster.gpu.peak_bf16_TFLOP_per_s=1e-300 cluster.message_latency_us=1e300 \
          cluster.gpu.kernel_launch_overhead_us=1e300 cluster.nvlink.bandwidth_GB_per_s=1e-300 \
          model.num_attention_heads=1048576 cluster.gpu.gemm_efficiency_bf16=1e-300 model.seq_length.=5 foo.bar=1; do
  case_ "scenario values and overrides" 2 "" -- "$H" validate "$S" "$ov"
  case_ "scenario values and overrides" 2 "" -- "$H" simulate "$S" "$ov"
done
case_ "scenario values and overrides" 2 "" -- "$H" simulate "$S" cluster.gpu.peak_bf16_TFLOP_per_s=1 model.seq_length=1048576
# ---- launch scripts ----
T='python pretrain_gpt.py --num-attention-heads 8 --hidden-size 1024 --seq-length 1024 --num-layers'
echo "$T \$(( (-9223372036854775807-1) / -1 ))" > fpe.sh
printf 'X=X\n%s $((X))\n' "$T" > self.sh
printf 'A=B\nB=A\n%s $((A))\n' "$T" > mutual.sh
python3 -c "print('$T \$((' + '('*100000 + '2' + ')'*100000 + '))')" > parens.sh
python3 -c "print('X=' + '\${Y:-'*10000 + '2' + '}'*10000); print('$T \$X')" > defaults.sh
echo "$T \$((9223372036854775807+1))" > overflow.sh
mkfifo fifo.sh
for f in fpe.sh self.sh mutual.sh parens.sh defaults.sh overflow.sh fifo.sh; do
  case_ "launch scripts" 2 "" -- "$H" import megatron-args "$f" -o imported.yaml
done
# ---- outputs ----
cp "$S" s.yaml
mknod null c 1 3; mknod full c 1 7; ln -s /proc/self/fd/1 stdout_link; mkdir outdir; ln -s nowhere/x dangling
case_ "outputs" 0 "null" -- "$H" simulate s.yaml --trace null
case_ "outputs" 2 "full" -- "$H" simulate s.yaml --summary full
case_ "outputs" 0 "stdout_link" -- "$H" simulate s.yaml --links stdout_link
case_ "outputs" 2 "s.yaml" -- "$H" simulate s.yaml --summary s.yaml
case_ "outputs" 2 "outdir" -- "$H" simulate s.yaml --summary outdir
case_ "outputs" 2 "dangling" -- "$H" simulate s.yaml --summary dangling
ln -s s.yaml s_link.yaml
case_ "outputs" 2 "s.yaml" -- "$H" simulate s.yaml --summary s_link.yaml
# ---- dumps ----
"$H" verify s.yaml model.seq_length=256 --threads 1 --dump good.h5 > /dev/null 2>&1
head -c 4096 good.h5 > truncated.h5; echo "not hdf5" > text.h5
case_ "dumps" 2 "" -- "$H" compare good.h5 truncated.h5
case_ "dumps" 2 "" -- "$H" compare text.h5 good.h5
case_ "dumps" 2 "good.h5" -- "$H" verify s.yaml model.seq_length=256 --threads 1 --reference good.h5 --dump good.h5
# ---- included files ----
printf 'gpu:\n  memory_GB: SECRET_TOKEN_abc123\n' > secret.yaml
case_ "included files" 2 "secret.yaml" -- "$H" validate s.yaml "cluster.gpu.calibration=$W/secret.yaml"
grep -q SECRET out.txt && echo "unexpected: the calibration file's value was echoed" >&2
case_ "included files" 2 "" -- "$H" validate s.yaml "cluster.gpu.calibration=$W/fifo.yaml"

echo "| input class | cases | exit codes | crashes | hangs | files clobbered |"
echo "|---|---|---|---|---|---|"
for c in "${CLASSES[@]}"; do
  echo "| $c | ${CASES[$c]} |${CODES[$c]} | ${CRASH[$c]} | ${HANG[$c]} | ${CLOB[$c]} |"
done
