#!/usr/bin/env bash
# Issue 9's fault suite: a hosting dlaunch SIGSTOPped for twice the heartbeat
# timeout mid-job. Three nodes on loopback (node 0 hosts the coordinator),
# heartbeat_timeout=3, one sleeping worker per node. Once every worker runs,
# node 0's dlaunch is stopped (its worker keeps running: only dlaunch stops).
#   - nodes 1 and 2 give up on their own (their workers sleep 60 s, past the
#     runs' 30 s guard): a non-zero exit of their own and a line naming the
#     endpoint and the lost coordinator; their workers are gone;
#   a. then node 0 is resumed (SIGCONT) after 2 x heartbeat_timeout: it ends
#      with a non-zero exit of its own, and nothing of the job is left running;
#   b. the same job again, but node 0 is SIGKILLed while stopped: its worker
#      must not survive it (the watchdog tears it down) within 5 s.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN

HB=3
cat >"$TMP/sleeper.sh" <<EOF
#!/bin/sh
echo "started rank \$RANK"
exec "$TMP/bin/sleep" 60
EOF
chmod +x "$TMP/sleeper.sh"

# worker_of NAME: pids of the sleeping workers under the background run NAME.
workers_of() {
  local dl
  dl=$(dl_pid "$1") || return 0
  pgrep -f -- "$MARK/bin/sleep" | while read -r pid; do
    # the worker is a child (or grandchild through sh) of that dlaunch
    local p=$pid
    for _ in 1 2 3; do
      p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) || break
      [[ $p == "$dl" ]] && { echo "$pid"; break; }
    done
  done
}

# run_case LETTER ACTION: ACTION is "cont" or "kill", what happens to the stopped host.
run_case() {
  local c=$1 action=$2
  local port endpoint
  port=$(free_port)
  endpoint=127.0.0.1:$port
  local common=(--nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$endpoint" --rdzv-id "stopped-$c-$$")
  start_dl "${c}0" 30 "${common[@]}" --node-rank 0 --rdzv-conf "heartbeat_timeout=$HB,is_host=1" -- "$TMP/sleeper.sh"
  wait_for 10 port_listening "$port" || { show_nodes "${c}0"; fail "case $c: node 0 did not listen on $endpoint within 10s"; }
  start_dl "${c}1" 30 "${common[@]}" --rdzv-conf "heartbeat_timeout=$HB,is_host=0" -- "$TMP/sleeper.sh"
  start_dl "${c}2" 30 "${common[@]}" --rdzv-conf "heartbeat_timeout=$HB,is_host=0" -- "$TMP/sleeper.sh"
  three_started() { [[ $(cat "$TMP/${c}0.out" "$TMP/${c}1.out" "$TMP/${c}2.out" 2>/dev/null | grep -c 'started rank') == 3 ]]; }
  wait_for 20 three_started || { show_nodes "${c}0" "${c}1" "${c}2"; fail "case $c: the 3 workers did not start within 20s"; }
  sleep 0.5
  local host_pid host_worker
  host_pid=$(dl_pid "${c}0") || fail "case $c: cannot find node 0's dlaunch"
  host_worker=$(workers_of "${c}0")
  [[ -n $host_worker ]] || fail "case $c: cannot find node 0's worker"
  kill -STOP "$host_pid" || fail "case $c: cannot SIGSTOP node 0's dlaunch"
  local t_stop=$EPOCHREALTIME
  log "case $c: node 0's dlaunch ($host_pid) stopped; its worker is $host_worker"

  local n rcs=""
  for n in "${c}1" "${c}2"; do
    wait_dl "$n"
    local took
    took=$(since "$t_stop")
    rcs+=" $n=$RC(${took}s after the stop)"
    exited_badly "$RC" || { kill -CONT "$host_pid"; show_nodes "$n"; fail "case $c: with the host stopped, $n should give up with a non-zero exit of its own, got $RC (${took}s after the stop)"; }
    assert_file_matches "$TMP/$n.err" "^dlaunch: .*$endpoint.*(lost|coordinator)" "case $c: $n names the lost coordinator at $endpoint"
  done
  log "case $c: the others:$rcs"
  log "case $c: ${c}1 said: $(grep -m1 -E 'lost|coordinator' "$TMP/${c}1.err")"
  # Only node 0's worker may still run (its dlaunch is stopped).
  only_host_worker() { [[ $(pgrep -f -- "$MARK/bin/sleep" | grep -vcx "$host_worker") == 0 ]]; }
  wait_for 2 only_host_worker || {
    describe_pids $(pgrep -f -- "$MARK/bin/sleep") >&2
    kill -CONT "$host_pid"
    fail "case $c: the workers of nodes 1 and 2 survived their agents"
  }

  # Twice the heartbeat timeout in all, then resume or kill the host.
  local rest
  rest=$(awk -v t="$(since "$t_stop")" -v h=$HB 'BEGIN{r = 2*h - t; print (r > 0 ? r : 0)}')
  sleep "$rest"
  local t_act=$EPOCHREALTIME
  if [[ $action == cont ]]; then
    kill -CONT "$host_pid"
    wait_dl "${c}0"
    local took
    took=$(since "$t_act")
    log "case $c: node 0 resumed after $(awk -v a="$t_stop" -v b="$t_act" 'BEGIN{printf "%.1f", b-a}')s stopped; exited $RC ${took}s later"
    exited_badly "$RC" || { show_nodes "${c}0"; fail "case $c: the resumed host, whose nodes are gone, should exit non-zero on its own, got $RC"; }
  else
    kill -KILL "$host_pid"
    wait_dl "${c}0"
    log "case $c: node 0 SIGKILLed while stopped (exit $RC)"
  fi
  wait_for 5 no_marked_processes || {
    show_nodes "${c}0"
    assert_no_leftovers "case $c: 5s after node 0 was $([[ $action == cont ]] && echo resumed || echo SIGKILLed)"
  }
}

run_case a cont
run_case b kill
assert_no_leftovers "at the end"
pass
