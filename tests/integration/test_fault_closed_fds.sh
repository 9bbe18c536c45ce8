#!/usr/bin/env bash
# A job started with stdin, stdout or stderr closed (as supervisors,
# daemonising wrappers and some CI runners start programs: `dlaunch ... <&-`)
# runs as usual:
#   1. one node, with each of <&-, >&-, 2>&- and all three: the exit code is
#      the workers' (0 with 2 ranks, 3 with 1), every worker ran to its end (it
#      writes a file there), its output arrived where dlaunch's could go, and
#      nothing is left. Before the fix, <&- gave the watchdog's pipe fd 0,
#      dup2(0, 0) left it close-on-exec, dlaunch-watch read EOF at once and
#      SIGKILLed the workers: exit 137;
#   2. a head launch on this machine (-H localhost:1,127.0.0.1:1, each agent
#      through a local shell) with each closed: the same;
#   3. /dev/null missing (a mount namespace with an empty /dev) and stdin
#      closed: one line `dlaunch: /dev/null: cannot open (...)`, exit 1.
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
  RC=$?
  expect_rc 1 "dlaunch with stdin closed and no /dev/null"
  assert_eq "$(cat "$ERR")" "dlaunch: /dev/null: cannot open (No such file or directory)" "its message"
  [[ ! -e $TMP/done.nodev.0 ]] || fail_run "dlaunch with no /dev/null started a worker"
  log "no /dev/null: named, exit 1"
else
  log "unshare -m is not allowed here: the missing /dev/null is not tried"
fi

pass
