#!/bin/sh
# A node health check for --health-check: exit 0 when this node is fit to join,
# anything else (with one line on stderr saying why) to keep it out.
#
#   dlaunch --nnodes 2:4 --rdzv-endpoint head:29400 \
#     --health-check 'sh examples/health_check.sh' -- python train.py
#
# dlaunch runs it with /bin/sh -c before the node joins (and again before a
# restart when its last pass is older than --health-check-interval), with the
# node's environment and DLAUNCH_RDZV_ENDPOINT=HOST:PORT. The last line it
# writes is quoted in dlaunch's message. Tune the numbers to your nodes.
set -u

MIN_FREE_GB=${MIN_FREE_GB:-20}   # free space needed on SCRATCH
SCRATCH=${SCRATCH:-/tmp}
MIN_GPUS=${MIN_GPUS:-}           # empty: as many as CUDA_VISIBLE_DEVICES names, if set

# Free disk: df -P prints 1024-byte blocks, the 4th field of its 2nd line.
free_kb=$(df -Pk "$SCRATCH" 2>/dev/null | awk 'NR == 2 {print $4}')
if [ -z "$free_kb" ]; then
  echo "cannot read the free space of $SCRATCH" >&2
  exit 1
fi
if [ "$free_kb" -lt $((MIN_FREE_GB * 1024 * 1024)) ]; then
  echo "only $((free_kb / 1024 / 1024)) GB free on $SCRATCH (want $MIN_FREE_GB)" >&2
  exit 1
fi

# GPUs, where nvidia-smi is installed: as many as expected, each answering.
if command -v nvidia-smi >/dev/null 2>&1; then
  if [ -z "$MIN_GPUS" ] && [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    MIN_GPUS=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
  fi
  gpus=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  if [ -n "$MIN_GPUS" ] && [ "$gpus" -lt "$MIN_GPUS" ]; then
    echo "nvidia-smi sees $gpus GPU(s), want $MIN_GPUS" >&2
    exit 1
  fi
fi

# The rendezvous endpoint answers TCP from here (bash's /dev/tcp). A node that
# hosts the coordinator listens before its check runs; a stand-alone
# coordinator may start a little after the nodes, so try for about 30 s.
if [ -n "${DLAUNCH_RDZV_ENDPOINT:-}" ] && command -v bash >/dev/null 2>&1; then
  host=${DLAUNCH_RDZV_ENDPOINT%:*}
  port=${DLAUNCH_RDZV_ENDPOINT##*:}
  host=${host#[}
  host=${host%]}
  tries=0
  until timeout 2 bash -c '</dev/tcp/$0/$1' "$host" "$port" 2>/dev/null; do
    tries=$((tries + 1))
    if [ "$tries" -ge 10 ]; then
      echo "cannot reach the rendezvous at $DLAUNCH_RDZV_ENDPOINT" >&2
      exit 1
    fi
    sleep 3
  done
fi

echo "healthy: $((free_kb / 1024 / 1024)) GB free on $SCRATCH"
