#!/usr/bin/env bash
# A job started with stdin, stdout or stderr closed (as supervisors,
# daemonising wrappers and some CI runners start programs: `dlaunch ... <&-`)
# runs as usual, and dlaunch-watch is a working watchdog or none:
#   1. one node, with each of <&-, >&-, 2>&- and all three: the exit code is
#      the workers' (0 with 2 ranks, 3 with 1), every worker ran to its end (it
#      writes a file there), its output arrived where dlaunch's could go, and
#      nothing is left. Before the fix, <&- gave the watchdog's pipe fd 0,
#      dup2(0, 0) left it close-on-exec, dlaunch-watch read EOF at once and
#      SIGKILLed the workers: exit 137;
#   2. a head launch on this machine (-H localhost:1,127.0.0.1:1, each agent
#      through a local shell) with each closed: the same;
#   3. /dev/null missing (a mount namespace with an empty /dev) and stdin
#      closed: one line `dlaunch: /dev/null: cannot open (...)`, exit 1;
#   4. the job mark is in no process's command line (`ps` shows any user
#      every one): not dlaunch-watch's, whose orders carry it instead;
#   5. a foreign program in dlaunch-watch's place (`exit 0`, beside a copy of
#      dlaunch): dlaunch says so once, naming it, and falls back to a fork of
#      itself; a SIGKILL of dlaunch still takes the worker's child with it.
#      Before, the job ran with no watchdog and that child outlived dlaunch.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"

cat >"$TMP/worker.sh" <<EOF
#!/bin/sh
echo "rank \$RANK started"
"$TMP/bin/sleep" \${WORKER_SLEEP:-1}
echo "rank \$RANK done"
echo "rank \$RANK done on stderr" >&2
: >"$TMP/done.\$CASE.\$RANK"
exit \${WORKER_CODE:-0}
EOF
chmod +x "$TMP/worker.sh"

# run_closed WHICH SECONDS ARGS...: dlaunch ARGS with WHICH (stdin, stdout,
# stderr or all) closed and the others captured; sets RC, OUT, ERR like run_cmd.
run_closed() {
  local which=$1 secs=$2
  shift 2
  RUN_SEQ=$((RUN_SEQ + 1))
  OUT=$TMP/run$RUN_SEQ.out
  ERR=$TMP/run$RUN_SEQ.err
  : >"$OUT"
  : >"$ERR"
  local t0=$EPOCHREALTIME
  case $which in
    stdin) timeout -k 5 "$secs" "$DLAUNCH" "$@" >"$OUT" 2>"$ERR" <&- ;;
    stdout) timeout -k 5 "$secs" "$DLAUNCH" "$@" 2>"$ERR" </dev/null >&- ;;
    stderr) timeout -k 5 "$secs" "$DLAUNCH" "$@" >"$OUT" </dev/null 2>&- ;;
    all) timeout -k 5 "$secs" "$DLAUNCH" "$@" <&- >&- 2>&- ;;
  esac
  RC=$?
  # shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
  ELAPSED=$(since "$t0")
}

# check_run WHAT WANT_RC RANKS WHICH: the run just made (with WHICH closed)
# exited WANT_RC, each of its RANKS workers wrote its file at its end, and their
# output reached dlaunch's stdout or stderr, whichever was open.
check_run() {
  local what=$1 want=$2 ranks=$3 which=$4 rank
  expect_rc "$want" "$what"
  for ((rank = 0; rank < ranks; rank++)); do
    [[ -e $TMP/done.$CASE.$rank ]] || fail_run "$what: rank $rank did not run to its end"
  done
  case $which in
    stdin | stderr) assert_file_matches "$OUT" "rank 0 done$" "$what: the workers' output on stdout" ;;
    stdout) assert_file_matches "$ERR" "rank 0 done on stderr$" "$what: the workers' stderr" ;;
  esac
  wait_for 5 no_marked_processes || assert_no_leftovers "$what"
}

# 1 and 2.
for which in stdin stdout stderr all; do
  export CASE=$which-one WORKER_CODE=0
  run_closed "$which" 60 --nproc-per-node 2 -- "$TMP/worker.sh"
  check_run "dlaunch with $which closed, 2 ranks" 0 2 "$which"
  export CASE=$which-code WORKER_CODE=3
  run_closed "$which" 60 --nproc-per-node 1 -- "$TMP/worker.sh"
  check_run "dlaunch with $which closed, a rank that exits 3" 3 1 "$which"
  export CASE=$which-head WORKER_CODE=0
  run_closed "$which" 90 -H localhost:1,127.0.0.1:1 -- "$TMP/worker.sh"
  check_run "a head launch (-H localhost:1,127.0.0.1:1) with $which closed" 0 2 "$which"
  log "$which closed: one node, its exit code and a head launch as usual"
