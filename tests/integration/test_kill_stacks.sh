#!/usr/bin/env bash
# After a failure, workers that ignore SIGTERM for the whole shutdown timeout
# (stuck in a collective the failed rank never joined) are sampled before their
# SIGKILL, and where they were is printed under the root cause (issue 11):
#   1. Python workers: rank 1 exits 3, ranks 0 and 2 ignore SIGTERM inside
#      stuck_in_collective(): exit 3, the root cause, then "at SIGKILL: ranks
#      0,2 (2) wait in stuck_in_collective (FILE:LINE)" and the stacks file,
#      nothing left running (workers that were never killed run into the
#      runs' 40 s guard);
#   2. a native worker that ignores SIGTERM is read with gdb;
#   3. --hang-timeout 0 turns stack taking off: the SIGKILL comes at the
#      shutdown timeout and no stacks are taken;
#   4. a user's SIGTERM to dlaunch never samples, even when workers ignore it.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
export TMPDIR=$TMP  # run directories kept for their stacks (hang reports) go with the test
require_python
command -v gdb >/dev/null || fail "gdb is missing (scripts/install-deps.sh installs it)"

cat >"$TMP/stuck.py" <<'PYEOF'
import os, signal, sys, time


def stuck_in_collective():
    while True:
        time.sleep(0.2)  # STUCK_LINE


rank = int(os.environ["RANK"])
if rank == 1:
    time.sleep(0.5)
    print("rank 1 fails", flush=True)
    sys.exit(3)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(f"rank {rank} waits", flush=True)
stuck_in_collective()
PYEOF
line=$(grep -n STUCK_LINE "$TMP/stuck.py" | cut -d: -f1)

# The run directory kept for the stacks file, from the last run's stderr.
drop_stacks_dir() {
  local file
  file=$(sed -nE 's/^dlaunch: at SIGKILL: full stacks in (.*)$/\1/p' "$ERR" | head -n 1)
  [[ -n $file && $file == */stacks-1.txt ]] && rm -rf "$(dirname "$file")"
  return 0
}

# 1. Python: the stuck ranks' stacks under the root cause.
run_dl 40 --nproc-per-node 3 --shutdown-timeout 1 -- "$PY" "$TMP/stuck.py"
expect_rc 3 "python: the failing rank's code"
assert_file_matches "$ERR" "^dlaunch: root cause: rank 1 \(local_rank 1, pid [0-9]+\) exited with code 3" "python: root cause"
assert_file_matches "$ERR" "^dlaunch: ranks 0,2 still running 1s after SIGTERM: taking stacks before SIGKILL$" "python: the notice"
assert_file_matches "$ERR" \
  "^dlaunch: at SIGKILL: ranks 0,2 \(2\) wait in stuck_in_collective \(stuck\.py:$line\)" "python: where they were"
assert_file_matches "$ERR" "^dlaunch: at SIGKILL: full stacks in .*/stacks-1\.txt$" "python: the stacks file"
stacks=$(sed -nE 's/^dlaunch: at SIGKILL: full stacks in (.*)$/\1/p' "$ERR")
[[ -f $stacks ]] || fail_run "python: $stacks does not exist"
[[ $(grep -c '^=== rank [02] (pid [0-9]*), by python$' "$stacks") == 2 ]] || fail "python: $stacks lacks ranks 0 and 2"
# The summary comes after the root cause, not before it.
cause_at=$(grep -n '^dlaunch: root cause:' "$ERR" | cut -d: -f1)
where_at=$(grep -n '^dlaunch: at SIGKILL: ranks' "$ERR" | cut -d: -f1)
((cause_at < where_at)) || fail_run "python: the stacks summary comes before the root cause"
wait_for 5 no_marked_processes || assert_no_leftovers "python"
drop_stacks_dir

