#!/usr/bin/env bash
# ctest: PROCESSORS=2
# Multi-host rendezvous across three network namespaces ("hosts" A, B, C) joined
# by veth pairs into a bridge in a fourth namespace, on a private /24 that
# exists only inside them. One dlaunch per namespace, the coordinator hosted by
# A's dlaunch (the endpoint is A's address):
#   1. the real DDP example across 3 x 2 ranks: every node exits 0, parameters
#      in sync, MASTER_ADDR is A's address everywhere;
#   2. `kill -9` of C's dlaunch mid-run (workers sleep, heartbeat_timeout=2):
#      A and B exit non-zero on their own, no worker left anywhere;
#   3. C cut off the network (its link down, so nothing closes: only missed
#      heartbeats tell): A and B abort, C notices the lost coordinator, and no
#      worker is left.
# The workers sleep 60 s: a node that misses the loss runs on until that ends
# (exit 0) or its guard does. How soon a missed heartbeat counts is the
# coordinator's and the agent's, under a fake clock in their unit tests.
# Needs root and `ip netns`; skipped otherwise, with the reason.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch

# Three hosts on a veth bridge (lib.sh); skips without root or `ip netns`.
netns_hosts "dlrv$$-" 3
NS_A=${NS_HOSTS[0]} NS_B=${NS_HOSTS[1]} NS_C=${NS_HOSTS[2]}
ADDR_A=$NET.1  # B is $NET.2, C $NET.3

# gloo picks the address it advertises from the interface; the hostname
# resolves to loopback here.
export GLOO_SOCKET_IFNAME=eth0
export DLAUNCH_RDZV_TOKEN=netns-secret-$$-$RANDOM

workers_in() { ns_marked "$1"; }
no_workers_anywhere() {
  [[ -z $(workers_in "$NS_A")$(workers_in "$NS_B")$(workers_in "$NS_C") ]]
}
assert_no_workers() {
  local what=$1
  wait_for 5 no_workers_anywhere && return 0
  fail "$what: processes left in the namespaces:$(ns_leftovers workers_in "$NS_A" "$NS_B" "$NS_C")"
}

# ---------------------------------------------------------------------------
# 1. Real DDP across the three hosts.
cp "$SRC/examples/ddp_train.py" "$TMP/ddp_train.py"
cat >"$TMP/ddp_wrap.sh" <<EOF
#!/bin/sh
echo "env: RANK=\$RANK GROUP_RANK=\$GROUP_RANK WORLD_SIZE=\$WORLD_SIZE MASTER_ADDR=\$MASTER_ADDR MASTER_PORT=\$MASTER_PORT"
exec "$PY" -u "$TMP/ddp_train.py" --epochs 1 --steps 5
EOF
chmod +x "$TMP/ddp_wrap.sh"

port=$(free_port)
endpoint=$ADDR_A:$port
common=(--nnodes 3 --nproc-per-node 2 --rdzv-endpoint "$endpoint" --rdzv-id "netns-ddp-$$")
# A is node rank 0 (the head); B and C take theirs in order of arrival.
start_dl_wrapped ddpA 150 "ip netns exec $NS_A" "${common[@]}" --node-rank 0 -- "$TMP/ddp_wrap.sh"
start_dl_wrapped ddpB 150 "ip netns exec $NS_B" "${common[@]}" -- "$TMP/ddp_wrap.sh"
start_dl_wrapped ddpC 150 "ip netns exec $NS_C" "${common[@]}" -- "$TMP/ddp_wrap.sh"
rcs=""
for n in ddpA ddpB ddpC; do
  wait_dl "$n"
  rcs+=" $n=$RC(${ELAPSED}s)"
done
log "DDP job:$rcs"
[[ $rcs != *=[1-9]* ]] || { show_nodes ddpA ddpB ddpC; fail "DDP across three namespaces: expected every node to exit 0, got$rcs"; }

for r in 0 1 2 3 4 5; do
  grep -Eq "^\[$r\]: rank $r: params in sync, checksum " "$TMP"/ddp{A,B,C}.out ||
    { show_nodes ddpA ddpB ddpC; fail "rank $r did not report 'params in sync'"; }
done
n_sums=$(sed -nE 's/^\[[0-9]+\]: rank [0-9]+: params in sync, checksum (.*)$/\1/p' "$TMP"/ddp{A,B,C}.out | sort -u | wc -l)
[[ $n_sums == 1 ]] || fail "the hosts disagree on the parameters ($n_sums distinct checksums)"
grep -q 'OUT OF SYNC' "$TMP"/ddp{A,B,C}.out && fail "a rank reported parameters out of sync"
assert_file_matches "$TMP/ddpA.out" '^\[0\]: summary: world_size 6, .*all ranks in sync' "rank 0's summary on A"
# A holds ranks 0 and 1; every worker on every host was told MASTER_ADDR=A.
for r in 0 1; do assert_file_matches "$TMP/ddpA.out" "^\[$r\]: env: RANK=$r GROUP_RANK=0 " "rank $r on A (node rank 0)"; done
n_env=$(grep -hc '^\[[0-9]\]: env: .*WORLD_SIZE=6 MASTER_ADDR=' "$TMP"/ddp{A,B,C}.out | awk '{s+=$1} END{print s}')
assert_eq "$n_env" 6 "workers that printed their environment"
bad_master=$(grep -h '^\[[0-9]\]: env: ' "$TMP"/ddp{A,B,C}.out | grep -v "MASTER_ADDR=$ADDR_A " || true)
[[ -z $bad_master ]] || fail "MASTER_ADDR should be A's address $ADDR_A on every worker, got: $bad_master"
# B's and C's ranks are contiguous and match their node ranks.
for n in ddpB ddpC; do
  g=$(sed -nE 's/^\[[0-9]\]: env: RANK=[0-9] GROUP_RANK=([0-9]) .*/\1/p' "$TMP/$n.out" | sort -u)
  [[ $g == 1 || $g == 2 ]] || fail "$n: expected one node rank (1 or 2), got '$g'"
  for r in $((2 * g)) $((2 * g + 1)); do
    assert_file_matches "$TMP/$n.out" "^\[$r\]: env: RANK=$r GROUP_RANK=$g " "$n: rank $r on node rank $g"
  done
