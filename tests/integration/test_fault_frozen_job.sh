#!/usr/bin/env bash
# A job frozen whole is not a job whose nodes went silent. Slurm's `scontrol
# suspend` (and gang scheduling), a cgroup freezer or a paused VM stop every
# process of a job at once and resume them later; the clocks run on meanwhile.
# Two nodes on loopback (node 0 hosts), heartbeat_timeout=2 and a hang watch of
# 5 s that stops the job, one worker each that waits silently for a release
# file. Once both workers run, every process of the job is stopped (SIGSTOP, as
# scontrol suspend does without a freezer) for 6 s, three heartbeat timeouts and
# more than the hang watch, then resumed.
#   a. the host resumed first, the agent 0.5 s later: the host wakes with its
#      agent's last heartbeat 6 s old and nothing unread, the case that used to
#      end the job ("node 1 lost (no heartbeat for 2s)");
#   b. the agent first, the host 0.5 s later: the agent wakes with the
#      coordinator silent for 6 s ("lost the coordinator (nothing heard)");
#   in both the workers are then released and the job ends 0 on both nodes,
#   with no line about a lost node or coordinator, or a hang;
#   c. everything resumed but the agent's dlaunch: a pause does not hide a real
#      silence. The host still loses the agent, and says so;
#   d. a hang watch of 5 s that stops the job, over ranks silent for about a
#      second when the job is stopped for 7 s: one node alone, and a 2-node job
#      (the coordinator's watch, fed by the heartbeats' silence). They run to
#      their end: the ranks could not write while stopped (before, the watches
#      fired at the resume: "no rank made progress for 8s").
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN

HB=2
HANG=5
FROZEN=6
# waiter.sh [TICKS]: a line, TICKS lines a second apart, then a silent wait for
# the release file (at most 60 s).
cat >"$TMP/waiter.sh" <<EOF
#!/bin/sh
echo "started rank \$RANK"
for i in \$(seq \${1:-0}); do echo "tick \$i"; "$TMP/bin/sleep" 1; done
echo "waiting rank \$RANK"
i=0
while [ ! -e "$TMP/release" ] && [ \$i -lt 600 ]; do "$TMP/bin/sleep" 0.1; i=\$((i + 1)); done
echo "released rank \$RANK"
EOF
chmod +x "$TMP/waiter.sh"