# 2. A native worker that ignores SIGTERM: gdb.
run_dl 40 --nproc-per-node 2 --shutdown-timeout 1 -- sh -c \
  'if [ "$RANK" = 0 ]; then sleep 0.5; exit 5; fi; trap "" TERM; exec "$0" 600' "$TMP/bin/sleep"
expect_rc 5 "native: the failing rank's code"
assert_file_matches "$ERR" "^dlaunch: rank 1 still running 1s after SIGTERM: taking stacks before SIGKILL$" "native: the notice"
assert_file_matches "$ERR" "^dlaunch: at SIGKILL: rank 1 \(1\) wait in .*(nanosleep|sleep)" "native: gdb's frames"
stacks=$(sed -nE 's/^dlaunch: at SIGKILL: full stacks in (.*)$/\1/p' "$ERR")
grep -q '^=== rank 1 (pid [0-9]*), by gdb$' "$stacks" || fail_run "native: $stacks: rank 1 not read by gdb"
wait_for 5 no_marked_processes || assert_no_leftovers "native"
drop_stacks_dir

# 2b. gdb that never answers (a busy machine): the SIGKILL comes at the sampling
# bound (5s), the summary says the rank was not sampled, and that gdb is gone.
mkdir -p "$TMP/slowgdb"
printf '#!/bin/bash\nexec -a slow-gdb-%s "%s" 600\n' "$$" "$TMP/bin/sleep" >"$TMP/slowgdb/gdb"
chmod +x "$TMP/slowgdb/gdb"
PATH="$TMP/slowgdb:$PATH" run_dl 40 --nproc-per-node 2 --shutdown-timeout 1 -- sh -c \
  'if [ "$RANK" = 0 ]; then sleep 0.5; exit 5; fi; trap "" TERM; exec "$0" 600' "$TMP/bin/sleep"
expect_rc 5 "slow gdb: the failing rank's code"
assert_file_matches "$ERR" "^dlaunch: at SIGKILL: rank 1 not sampled: no stacks within 5s$" "slow gdb: the summary"
# shellcheck disable=SC2317  # called through wait_for
slow_gdb_gone() { ! pgrep -f "slow-gdb-$$" >/dev/null; }
wait_for 5 slow_gdb_gone || fail_run "slow gdb: the gdb dlaunch started outlived it: $(pgrep -af "slow-gdb-$$")"
wait_for 5 no_marked_processes || assert_no_leftovers "slow gdb"

# 3. --hang-timeout 0: no stacks, SIGKILL at the shutdown timeout.
run_dl 40 --hang-timeout 0 --nproc-per-node 3 --shutdown-timeout 1 -- "$PY" "$TMP/stuck.py"
expect_rc 3 "hang watch off"
if grep -q 'at SIGKILL\|taking stacks' "$ERR"; then fail_run "hang watch off: stacks were taken"; fi
# A real-process bound: the SIGKILL escalation of real workers that ignore
# SIGTERM, at --shutdown-timeout 1 (the default 30 s would still end before
# the 40 s guard).
in_time "$ELAPSED" 8 || fail_run "hang watch off: took ${ELAPSED}s"
wait_for 5 no_marked_processes || assert_no_leftovers "hang watch off"

# 4. The user's SIGTERM: no sampling, even though the workers ignore it.
cat >"$TMP/ignore.py" <<'PYEOF'
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("up", flush=True)
time.sleep(600)
PYEOF
start_dl term 40 --nproc-per-node 2 --shutdown-timeout 1 -- "$PY" "$TMP/ignore.py"
two_up() { [[ $(grep -c 'up$' "$TMP/term.out" 2>/dev/null) == 2 ]]; }
wait_for 15 two_up || fail "SIGTERM: the workers did not start"
kill -TERM "$(dl_pid term)"
wait_dl term
expect_rc 143 "SIGTERM"
if grep -q 'at SIGKILL\|taking stacks' "$ERR"; then fail_run "SIGTERM: stacks were taken"; fi
wait_for 5 no_marked_processes || assert_no_leftovers "SIGTERM"

pass
