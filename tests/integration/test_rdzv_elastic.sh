#!/usr/bin/env bash
# ctest: LABELS=quick
# Elastic rendezvous on loopback: --nnodes 2:3 --max-restarts 1 with 3 agents
# (node 0's dlaunch hosts the coordinator, is_host=1; the others is_host=0).
# Generation 0 runs on 3 nodes; `kill -9` of one non-host agent loses its node;
# the coordinator restarts the job on the remaining 2 (at least MIN), whose
# workers see TORCHELASTIC_RESTART_COUNT=1 and WORLD_SIZE=4, finish, and both
# dlaunch exit 0. Nothing is left running.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

NPROC=2
HB=2
mkdir -p "$TMP/rec"
# One file per (rank, generation); generation 0 waits to be torn down.
cat >"$TMP/worker.sh" <<EOF
#!/bin/sh
g=\$TORCHELASTIC_RESTART_COUNT
echo "restart=\$g world=\$WORLD_SIZE rank=\$RANK group=\$GROUP_RANK" >"$TMP/rec/r\$RANK.g\$g"
echo "rank \$RANK generation \$g world \$WORLD_SIZE"
if [ "\$g" = 0 ]; then exec "$TMP/bin/sleep" 60; fi
"$TMP/bin/sleep" 1
echo "rank \$RANK finished"
EOF
chmod +x "$TMP/worker.sh"

show_nodes() {
  local n
  for n in "$@"; do
    echo "--- $n: stdout (last 15 lines)"
    tail -n 15 "$TMP/$n.out" | cut -c1-300
    echo "--- $n: stderr (last 15 lines)"
    tail -n 15 "$TMP/$n.err" | cut -c1-300
  done >&2
  echo "--- records:" >&2
  head -n 5 "$TMP"/rec/* >&2 2>/dev/null
}

port=$(free_port)
endpoint=127.0.0.1:$port
common=(--nnodes 2:3 --max-restarts 1 --nproc-per-node "$NPROC" --rdzv-endpoint "$endpoint" --rdzv-id "elastic-$$")
conf=last_call_timeout=1,heartbeat_timeout=$HB
start_dl host 60 "${common[@]}" --rdzv-conf "is_host=1,$conf" -- "$TMP/worker.sh"
start_dl peer1 60 "${common[@]}" --rdzv-conf "is_host=0,$conf" -- "$TMP/worker.sh"
start_dl peer2 60 "${common[@]}" --rdzv-conf "is_host=0,$conf" -- "$TMP/worker.sh"

gen0_started() { [[ $(find "$TMP/rec" -name '*.g0' | wc -l) == $((3 * NPROC)) ]]; }
wait_for 30 gen0_started || { show_nodes host peer1 peer2; fail "generation 0 did not start $((3 * NPROC)) workers on 3 nodes within 30s"; }
for f in "$TMP"/rec/*.g0; do
  grep -q "^restart=0 world=$((3 * NPROC)) " "$f" || { show_nodes host peer1 peer2; fail "$(basename "$f"): generation 0 should run on 3 nodes: $(cat "$f")"; }
done
sleep 0.5

victim=$(dl_pid peer2)
[[ -n $victim ]] || fail "cannot find peer2's dlaunch"
t_kill=$EPOCHREALTIME
kill -KILL "$victim"
wait_dl peer2
wait_dl host
rc_host=$RC
wait_dl peer1
rc_peer1=$RC
took=$(since "$t_kill")
log "after kill -9 of peer2: host exited $rc_host, peer1 $rc_peer1, ${took}s after the kill"
[[ $rc_host == 0 && $rc_peer1 == 0 ]] ||
  { show_nodes host peer1 peer2; fail "the job should finish on the remaining 2 nodes with exit 0; got host=$rc_host peer1=$rc_peer1"; }

n_gen1=$(find "$TMP/rec" -name '*.g1' | wc -l)
[[ $n_gen1 == $((2 * NPROC)) ]] || { show_nodes host peer1; fail "expected $((2 * NPROC)) generation-1 workers (2 nodes x $NPROC), got $n_gen1"; }
for r in $(seq 0 $((2 * NPROC - 1))); do
  f=$TMP/rec/r$r.g1
  [[ -f $f ]] || { show_nodes host peer1; fail "no generation-1 worker with RANK=$r"; }
  grep -q "^restart=1 world=$((2 * NPROC)) rank=$r group=$((r / NPROC))$" "$f" ||
    { show_nodes host peer1; fail "rank $r in generation 1: expected TORCHELASTIC_RESTART_COUNT=1 WORLD_SIZE=$((2 * NPROC)) GROUP_RANK=$((r / NPROC)), got: $(cat "$f")"; }
done
assert_eq "$(find "$TMP/rec" -name '*.g2' | wc -l)" 0 "workers of a third generation"
assert_eq "$(cat "$TMP"/host.out "$TMP"/peer1.out | grep -Ec '^\[[0-9]+\]: rank [0-9]+ finished$')" $((2 * NPROC)) \
  "generation-1 ranks that finished"
assert_file_matches "$TMP/host.err" "^dlaunch: rendezvous $endpoint: .*lost.*restarting \(1 of 1\)" "the host logs the lost node and the restart"
assert_file_matches "$TMP/host.err" "^dlaunch: rendezvous $endpoint: generation [0-9]+: 2 nodes, $((2 * NPROC)) workers, .*restart 1 of 1" \
  "the host logs the new generation on 2 nodes"

wait_for 5 no_marked_processes
assert_no_leftovers "after the elastic job"
pass
