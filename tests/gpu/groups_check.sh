#!/usr/bin/env bash
# By hand, on a machine with an NVIDIA GPU and a Python with torch (the suite
# has neither): several programs in one job on a GPU.
#   1. --pin-gpu hands the node's GPUs out in LOCAL_RANK order across groups,
#      and a group's --gpus gives its own;
#   2. a trainer all-reduces over NCCL in the job's world while a rollout
#      role (gloo, its own world) fails once and restarts alone
#      (--role-restarts): the trainer keeps its PID and finishes.
# Usage: tests/gpu/groups_check.sh [DLAUNCH] [OUTDIR]
set -u
D=${1:-build/dlaunch}
OUT=${2:-.}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
nvidia-smi -L
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.device_count())'
echo "== 1. GPUs across groups"
timeout 60 "$D" --pin-gpu -np 1 --role a -- sh -c 'echo "a LOCAL_RANK=$LOCAL_RANK CVD=$CUDA_VISIBLE_DEVICES"' \
  : -np 2 --role b -- sh -c 'echo "b LOCAL_RANK=$LOCAL_RANK CVD=$CUDA_VISIBLE_DEVICES"'
echo "rc=$?"
timeout 60 "$D" -np 1 --role a -- sh -c 'echo "a CVD=${CUDA_VISIBLE_DEVICES-unset}"' \
  : -np 2 --role b --gpus 0 -- sh -c 'echo "b LOCAL_RANK=$LOCAL_RANK CVD=$CUDA_VISIBLE_DEVICES"; nvidia-smi -L'
echo "rc=$?"
echo "== 2. NCCL trainer beside a rollout restarted alone"
timeout 240 "$D" --role-restarts rollout=1 --events "$OUT/events.jsonl" \
  -np 1 --role trainer --gpus 0 -- "$PY" "$HERE/groups_worker.py" \
  : -np 2 --role rollout -- "$PY" "$HERE/groups_worker.py"
echo "rc=$?"
grep -c '"event":"worker_started"' "$OUT/events.jsonl"
grep '"event":"restart"' "$OUT/events.jsonl"
