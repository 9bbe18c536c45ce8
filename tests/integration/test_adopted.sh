#!/usr/bin/env bash
# A worker starts a daemon the classic way (fork, setsid, fork again, the middle
# process exits): it leaves the worker's process group and session and is
# reparented to dlaunch, its subreaper. It must not outlive dlaunch: not after a
# normal exit, not after another rank's failure tears the job down, and not
# after a SIGKILL of dlaunch (the watchdog kills it), even one that comes right
# after the daemon was adopted (issue 18), also when dlaunch runs as nobody.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
command -v setsid >/dev/null || skip "'setsid' is not installed"

# Rank 0 starts the daemon and writes its pid to $TMP/daemon.pid. Then, by $MODE:
# exit: every rank exits 0; fail: rank 1 exits 3 once the daemon is up, rank 0
# sleeps; hold: both sleep.
cat >"$TMP/worker.sh" <<EOF2
if [ "\$RANK" = 0 ]; then
  setsid sh -c '"\$1" 300 </dev/null >/dev/null 2>&1 & echo \$! >"\$2.tmp"; mv "\$2.tmp" "\$2"' \
    sh "$TMP/bin/sleep" "$TMP/daemon.pid" </dev/null >/dev/null 2>&1 &
fi
i=0
while [ ! -s "$TMP/daemon.pid" ] && [ \$i -lt 200 ]; do "$TMP/bin/sleep" 0.05; i=\$((i + 1)); done
case "\$MODE.\$RANK" in
  exit.*) exit 0 ;;
  fail.1) exit 3 ;;
esac
exec "$TMP/bin/sleep" 300
EOF2

# alive PID: the process exists and is not a zombie.
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [[ -n $state && $state != Z ]]
}
daemon_gone() { ! alive "$DAEMON"; }

# check_gone WHAT: the daemon and everything else from this test end within 3s.
check_gone() {
  local what=$1
  DAEMON=$(cat "$TMP/daemon.pid" 2>/dev/null)
  [[ -n $DAEMON ]] || fail_run "$what: the worker did not start its daemon"
  wait_for 3 daemon_gone || {
    describe_pids "$DAEMON" >&2
    fail "$what: the setsid daemon (pid $DAEMON) is still alive 3s after dlaunch ended"
  }
  wait_for 3 no_marked_processes
  assert_no_leftovers "$what"
}

export MODE=exit
rm -f "$TMP/daemon.pid"
run_dl 60 --nproc-per-node 2 -- bash "$TMP/worker.sh"
expect_rc 0 "a job whose worker left a daemon"
check_gone "after a normal exit"

export MODE=fail
rm -f "$TMP/daemon.pid"
run_dl 60 --nproc-per-node 2 -- bash "$TMP/worker.sh"
expect_rc 3 "rank 1 failing while rank 0's daemon runs"
check_gone "after rank 1 failed and the job was torn down"

# kill_at_once WHAT WRAPPER: starts a job whose rank 0 leaves a daemon and
# SIGKILLs dlaunch as soon as the daemon is adopted, long before dlaunch's first
# scan (2 s after the workers start, launcher/process/adopted.hpp) registers it
# with the watchdog: the watchdog finds it by the job mark in its environment
# (launcher/watchdog/job_mark.hpp). WRAPPER runs dlaunch as another user.
kill_at_once() {
  local what=$1 wrapper=$2
  export MODE=hold
  rm -f "$TMP/daemon.pid"
  start_dl_wrapped hold 60 "$wrapper" --nproc-per-node 2 -- bash "$TMP/worker.sh"
  wait_for 20 test -s "$TMP/daemon.pid" || { wait_dl hold; fail_run "$what: the worker did not start its daemon within 20s"; }
  DAEMON=$(cat "$TMP/daemon.pid")
  DLPID=$(dl_pid hold) || fail "$what: cannot find the dlaunch process"
  # shellcheck disable=SC2317  # called through wait_for
  adopted() { [[ $(awk '{print $4}' "/proc/$DAEMON/stat" 2>/dev/null) == "$DLPID" ]]; }
  wait_for 5 adopted || { describe_pids "$DAEMON" >&2; fail "$what: the daemon (pid $DAEMON) was not reparented to dlaunch (pid $DLPID)"; }
  kill -KILL "$DLPID"
  wait_dl hold 2>/dev/null  # bash reports the SIGKILL
  check_gone "$what"
}

kill_at_once "after a SIGKILL of dlaunch right after the daemon was adopted" ""

# The same as another user, who can read only its own processes' environments.
if [[ $(id -u) == 0 ]] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
  chmod 0733 "$TMP"  # nobody's worker writes daemon.pid here
  kill_at_once "as nobody, after a SIGKILL of dlaunch right after the daemon was adopted" \
    "setpriv --reuid=nobody --regid=$(id -gn nobody) --clear-groups"
else
  log "not root, or no 'nobody' or setpriv: another user is not tried"
fi

pass
