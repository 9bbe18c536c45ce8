#!/usr/bin/env bash
# Finding 5 of issue 9: the handshake survives a host that is briefly late.
# A 2-node rendezvous on loopback, node 0 hosting the coordinator
# (is_host=1); node 0's dlaunch is SIGSTOPped before node 1 starts, node 1
# connects (the kernel's backlog accepts it) and sends its Hello, and node 0
# resumes 7 s later: longer than heartbeat_timeout/3 (5 s at the default 15 s,
# so a heartbeat is already queued behind the Hello) and shorter than the
# heartbeat timeout. The job must run as if nothing happened: both nodes exit
# 0 and both ranks finish. Before the fix node 1 is refused with
# "unexpected heartbeat before the join".
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN

STOP_SECONDS=7
cat >"$TMP/worker.sh" <<EOF
#!/bin/sh
echo "rank \$RANK of \$WORLD_SIZE started"
"$TMP/bin/sleep" 1
echo "rank \$RANK done"
EOF
chmod +x "$TMP/worker.sh"

port=$(free_port)
endpoint=127.0.0.1:$port
common=(--nnodes 2 --nproc-per-node 1 --rdzv-endpoint "$endpoint" --rdzv-id "late-host-$$")
# join_timeout bounds the test when node 1 is lost (the host would wait 600 s).
start_dl host 60 "${common[@]}" --node-rank 0 --rdzv-conf is_host=1,join_timeout=20 -- "$TMP/worker.sh"
wait_for 10 port_listening "$port" || { show_nodes host; fail "node 0 did not listen on $endpoint within 10s"; }
host_pid=$(dl_pid host) || fail "cannot find node 0's dlaunch"
# Node 0's own agent connects to its coordinator first; stop the host only
# once that connection is up, so that node 1 is the one that meets a stopped host.
one_connected() { [[ $(connections_to "$port") -ge 1 ]]; }
wait_for 5 one_connected || { show_nodes host; fail "node 0's agent did not connect to its own coordinator within 5s"; }
kill -STOP "$host_pid" || fail "cannot SIGSTOP node 0's dlaunch ($host_pid)"
t_stop=$EPOCHREALTIME
log "node 0's dlaunch ($host_pid) stopped"
start_dl late 60 "${common[@]}" --rdzv-conf is_host=0,join_timeout=20 -- "$TMP/worker.sh"
two_connected() { [[ $(connections_to "$port") -ge 2 ]]; }
wait_for 5 two_connected || { kill -CONT "$host_pid"; show_nodes host late; fail "node 1 did not connect to $endpoint within 5s"; }
# The fault itself: the host stays stopped for STOP_SECONDS after node 1 connected.
sleep "$STOP_SECONDS"
kill -CONT "$host_pid"
log "node 0's dlaunch resumed after $(since "$t_stop")s"

wait_dl late
rc_late=$RC
log "late host: node 1 exited $rc_late $(since "$t_stop")s after node 0 was stopped"
wait_dl host
rc_host=$RC
log "late host: node 0 exited $rc_host $(since "$t_stop")s after it was stopped"
[[ $rc_host == 0 && $rc_late == 0 ]] || {
  show_nodes host late
  fail "a host stopped for ${STOP_SECONDS}s while node 1 connected: expected both nodes to exit 0, got node 0=$rc_host node 1=$rc_late (finding 5: heartbeats before the join?)"
}
assert_file_matches "$TMP/host.out" '^\[0\]: rank 0 done$' "rank 0 finished on node 0"
assert_file_matches "$TMP/late.out" '^\[1\]: rank 1 done$' "rank 1 finished on node 1"
if grep -q 'before the join' "$TMP/host.err" "$TMP/late.err"; then
  show_nodes host late
  fail "the coordinator refused node 1 for a message before its join"
fi
wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
