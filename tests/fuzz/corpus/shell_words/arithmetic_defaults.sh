X=${Y:-${Z:-3}}
N=$(( (7 + 5) * 3 / 2 % 7 - -1 ))
ARR=( --hidden-size 1024 "--seq-length" '1024' )
CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \
  --num-attention-heads 8 ${ARR[@]} --num-layers $N --context-parallel-size $X # comment
