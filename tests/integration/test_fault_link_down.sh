#!/usr/bin/env bash
# Issue 9's fault suite: a link taken down mid-job. Three network namespaces
# ("hosts" 1, 2, 3) on a veth bridge (lib.sh's netns_hosts), one dlaunch per
# host, host 1 hosting the coordinator, heartbeat_timeout=3, two sleeping
# workers per host. Once the 6 workers run, `ip link set dev eth0 down` in one
# namespace: nothing closes, only missed heartbeats tell.
#   a. the host's link goes down: hosts 2 and 3 lose the coordinator;
#   b. host 3's link goes down: host 3 loses the coordinator, hosts 1 and 2
#      lose node 3 and abort the job.
# In both, every node ends with a non-zero exit of its own (its workers sleep
# 60 s, past the runs' 30 s guard: a node that misses the loss hangs), the
# nodes that lost the coordinator say so naming the endpoint, and nothing is
# left running in any namespace.
# Needs root and `ip netns`; skipped (77) otherwise.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

netns_hosts "dlcut$$-" 3
HB=3
export DLAUNCH_RDZV_TOKEN=cut-secret-$$-$RANDOM

cat >"$TMP/sleeper.sh" <<EOF
#!/bin/sh
echo "started rank \$RANK"
exec "$TMP/bin/sleep" 60
EOF
chmod +x "$TMP/sleeper.sh"

nothing_in_namespaces() { [[ -z $(ns_marked "${NS_HOSTS[0]}")$(ns_marked "${NS_HOSTS[1]}")$(ns_marked "${NS_HOSTS[2]}") ]]; }

# run_case LETTER CUT: CUT is the host (1..3) whose link goes down.
run_case() {
  local c=$1 cut=$2 i port endpoint
  port=$((20000 + RANDOM % 20000))
  endpoint=$NET.1:$port
  local common=(--nnodes 3 --nproc-per-node 2 --rdzv-endpoint "$endpoint" --rdzv-id "cut-$c-$$"
    --rdzv-conf "heartbeat_timeout=$HB")
  start_dl_wrapped "${c}1" 30 "ip netns exec ${NS_HOSTS[0]}" "${common[@]}" --node-rank 0 -- "$TMP/sleeper.sh"
  start_dl_wrapped "${c}2" 30 "ip netns exec ${NS_HOSTS[1]}" "${common[@]}" -- "$TMP/sleeper.sh"
  start_dl_wrapped "${c}3" 30 "ip netns exec ${NS_HOSTS[2]}" "${common[@]}" -- "$TMP/sleeper.sh"
  six_started() { [[ $(cat "$TMP/${c}1.out" "$TMP/${c}2.out" "$TMP/${c}3.out" 2>/dev/null | grep -c 'started rank') == 6 ]]; }
  wait_for 30 six_started || { show_nodes "${c}1" "${c}2" "${c}3"; fail "case $c: the 6 workers did not start within 30s"; }
  sleep 0.5
  local t_cut=$EPOCHREALTIME
  ip -n "${NS_HOSTS[cut - 1]}" link set dev eth0 down || fail "case $c: cannot set host $cut's eth0 down"
  log "case $c: host $cut's link is down"
  local rcs="" bad=""
  for i in 1 2 3; do
    wait_dl "$c$i"
    local took
    took=$(since "$t_cut")
    rcs+=" host$i=$RC(${took}s)"
    exited_badly "$RC" || bad+=" host $i exited $RC, expected a non-zero exit of its own;"
  done
  log "case $c: after the cut:$rcs"
  [[ -z $bad ]] || { show_nodes "${c}1" "${c}2" "${c}3"; fail "case $c (host $cut's link down, heartbeat_timeout=$HB):$bad"; }
  # The nodes cut off from the coordinator say so.
  local lost
  if [[ $cut == 1 ]]; then lost="2 3"; else lost=$cut; fi
  for i in $lost; do
    assert_file_matches "$TMP/$c$i.err" "^dlaunch: .*$endpoint.*(lost|coordinator)" "case $c: host $i names the lost coordinator at $endpoint"
  done
  wait_for 2 nothing_in_namespaces ||
    fail "case $c: processes left in the namespaces after every node ended:$(ns_leftovers ns_marked "${NS_HOSTS[@]}")"
  ip -n "${NS_HOSTS[cut - 1]}" link set dev eth0 up || fail "case $c: cannot set host $cut's eth0 up again"
}

run_case a 1
run_case b 3
wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