done
assert_no_workers "after the DDP job"

# ---------------------------------------------------------------------------
# 2. kill -9 of C's dlaunch in the middle of a run.
HB=2
cat >"$TMP/sleeper.sh" <<EOF
#!/bin/sh
echo "started rank \$RANK"
exec "$TMP/bin/sleep" 60
EOF
chmod +x "$TMP/sleeper.sh"
port=$(free_port)
endpoint=$ADDR_A:$port
common=(--nnodes 3 --nproc-per-node 2 --rdzv-endpoint "$endpoint" --rdzv-id "netns-kill-$$"
  --rdzv-conf "heartbeat_timeout=$HB")
start_dl_wrapped killA 60 "ip netns exec $NS_A" "${common[@]}" -- "$TMP/sleeper.sh"
start_dl_wrapped killB 60 "ip netns exec $NS_B" "${common[@]}" -- "$TMP/sleeper.sh"
start_dl_wrapped killC 60 "ip netns exec $NS_C" "${common[@]}" -- "$TMP/sleeper.sh"
six_started() { [[ $(cat "$TMP"/kill{A,B,C}.out 2>/dev/null | grep -c 'started rank') == 6 ]]; }
wait_for 30 six_started || { show_nodes killA killB killC; fail "the 6 workers of the second job did not start within 30s"; }
sleep 0.5
victim=$(dl_pid killC)
[[ -n $victim ]] || fail "cannot find C's dlaunch"
t_kill=$EPOCHREALTIME
kill -KILL "$victim"
wait_dl killA
rcA=$RC
wait_dl killB
rcB=$RC
took=$(since "$t_kill")
wait_dl killC
log "kill -9 of C's dlaunch: A exited $rcA, B exited $rcB, the later of the two ${took}s after the kill"
[[ $rcA != 0 && $rcB != 0 && $rcA != 124 && $rcB != 124 && $rcA != 137 && $rcB != 137 ]] ||
  { show_nodes killA killB killC; fail "after C's agent died, A and B should exit non-zero on their own; got A=$rcA B=$rcB"; }
assert_file_matches "$TMP/killA.err" '^dlaunch: job: .*(lost|closed|vanished|missing)' "A's job-wide root cause names the lost node"
assert_no_workers "after the kill -9 of C"

# ---------------------------------------------------------------------------
# 3. C silently cut off (link down): only missed heartbeats reveal it.
port=$(free_port)
endpoint=$ADDR_A:$port
common=(--nnodes 3 --nproc-per-node 2 --rdzv-endpoint "$endpoint" --rdzv-id "netns-cut-$$"
  --rdzv-conf "heartbeat_timeout=$HB")
start_dl_wrapped cutA 60 "ip netns exec $NS_A" "${common[@]}" -- "$TMP/sleeper.sh"
start_dl_wrapped cutB 60 "ip netns exec $NS_B" "${common[@]}" -- "$TMP/sleeper.sh"
start_dl_wrapped cutC 60 "ip netns exec $NS_C" "${common[@]}" -- "$TMP/sleeper.sh"
six_started() { [[ $(cat "$TMP"/cut{A,B,C}.out 2>/dev/null | grep -c 'started rank') == 6 ]]; }
wait_for 30 six_started || { show_nodes cutA cutB cutC; fail "the 6 workers of the third job did not start within 30s"; }
sleep 0.5
t_cut=$EPOCHREALTIME
ip -n "$NS_C" link set eth0 down || fail "cannot set C's link down"
wait_dl cutA
rcA=$RC
wait_dl cutB
rcB=$RC
tookAB=$(since "$t_cut")
wait_dl cutC
rcC=$RC
tookC=$(since "$t_cut")
log "C cut off: A exited $rcA, B $rcB within ${tookAB}s; C exited $rcC ${tookC}s after the cut"
[[ $rcA != 0 && $rcB != 0 && $rcC != 0 && $rcA != 124 && $rcB != 124 && $rcC != 124 && $rcC != 137 ]] ||
  { show_nodes cutA cutB cutC; fail "after C was cut off, all three should exit non-zero on their own; got A=$rcA B=$rcB C=$rcC"; }
assert_file_matches "$TMP/cutC.err" "$endpoint.*(lost|coordinator|heard)" "C names the lost coordinator"
assert_no_workers "after C was cut off"

wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