# freeze: stops every process of this test's job (dlaunch, watchdogs, workers,
# the `timeout`s around them), as a suspend does.
freeze() {
  # shellcheck disable=SC2046
  kill -STOP $(marked_pids) 2>/dev/null
}
# thaw [PID...]: resumes those, or every stopped process of the test.
thaw() {
  local pids=("$@")
  ((${#pids[@]})) || mapfile -t pids < <(marked_pids)
  kill -CONT "${pids[@]}" 2>/dev/null
}

# start_job C: a 2-node job named C; returns once both workers run.
start_job() {
  local c=$1 port
  port=$(free_port)
  local common=(--nnodes 2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "frozen-$c-$$")
  rm -f "$TMP/release"
  start_dl "${c}0" 60 "${common[@]}" --hang-timeout "$HANG" --hang-action stop \
    --rdzv-conf "heartbeat_timeout=$HB,is_host=1" -- "$TMP/waiter.sh"
  wait_for 10 port_listening "$port" || { show_nodes "${c}0"; fail "case $c: node 0 did not listen within 10s"; }
  start_dl "${c}1" 60 "${common[@]}" --hang-timeout "$HANG" --hang-action stop \
    --rdzv-conf "heartbeat_timeout=$HB,is_host=0" -- "$TMP/waiter.sh"

  both_started() { [[ $(cat "$TMP/${c}0.out" "$TMP/${c}1.out" 2>/dev/null | grep -c 'started rank') == 2 ]]; }
  wait_for 20 both_started || { show_nodes "${c}0" "${c}1"; fail "case $c: the 2 workers did not start within 20s"; }
}

# resumed_job C FIRST SECOND: freezes job C, resumes FIRST's dlaunch, then
# 0.5 s later everything; releases the workers; both nodes must end 0.
resumed_job() {
  local c=$1 first=$2 second=$3 first_pid
  start_job "$c"
  first_pid=$(dl_pid "${c}${first}") || fail "case $c: cannot find node $first's dlaunch"
  freeze
  log "case $c: the job is stopped for ${FROZEN}s (heartbeat_timeout=${HB}s)"
  sleep "$FROZEN"
  thaw "$first_pid"
  sleep 0.5
  thaw
  log "case $c: node $first resumed, node $second 0.5s later"
  # Both must still be running the job: a lost node would end it now.
  sleep 0.5
  touch "$TMP/release"
  local n
  for n in "${c}0" "${c}1"; do
    wait_dl "$n"
    [[ $RC == 0 ]] || { show_nodes "${c}0" "${c}1"; fail "case $c: $n should end 0 after the job resumed, got $RC"; }
    assert_file_matches "$TMP/$n.out" "released rank" "case $c: $n's worker ran to its end"
    if grep -Eq "lost|no heartbeat|nothing heard|progress" "$TMP/$n.err"; then
      show_nodes "$n"
      fail "case $c: $n blamed a peer or its ranks for the job's own pause: $(grep -m1 -E "lost|no heartbeat|nothing heard|progress" "$TMP/$n.err")"
    fi
  done
  wait_for 5 no_marked_processes || assert_no_leftovers "case $c: after the job ended"
}

resumed_job a 0 1
resumed_job b 1 0

# c: the agent's dlaunch stays stopped; everything else resumes.
start_job c
agent=$(dl_pid c1) || fail "case c: cannot find node 1's dlaunch"
freeze
sleep "$FROZEN"
# shellcheck disable=SC2046
thaw $(marked_pids | grep -vx "$agent")
t_thaw=$EPOCHREALTIME
log "case c: everything resumed but node 1's dlaunch ($agent)"
wait_dl c0
took=$(since "$t_thaw")
kill -CONT "$agent"
exited_badly "$RC" || { show_nodes c0; fail "case c: the host should lose the stopped agent and exit non-zero, got $RC"; }
assert_file_matches "$TMP/c0.err" "node 1 .*lost \(no heartbeat for ${HB}s\)" "case c: the host names the silent node"
log "case c: the host lost node 1 ${took}s after it resumed"
wait_dl c1
wait_for 5 no_marked_processes || assert_no_leftovers "case c: after the job ended"

# d: the hang watches, of one node and of a 2-node job. Each rank writes a line a
# second for 8 s, then waits silently for the release: the job is frozen once all
# are waiting. The coordinator counts a silence from no earlier than the
# generation's start, 8 s before the pause: a heartbeat whose silence included
# the pause would read as 8 s of it, past the watch's 5 s.
rm -f "$TMP/release"
start_dl d 60 --nproc-per-node 2 --hang-timeout "$HANG" --hang-action stop -- "$TMP/waiter.sh" 8
port=$(free_port)
common=(--nnodes 2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "frozen-d-$$"
        --hang-timeout "$HANG" --hang-action stop)
start_dl e0 60 "${common[@]}" --rdzv-conf "heartbeat_timeout=$HB,is_host=1" -- "$TMP/waiter.sh" 8
start_dl e1 60 "${common[@]}" --rdzv-conf "heartbeat_timeout=$HB,is_host=0" -- "$TMP/waiter.sh" 8
all_waiting() {
  [[ $(cat "$TMP/d.out" "$TMP/e0.out" "$TMP/e1.out" 2>/dev/null | grep -c "waiting rank") == 4 ]]
}
wait_for 20 all_waiting || { show_nodes d e0 e1; fail "case d: the ranks did not reach their wait within 20s"; }
freeze
sleep $((FROZEN + 1))
thaw
log "case d: one node and a 2-node job stopped for $((FROZEN + 1))s with a hang watch of ${HANG}s"
sleep 1
touch "$TMP/release"
for n in d e0 e1; do
  wait_dl "$n"
  [[ $RC == 0 ]] || { show_nodes "$n"; fail "case d: $n should run to its end after the resume, got $RC"; }
  if grep -q "progress" "$TMP/$n.err"; then
    show_nodes "$n"
    fail "case d: $n's hang watch counted the pause as silence: $(grep -m1 progress "$TMP/$n.err")"
  fi
done
assert_eq "$(cat "$TMP/d.out" "$TMP/e0.out" "$TMP/e1.out" | grep -c "released rank")" 4 "case d: every rank ran to its end"
wait_for 5 no_marked_processes || assert_no_leftovers "case d: after the jobs ended"
pass
