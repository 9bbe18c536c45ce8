#!/usr/bin/env bash
# ctest: PROCESSORS=2
# --launch-mode per-node: the command is itself a per-node launcher (here the
# real torch.distributed.launch), started once per node with NODE_RANK, NNODES,
# MASTER_ADDR and MASTER_PORT, as seed 004's per-node jobs expect.
#   1. Two loopback nodes, started from one head (-H localhost,127.0.0.2, which
#      dlaunch runs through a local shell, no ssh), each running
#      `sh -c 'python -m torch.distributed.launch --nnodes $NNODES --node_rank
#      $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT
#      --nproc_per_node 2 --use_env ddp_train.py'`: 4 DDP ranks in sync, and
#      the child sees no RANK/LOCAL_RANK/WORLD_SIZE/TORCHELASTIC_* of dlaunch's.
#   2. The child launcher fails on node 1 (exit 4): every node stops, the head
#      exits 4.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch

cp "$SRC/examples/ddp_train.py" "$TMP/ddp_train.py"
# Debian's torch 1.13 launcher crashes on Python 3.11 at Std.from_str (see
# shared/tools/torchrun311.py); the same one-function fix, then the unchanged
# torch.distributed.launch main.
cat >"$TMP/launch311.py" <<'PY'
import re, sys
from torch.distributed.elastic.multiprocessing import api
def _from_str(vm):
    if re.fullmatch(r"\d", vm):
        return api.Std(int(vm))
    return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
api.Std.from_str = staticmethod(_from_str)
from torch.distributed.launch import main
main()
PY
cat >"$TMP/node.sh" <<EOF
#!/bin/sh
echo "node env: NODE_RANK=\$NODE_RANK NNODES=\$NNODES MASTER_ADDR=\$MASTER_ADDR MASTER_PORT=\$MASTER_PORT AZ=\$AZ_BATCH_MASTER_NODE RANK=\${RANK-unset} LOCAL_RANK=\${LOCAL_RANK-unset} WORLD_SIZE=\${WORLD_SIZE-unset} RUN_ID=\${TORCHELASTIC_RUN_ID-unset}"
[ "\$NODE_RANK" = "\${FAIL_NODE:-x}" ] && exit 4
exec "$PY" "$TMP/launch311.py" --nnodes "\$NNODES" --node_rank "\$NODE_RANK" --master_addr "\$MASTER_ADDR" \\
  --master_port "\$MASTER_PORT" --nproc_per_node 2 --use_env --monitor_interval 0.1 "$TMP/ddp_train.py" --epochs 1 --steps 5
EOF
chmod +x "$TMP/node.sh"
export OMP_NUM_THREADS=1

# 1. Two nodes, torch.distributed.launch on each.
run_dl 150 -H localhost,127.0.0.2 --launch-mode per-node -- "$TMP/node.sh"
expect_rc 0 "2 nodes x torch.distributed.launch --nproc_per_node 2"
for n in 0 1; do
  assert_file_matches "$OUT" \
    "^\[$n,$n\]: node env: NODE_RANK=$n NNODES=2 MASTER_ADDR=127\.0\.0\.1 MASTER_PORT=[0-9]+ AZ=127\.0\.0\.1:[0-9]+ RANK=unset LOCAL_RANK=unset WORLD_SIZE=unset RUN_ID=unset\$" \
    "node $n's launcher sees the node variables and none of a worker's"
done
ports=$(sed -nE 's/.*node env: .*MASTER_PORT=([0-9]+) .*/\1/p' "$OUT" | sort -u | wc -l)
assert_eq "$ports" 1 "distinct MASTER_PORT values across the nodes"
for r in 0 1 2 3; do
  assert_file_matches "$OUT" "rank $r: params in sync, checksum " "DDP rank $r (started by torch.distributed.launch)"
done
n_sums=$(sed -nE 's/.*rank [0-9]+: params in sync, checksum (.*)$/\1/p' "$OUT" | sort -u | wc -l)
assert_eq "$n_sums" 1 "distinct parameter checksums across the 4 ranks"
assert_file_matches "$OUT" "summary: world_size 4, .*all ranks in sync" "rank 0's summary"
wait_for 5 no_marked_processes
assert_no_leftovers "after the per-node job"

# 2. Node 1's launcher fails: the job stops everywhere with its code.
FAIL_NODE=1 run_dl 60 -H localhost,127.0.0.2 --launch-mode per-node -- "$TMP/node.sh"
expect_rc 4 "node 1's per-node launcher exits 4"
assert_file_matches "$ERR" "^dlaunch: job: .*node 1 .*exited with code 4" "the head's summary names node 1 and code 4"
wait_for 5 no_marked_processes
assert_no_leftovers "after the failed per-node job"
pass
