#!/usr/bin/env bash
# A rank that is still exiting when a hang is suspected (it printed its last
# line; libtorch's static destructors, gloo's threads, a slow machine): by then
# Python has put the stack signal's default action back, which kills the
# process. The hook ignores the signal from the moment the interpreter starts to
# finalize: the rank is reported, not killed. Here the rank waits in a C exit
# handler (pause(), after Python's own finalization) for dlaunch's report,
# outlives the signal, and is then stopped by the test.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

cat >"$TMP/exiting.py" <<'PYEOF'
import ctypes, os
libc = ctypes.CDLL(None)
libc.on_exit(libc.pause, None)  # runs in exit(), after Py_Finalize
print(f"pid {os.getpid()} exiting", flush=True)
PYEOF
export TMPDIR=$TMP  # the run directory with the stacks, kept after a hang
start_dl job 60 --hang-timeout 1 -- "$PY" "$TMP/exiting.py"
wait_for 20 file_has "$TMP/job.out" "exiting$" || { show_nodes job; fail "the worker did not start"; }
pid=$(sed -nE 's/^(\[0\]: )?pid ([0-9]+) exiting$/\2/p' "$TMP/job.out")
in_pause() { [[ $(cut -d' ' -f1 "/proc/$pid/syscall" 2>/dev/null) == 34 ]]; }  # x86-64 pause
wait_for 20 in_pause || { show_nodes job; fail "the worker did not reach its atexit pause()"; }
wait_for 20 file_has "$TMP/job.err" "^dlaunch: no rank has made progress for 1s: collecting stacks$" ||
  { show_nodes job; fail "no hang notice while the rank was exiting"; }
# dlaunch signals at once, then waits for a dump that will not come.
summary_or_end() { file_has "$TMP/job.err" "^dlaunch: hang: " || ! bg_running job; }
wait_for 20 summary_or_end
kill -0 "$pid" 2>/dev/null || { show_nodes job; fail "the exiting rank died of the stack signal"; }
assert_file_matches "$TMP/job.err" "^dlaunch: hang: rank 0 \(pid $pid\): not sampled" "the summary names the exiting rank"
kill -TERM "$pid"
wait_dl job
expect_rc 143 "the rank stopped by the test's SIGTERM"
assert_file_matches "$ERR" "^dlaunch: root cause: rank 0 \(local_rank 0, pid $pid\) was killed by SIGTERM" "the root cause"
wait_for 10 no_marked_processes
assert_no_leftovers "at the end"
pass
