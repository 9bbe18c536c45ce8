#!/usr/bin/env bash
# Signals to dlaunch itself. SIGTERM/SIGINT: forwarded, workers torn down,
# exit 128+N. SIGKILL: dlaunch's watchdog still kills every worker process
# group, grandchildren included. SIGUSR1 to a head-node launch's head: each
# worker on every node gets it once.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"

# A worker with a grandchild, as data loaders and shell wrappers have.
cat >"$TMP/worker.sh" <<EOF2
echo "\$TORCHELASTIC_ERROR_FILE" >"$TMP/errfile.\$RANK"
"$TMP/bin/sleep" 300 &
wait
EOF2

N=4
# start_job: runs dlaunch in the background; sets TPID (its timeout wrapper)
# and DLPID (dlaunch) once all N grandchildren are up.
start_job() {
  RUN_SEQ=$((RUN_SEQ + 1))
  OUT=$TMP/run$RUN_SEQ.out
  ERR=$TMP/run$RUN_SEQ.err
  RC=""
  ELAPSED=""
  timeout -s KILL 40 "$DLAUNCH" --nproc-per-node "$N" --shutdown-timeout 3 -- bash "$TMP/worker.sh" >"$OUT" 2>"$ERR" </dev/null &
  TPID=$!
  # shellcheck disable=SC2317  # called through wait_for
  grandchildren_up() { [[ $(count_marked "/bin/sleep 300") == "$N" ]]; }
  wait_for 20 grandchildren_up || fail_run "the $N workers and their grandchildren did not start within 20s"
  DLPID=$(pgrep -P "$TPID" | head -n 1)
  [[ -n $DLPID ]] || fail_run "cannot find the dlaunch process under timeout (pid $TPID)"
  [[ $(readlink "/proc/$DLPID/exe") == "$(readlink -f "$DLAUNCH")" ]] ||
    fail "pid $DLPID is not dlaunch: $(readlink "/proc/$DLPID/exe")"
}

# signal_job SIG: sends SIG to dlaunch, waits for it (bounded by timeout -s KILL).
signal_job() {
  local t0=$EPOCHREALTIME
  kill -s "$1" "$DLPID"
  wait "$TPID"
  # shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
  RC=$?
  ELAPSED=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.2f", b-a}')
}

for sig in TERM INT; do
  start_job
  signal_job "$sig"
  code=$((128 + $(kill -l "$sig")))
  expect_rc "$code" "SIG$sig to dlaunch"
  [[ $(awk -v e="$ELAPSED" 'BEGIN{print (e < 10)}') == 1 ]] ||
    fail_run "SIG$sig to dlaunch: it took ${ELAPSED}s to exit"
  # dlaunch has exited: nothing it started may be left, not even briefly.
  wait_for 2 no_marked_processes
  assert_no_leftovers "after SIG$sig to dlaunch"
done

start_job
kill -s KILL "$DLPID"
wait "$TPID" 2>/dev/null
wait_for 2 no_marked_processes
assert_no_leftovers "2s after SIGKILL to dlaunch (its watchdog should kill every worker group)"

# The watchdog also removes the per-job directory, the private directory of
# error files (.../dlaunch-XXXX/error-N-RANK.json) when the job writes no logs,
# once it has killed the workers.
errfile=$(cat "$TMP/errfile.0" 2>/dev/null)
[[ -n $errfile ]] || fail "rank 0 never reported its TORCHELASTIC_ERROR_FILE"
jobdir=$(dirname "$errfile")
[[ $(basename "$jobdir") =~ ^dlaunch-[A-Za-z0-9]+$ ]] || fail "unexpected job directory shape: $jobdir"
# shellcheck disable=SC2317  # called through wait_for
jobdir_gone() { [[ ! -e $jobdir ]]; }
wait_for 2 jobdir_gone || fail "$jobdir is still there 2s after SIGKILL to dlaunch"

# SIGUSR1 to the head of a head-node launch (two agents here, through local
# shells): the head runs no worker, so it passes the signal on to every agent,
# which passes it on to its workers, once each. It used to kill the head.
cp "$SRC/tests/integration/tools/usr1_counter.py" "$TMP/usr1.py"
mkdir -p "$TMP/usr1"
RUN_SEQ=$((RUN_SEQ + 1))
OUT=$TMP/run$RUN_SEQ.out ERR=$TMP/run$RUN_SEQ.err
timeout -k 5 60 "$DLAUNCH" -H localhost:1,127.0.0.1:1 -- "$PY" -u "$TMP/usr1.py" "$TMP/usr1" 30 >"$OUT" 2>"$ERR" </dev/null &
head_pid=$!
# shellcheck disable=SC2317  # called through wait_for
both_ready() { [[ -f $TMP/usr1/ready.0 && -f $TMP/usr1/ready.1 ]]; }
wait_for 30 both_ready || fail_run "head launch: the two workers did not start within 30 s"
kill -USR1 "$(pgrep -P "$head_pid" | head -n 1)"
wait "$head_pid"
# shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
RC=$?
expect_rc 0 "SIGUSR1 to the head"
for r in 0 1; do
  [[ -f $TMP/usr1/count.$r ]] || fail_run "SIGUSR1 to the head: worker $r wrote no count"
  assert_eq "$(cat "$TMP/usr1/count.$r")" 1 "SIGUSR1 to the head: SIGUSR1s worker $r got"
done
assert_file_matches "$ERR" "^dlaunch: SIGUSR1: passed on to every node's workers$" "the head's line"
wait_for 5 no_marked_processes
assert_no_leftovers "after SIGUSR1 to the head"

pass