done
export WORKER_CODE=0

# 3.
if unshare -m true 2>/dev/null; then
  CASE=nodev
  RUN_SEQ=$((RUN_SEQ + 1))
  OUT=$TMP/run$RUN_SEQ.out ERR=$TMP/run$RUN_SEQ.err
  timeout -k 5 30 unshare -m --propagation private sh -c 'mount -t tmpfs none /dev && exec "$@"' sh \
    "$DLAUNCH" --nproc-per-node 1 -- "$TMP/worker.sh" >"$OUT" 2>"$ERR" <&-
  # shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
  RC=$?
  expect_rc 1 "dlaunch with stdin closed and no /dev/null"
  assert_eq "$(cat "$ERR")" "dlaunch: /dev/null: cannot open (No such file or directory)" "its message"
  [[ ! -e $TMP/done.nodev.0 ]] || fail_run "dlaunch with no /dev/null started a worker"
  log "no /dev/null: named, exit 1"
else
  log "unshare -m is not allowed here: the missing /dev/null is not tried"
fi

# 4. A worker that reports its mark and waits.
cat >"$TMP/marked.sh" <<EOF
#!/bin/sh
echo "\$DLAUNCH_JOB_MARK" >"$TMP/mark.tmp" && mv "$TMP/mark.tmp" "$TMP/mark"
exec "$TMP/bin/sleep" 300
EOF
chmod +x "$TMP/marked.sh"
start_dl marked 60 --nproc-per-node 1 -- "$TMP/marked.sh"
wait_for 20 test -s "$TMP/mark" || { show_nodes marked; fail "the worker did not report its job mark within 20s"; }
mark=$(cat "$TMP/mark")
[[ $mark =~ ^[0-9a-f]{32}$ ]] || fail "the worker's DLAUNCH_JOB_MARK is '$mark', expected 32 hex digits"
dl=$(dl_pid marked) || fail "cannot find the marked job's dlaunch"
watch=$(pgrep -P "$dl" -x dlaunch-watch) || fail "dlaunch $dl has no dlaunch-watch child"
[[ $(tr '\0' ' ' <"/proc/$watch/cmdline") != *"$mark"* ]] || fail "dlaunch-watch's command line holds the job mark"
ps -eo pid,args >"$TMP/ps"  # to a file first: a grep running beside ps would show the mark itself
if grep -F -- "$mark" "$TMP/ps" >&2; then
  fail "a command line that ps shows holds the job mark"
fi
kill -TERM "$dl"
wait_dl marked
log "the job mark is in no command line (dlaunch-watch pid $watch)"

# 5. A copy of dlaunch with a foreign program as its dlaunch-watch.
mkdir "$TMP/foreign"
cp "$DLAUNCH" "$TMP/foreign/dlaunch"
printf '#!/bin/sh\nexit 0\n' >"$TMP/foreign/dlaunch-watch"
chmod +x "$TMP/foreign/dlaunch-watch"
# The worker's child: PDEATHSIG takes the worker itself with dlaunch; only a
# watchdog ends what the worker started.
cat >"$TMP/pid.sh" <<EOF
#!/bin/sh
"$TMP/bin/sleep" 300 &
echo \$! >"$TMP/worker.pid.tmp" && mv "$TMP/worker.pid.tmp" "$TMP/worker.pid"
wait
EOF
chmod +x "$TMP/pid.sh"
DLAUNCH=$TMP/foreign/dlaunch start_dl foreign 60 --nproc-per-node 1 -- "$TMP/pid.sh"
wait_for 20 test -s "$TMP/worker.pid" || { show_nodes foreign; fail "the worker under a foreign dlaunch-watch did not start within 20s"; }
worker=$(cat "$TMP/worker.pid")
dl=$(dl_pid foreign) || fail "cannot find the dlaunch beside the foreign dlaunch-watch"
kill -KILL "$dl"
worker_gone() { ! kill -0 "$worker" 2>/dev/null; }
wait_for 10 worker_gone || fail "the worker's child ($worker) outlived a SIGKILLed dlaunch by 10s: the job had no watchdog"
wait_dl foreign
note="dlaunch: $TMP/foreign/dlaunch-watch: ended before it was watching (exit status 0); the watchdog is a fork of dlaunch instead"
assert_eq "$(grep -c 'the watchdog is a fork' "$ERR")" 1 "lines saying the watchdog is a fork"
assert_eq "$(grep 'the watchdog is a fork' "$ERR")" "$note" "the fallback's line"
wait_for 5 no_marked_processes || assert_no_leftovers "the job under a foreign dlaunch-watch"
log "a foreign dlaunch-watch: named once, the fork watched, the worker died with dlaunch"
pass
