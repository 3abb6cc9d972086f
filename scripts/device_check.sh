#!/usr/bin/env bash
# The GPU backend's device check, on a host with one NVIDIA GPU (H200), run from the repository root after
# scripts/make_device_bundle.sh made ./device-bundle on the build host (carry it there). Prints a table; exit 0
# when every check passed. Budget: under 5 minutes (each step has its own timeout).
#   1. the GPU tests (kernels, executor, faults, NCCL one-rank ring step; 2-GPU tests skip on one GPU)
#   2. verify on the single-device backend, bf16 and fp32: the default scenario (GQA 32/8, causal), the Llama-3-8B
#      CP16 [8,2] scenario at 16K tokens (GQA, 16 virtual ranks on one GPU), the default scenario without a mask
#   3. two injected faults must fail (exit 1)
#   4. hcpsim compare: GPU dumps against the CPU dumps made on the build host
#   5. the attention kernels against cuBLAS's bf16 GEMM rate (bench/gpu/attention_bench.cu)
set -uo pipefail
cd "$(dirname "$0")/.."
B=${HCPSIM_DEVICE_BUNDLE:-device-bundle}
if [ ! -x "$B/bin/hcpsim" ]; then
  echo "device_check: $B/bin/hcpsim not found; run 'bash scripts/make_device_bundle.sh' on the build host and carry $B" >&2
  exit 2
fi
CUDA_LIB=${CUDA_HOME:-/usr/local/cuda}/lib64
# NCCL is the GPU host's own (never shipped): $NCCL_HOME/lib, else the CUDA toolkit, else the dynamic linker cache.
NCCL_DIR=""
for d in ${NCCL_HOME:+$NCCL_HOME/lib} "$CUDA_LIB" /usr/lib/x86_64-linux-gnu \
         "$(dirname "$( (/sbin/ldconfig -p || ldconfig -p) 2>/dev/null | awk '/libnccl.so.2/ {print $NF; exit}')")"; do
  if [ -n "$d" ] && ls "$d"/libnccl.so.2* >/dev/null 2>&1; then NCCL_DIR=$d; break; fi
done
if [ -z "$NCCL_DIR" ]; then
  echo "device_check: libnccl.so.2 not found (looked in \$NCCL_HOME/lib, $CUDA_LIB, /usr/lib/x86_64-linux-gnu and the" \
       "linker cache); install NCCL or set NCCL_HOME" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$PWD/$B/lib:$CUDA_LIB:$NCCL_DIR:${LD_LIBRARY_PATH:-}"
OUT=${OUT:-/tmp/hcpsim_device_check}
mkdir -p "$OUT"
THREADS=$(nproc)
H="$B/bin/hcpsim"
failures=0
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3"; }
# check NAME EXPECTED_RC TIMEOUT_S CMD...: runs CMD, logs to $OUT/NAME.log, one table row.
check() {
  local name=$1 want=$2 limit=$3; shift 3
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local detail
  detail=$(grep -E "result: |measured on|test cases|All tests|forward_fraction|NCCL|error|GPU_SKIP" "$OUT/$name.log" |
           tr '\n' ' ' | cut -c1-260)
  if [ "$rc" -eq "$want" ]; then
    row "$name" "pass (rc $rc, $((SECONDS - start)) s)" "$detail"
  else
    row "$name" "FAIL (rc $rc, want $want, $((SECONDS - start)) s)" "$detail; log $OUT/$name.log"
    failures=$((failures + 1))
  fi
}
echo "| check | result | detail |"
echo "|---|---|---|"
row "device" "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)" \
    "$("$H" --version 2>&1 | head -1)"
# Without a usable device every GPU test would only report "skipped": stop here instead (exit 3).
if "$B/bin/hcpsim_gpu_tests" "gpu: visible devices*" 2>&1 |
    grep -q GPU_SKIP; then
  row "gpu" "NOT RUN" "no usable CUDA device on this host; nothing was checked"
  exit 3
fi
check gpu_tests 0 150 "$B/bin/hcpsim_gpu_tests" --reporter compact
check nccl_one_rank_ring 0 60 "$B/bin/hcpsim_gpu_tests" "gpu: a one-rank NCCL communicator runs one ring step" -s
DEF=scenarios/llama32_1b_cp4_a2a_p2p.yaml
BIG=scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml
for dt in bf16 fp32; do
  check "verify_default_$dt" 0 60 "$H" verify "$DEF" --backend gpu --dtype "$dt" --threads "$THREADS" \
    --trace "$OUT/trace_default_$dt.json" --ops-csv "$OUT/ops_default_$dt.csv"
  check "verify_llama3_8b_cp16_16k_$dt" 0 90 "$H" verify "$BIG" model.seq_length=16384 oracle.heads=1 \
    --backend gpu --dtype "$dt" --threads "$THREADS"
  check "verify_default_no_mask_$dt" 0 60 "$H" verify "$DEF" model.attn_mask_type=no_mask --backend gpu \
    --dtype "$dt" --threads "$THREADS"
done
check fault_dropped_lse_merge 1 60 "$H" verify "$DEF" --backend gpu --dtype bf16 --inject dropped_lse_merge \
  --threads "$THREADS"
check fault_missing_dkv_hop 1 60 "$H" verify "$DEF" --backend gpu --dtype bf16 --inject missing_dkv_hop \
  --threads "$THREADS"
for dt in fp32 bf16; do
  # The same overrides as the CPU dumps of make_device_bundle.sh.
  check "verify_compare_run_$dt" 0 60 "$H" verify "$DEF" model.seq_length=512 --backend gpu \
    --dtype "$dt" --threads "$THREADS" --dump "$OUT/gpu_compare_$dt.h5"
  check "compare_cpu_gpu_$dt" 0 30 "$H" compare "$B/cpu_compare_$dt.h5" "$OUT/gpu_compare_$dt.h5"
done
check attention_bench 0 120 "$B/bin/hcpsim_gpu_attention_bench" --quick
echo
echo "attention kernels vs cuBLAS bf16 GEMM (from the bench):"
grep -E "^cuBLAS" "$OUT/attention_bench.log"
sed -n '/^kernel /,$p' "$OUT/attention_bench.log"
echo "failures: $failures"
[ "$failures" -eq 0 ]
