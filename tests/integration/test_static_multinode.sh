#!/usr/bin/env bash
# ctest: PROCESSORS=2
# Static multi-node, torch.distributed.launch style: two dlaunch "nodes" on
# loopback (--nnodes 2 --node-rank R --master-addr --master-port), 2 ranks each,
# run real DDP across all 4 ranks. RANKs must be contiguous per node and the
# parameters equal everywhere.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch

cp "$SRC/examples/ddp_train.py" "$TMP/ddp_train.py"
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
common=(--nnodes 2 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$port")

timeout -k 5 120 "$DLAUNCH" "${common[@]}" --node-rank 1 -- "$PY" -u "$TMP/ddp_train.py" --epochs 1 --steps 5 \
  >"$TMP/node1.out" 2>"$TMP/node1.err" </dev/null &
node1=$!
track_pid "$node1"
timeout -k 5 120 "$DLAUNCH" "${common[@]}" --node-rank 0 -- "$PY" -u "$TMP/ddp_train.py" --epochs 1 --steps 5 \
  >"$TMP/node0.out" 2>"$TMP/node0.err" </dev/null
rc0=$?
wait "$node1"
rc1=$?
[[ $rc0 == 0 && $rc1 == 0 ]] || {
  cat "$TMP"/node*.err >&2
  fail "node exit codes $rc0 and $rc1, expected 0 and 0"
}

# Node 0 holds ranks 0-1, node 1 ranks 2-3, each tagged with its global rank.
for r in 0 1; do assert_file_matches "$TMP/node0.out" "^\[$r\]: rank $r: params in sync" "node 0, rank $r"; done
for r in 2 3; do assert_file_matches "$TMP/node1.out" "^\[$r\]: rank $r: params in sync" "node 1, rank $r"; done
sums=$(sed -nE 's/.*params in sync, checksum (.*)$/\1/p' "$TMP"/node*.out | sort -u | wc -l)
[[ $sums == 1 ]] || fail "the two nodes disagree on the parameters ($sums distinct checksums)"
assert_file_matches "$TMP/node0.out" '^\[0\]: summary: world_size 4, ' "world size 4 seen by rank 0"

wait_for 5 no_marked_processes
assert_no_leftovers "after the two-node job"
pass
