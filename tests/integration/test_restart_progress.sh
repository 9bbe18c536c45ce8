#!/usr/bin/env bash
# Restarts that make no progress stop with 123 (--max-no-progress-restarts),
# restarts that do go on to --max-restarts with the worker's code, and
# --restart-backoff waits between them, a SIGTERM in the wait ending dlaunch at
# once; a worker's own 124 is reported as 1. Real processes on one node; the
# workers write DLAUNCH_PROGRESS_FILE with the one line the docs give, under
# the python3 first on PATH and under Debian's /usr/bin/python3.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

PATH_PY=$(command -v python3) || skip "no python3 on PATH"
pythons=("$PATH_PY")
[[ $PATH_PY -ef $PY ]] || pythons+=("$PY")

# Crashes at step 0 every time: one line per run in runs.N, and junk in its
# progress file, which dlaunch must ignore with a warning.
cat >"$TMP/crash.py" <<'EOF2'
import os, sys
with open(sys.argv[1], "a") as f:
    f.write("run %s\n" % os.environ["TORCHELASTIC_RESTART_COUNT"])
open(os.environ["DLAUNCH_PROGRESS_FILE"], "w").write("step zero")
sys.exit(1)
EOF2

# Rank 0 gets further each run (step 10, 20, ...), then crashes with 7; rank 1
# writes nothing and runs until it is stopped.
cat >"$TMP/grow.py" <<'EOF2'
import os, sys, time
if os.environ["RANK"] != "0":
    time.sleep(60)
step = 10 * (int(os.environ["TORCHELASTIC_RESTART_COUNT"]) + 1)
with open(sys.argv[1], "a") as f:
    f.write("rank 0 step %d\n" % step)
open(os.environ["DLAUNCH_PROGRESS_FILE"], "w").write(str(step))
sys.exit(7)
EOF2

# (a) A crash at step 0 with K = 2 runs exactly 3 times, then 123 and one line why.
for py in "${pythons[@]}"; do
  runs=$TMP/runs.crash.$RANDOM
  run_dl 60 --max-restarts 10 --max-no-progress-restarts 2 -- "$py" "$TMP/crash.py" "$runs"
  expect_rc 123 "a crash at step 0 under $py"
  assert_eq "$(cat "$runs")" $'run 0\nrun 1\nrun 2' "the runs of a crash at step 0 under $py"
  why=$(grep -c '^dlaunch: not restarting: 2 restarts in a row made no progress .*; exit code 123 (do not requeue)$' "$ERR")
  [[ $why == 1 ]] || fail_run "expected one line saying why dlaunch stopped, got $why"
  # The junk is named once per run, quoted.
  junk=$(grep -c "^dlaunch: progress file .*/progress-[0-2]-0: ignored 'step zero' (expected a step number" "$ERR")
  [[ $junk == 3 ]] || fail_run "expected one warning about the junk per run (3), got $junk"
done

# (b) Progress each run: restarts go on to --max-restarts, the worker's code stands.
for py in "${pythons[@]}"; do
  runs=$TMP/runs.grow.$RANDOM
  run_dl 60 --nproc-per-node 2 --max-restarts 3 --max-no-progress-restarts 1 -- "$py" "$TMP/grow.py" "$runs"
  expect_rc 7 "a job that gets further each run under $py"
  assert_eq "$(grep -c '^rank 0 ' "$runs")" 4 "the runs of rank 0 under $py (the first and 3 restarts)"
  assert_file_matches "$runs" '^rank 0 step 40$' "the last run under $py"
  if grep -q 'not restarting' "$ERR"; then fail_run "a job making progress was stopped for want of it"; fi
  if grep -q 'progress file' "$ERR"; then fail_run "a step number drew a warning"; fi
done

# (c) --restart-backoff 1:2: a wait of 1 s, then 2 s, said each time.
runs=$TMP/runs.backoff
run_dl 60 --max-restarts 2 --restart-backoff 1:2 -- "$PATH_PY" "$TMP/crash.py" "$runs"
expect_rc 1 "a crashing job with backoff and no --max-no-progress-restarts"
assert_eq "$(wc -l <"$runs")" 3 "the runs with backoff"
assert_file_matches "$ERR" '^dlaunch: restarting in 1s \(backoff\)$' "the first backoff"
assert_file_matches "$ERR" '^dlaunch: restarting in 2s \(backoff\)$' "the second backoff, doubled"

# A SIGTERM during a wait of 30 s ends dlaunch at once, no worker left.
runs=$TMP/runs.stop
start_dl waiting 60 --max-restarts 5 --restart-backoff 30:60 -- "$PATH_PY" "$TMP/crash.py" "$runs"
wait_for 20 file_has "$TMP/waiting.err" '^dlaunch: restarting in 30s \(backoff\)$' ||
  { OUT=$TMP/waiting.out ERR=$TMP/waiting.err RC=- ELAPSED=- show_run; fail "no backoff line"; }
dl=$(dl_pid waiting) || fail "dlaunch is not running during its backoff"
kill -TERM "$dl"
# shellcheck disable=SC2317  # called through wait_for
stopped() { ! bg_running waiting; }
wait_for 20 stopped || fail "dlaunch still waits out its 30 s backoff after SIGTERM"
wait_dl waiting
expect_rc 143 "SIGTERM during the backoff"
assert_eq "$(wc -l <"$runs")" 1 "the runs before the SIGTERM"
assert_file_matches "$ERR" '^dlaunch: stopped by SIGTERM; exit code 143$' "the summary"
assert_no_leftovers "after a SIGTERM during the backoff"

# A worker's own 124 is not dlaunch's hang: reported as 1, and said so.
run_dl 30 -- sh -c 'exit 124'
expect_rc 1 "a worker that exits 124"
assert_file_matches "$ERR" "^dlaunch: rank 0 exited with code 124, reported as 1: 124 is dlaunch's code for a hang$" \
  "the summary's note"

pass
