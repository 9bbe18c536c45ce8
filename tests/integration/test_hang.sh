#!/usr/bin/env bash
# ctest: LABELS=slow PROCESSORS=2 TIMEOUT=600
# --hang-timeout: a job whose ranks all stop writing gets every rank's stack,
# grouped, with the odd rank out named, without changing the script.
#   1. real DDP over gloo, 4 ranks, rank 2 sleeping in load_batch() before its
#      all_reduce, --hang-action stop: exit 124, the summary names rank 2 in
#      load_batch (file:line) and the others in all_reduce; `-- python script`
#      and the torchrun form (a script, PYTHON_EXEC);
#   2. --hang-action report: one report, then rank 2 wakes, the job ends 0, and
#      the script saw the same sys.argv, __main__ and sys.path[0] as without the hook;
#   3. a native worker (`sleep`) gets a gdb stack;
#   4. a shell worker is never sent the real-time signal (it would die of it);
#   5. ranks waiting inside torch's TCPStore are sampled and live on (the
#      signal never runs in the script's threads: EINTR kills TCPStore).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
export TMPDIR=$TMP  # run directories kept for their stacks (hang reports) go with the test
require_torch
command -v gdb >/dev/null || fail "gdb is missing (scripts/install-deps.sh installs it)"

cp "$SRC/tests/integration/tools/hang_ddp.py" "$TMP/hang_ddp.py"
line=$(grep -n LOAD_BATCH_LINE "$TMP/hang_ddp.py" | cut -d: -f1)

# The run directory a hang kept (it holds the stacks), from the last run's stderr.
# What dlaunch reads back (the hook's dumps, error files) does not stay beside
# them: the kept directory holds stacks-N.txt and logs (attempt_N) only.
drop_stacks_dir() {
  local file left
  file=$(sed -nE 's/^dlaunch: hang: full stacks in (.*)$/\1/p' "$ERR" | head -n 1)
  [[ -n $file && $file == */stacks-1.txt ]] || return 0
  left=$(find "$(dirname "$file")" -mindepth 1 -maxdepth 1 ! -name 'stacks-*.txt' ! -name 'attempt_*' -printf '%f ')
  [[ -z $left ]] || fail_run "the kept directory $(dirname "$file") still holds dlaunch's own files: $left"
  rm -rf "$(dirname "$file")"
}

# check_stop WHAT: the last run stopped on the hang, with the summary, after
# every rank reached its step. (How soon after the last line: the hang watch's
# unit tests, under a fake clock.)
check_stop() {
  local quiet_from
  # Ended by dlaunch, not by run_dl's guard (also 124: expect_rc tells them
  # apart); 4 ranks importing torch at load 10 take a minute.
  expect_rc 124 "$1"
  quiet_from=$(sed -nE 's/^\[[0-9]\]: rank [0-9] quiet from ([0-9.]+)$/\1/p' "$OUT" | sort -n | tail -n 1)
  [[ -n $quiet_from ]] || fail_run "$1: the ranks never reached their step"
  assert_file_matches "$ERR" "^dlaunch: no rank has made progress for 5s: collecting stacks$" "$1: the notice"
  assert_file_matches "$ERR" \
    "^dlaunch: hang: ranks 0-1,3 \(3\) wait in all_reduce \(distributed_c10d.py:[0-9]+\) <- step \(hang_ddp.py:[0-9]+\)" \
    "$1: ranks 0, 1, 3 in all_reduce"
  assert_file_matches "$ERR" \
    "^dlaunch: hang: rank 2 \(1\) is elsewhere: load_batch \(hang_ddp.py:$line\) <- step .*<- odd one out$" \
    "$1: rank 2 in load_batch, the odd one out"
  assert_file_matches "$ERR" "^dlaunch: root cause: no rank made progress for 5s \(--hang-action stop\)$" "$1: the root cause"
  local file
  file=$(sed -nE 's/^dlaunch: hang: full stacks in (.*)$/\1/p' "$ERR" | head -n 1)
  [[ -f $file ]] || fail_run "$1: no stacks file ('$file')"
  [[ $(grep -c '^=== rank' "$file") == 4 ]] || fail_run "$1: expected 4 ranks in $file"
  drop_stacks_dir
  wait_for 10 no_marked_processes
  assert_no_leftovers "$1"
}

# 1. Stop.
run_dl 180 --nproc-per-node 4 --hang-timeout 5 --hang-action stop -- "$PY" "$TMP/hang_ddp.py" a b
check_stop "-- python script"
PYTHON_EXEC=$PY run_dl 180 --nproc-per-node 4 --hang-timeout 5 --hang-action stop "$TMP/hang_ddp.py" a b
check_stop "the torchrun form"

# 2. Report, then the job resumes.
SLEEP_S=12 run_dl 120 --nproc-per-node 4 --hang-timeout 5 -- "$PY" "$TMP/hang_ddp.py" a b
expect_rc 0 "--hang-action report: the job resumes"
[[ $(grep -c "no rank has made progress" "$ERR") == 1 ]] || fail_run "expected one hang report"
assert_file_matches "$ERR" "rank 2 \(1\) is elsewhere: load_batch \(hang_ddp.py:$line\)" "report: rank 2 named"
for r in 0 1 2 3; do assert_file_matches "$OUT" "^\[$r\]: rank $r done \[4.0, 4.0, 4.0, 4.0\]$" "rank $r finished"; done
drop_stacks_dir
grep -h " sees " "$OUT" | sed 's/^\[[0-9]\]: rank [0-9] //' | sort -u >"$TMP/with_hook"
SLEEP_S=0 run_dl 120 --nproc-per-node 4 --no-python-hook -- "$PY" "$TMP/hang_ddp.py" a b
expect_rc 0 "--no-python-hook"
grep -h " sees " "$OUT" | sed 's/^\[[0-9]\]: rank [0-9] //' | sort -u >"$TMP/without_hook"
[[ $(wc -l <"$TMP/with_hook") == 1 ]] && cmp -s "$TMP/with_hook" "$TMP/without_hook" ||
  fail "the script saw '$(cat "$TMP/with_hook")' with the hook, '$(cat "$TMP/without_hook")' without"
wait_for 10 no_marked_processes
assert_no_leftovers "after the report"

# 3. A native worker: gdb.
run_dl 60 --nproc-per-node 2 --hang-timeout 1 --hang-action stop -- "$TMP/bin/sleep" 30
expect_rc 124 "sleep under --hang-action stop"
assert_file_matches "$ERR" "^dlaunch: hang: ranks 0-1 \(2\) wait in .*nanosleep" "gdb's stack of sleep"
drop_stacks_dir

# 4. A shell and its child: the child is read with gdb, the shell is never
# signalled (a real-time signal would kill it: exit 128+N).
# The child sleeps until the report is out: a fixed 4 s lost the race to gdb
# on a loaded machine. A watcher ends it once the line is there (bounded).
next_err=$TMP/run$((RUN_SEQ + 1)).err
(for _ in $(seq 500); do
  grep -q '^dlaunch: hang: ' "$next_err" 2>/dev/null && break
  sleep 0.1
done
pkill -f "^$TMP/bin/sleep 50$") &
run_dl 60 --hang-timeout 1 -- /bin/sh -c "\"$TMP/bin/sleep\" 50; echo survived"
wait $!
expect_rc 0 "a shell worker after a hang report"
assert_file_matches "$OUT" "^survived$" "the shell lived on"
assert_file_matches "$ERR" "^dlaunch: hang: rank 0 \(1\) wait in " "the shell's child's stack"
drop_stacks_dir
wait_for 10 no_marked_processes
assert_no_leftovers "after the shell"

# 5. Ranks inside torch's TCPStore (rank 0, its server, comes late) are sampled
# while they wait: C++ under Python there turns EINTR into "Interrupted system
# call", so the signal must never run in their threads (the hook's own thread
# takes it). Every rank then finishes.
cat >"$TMP/late_store.py" <<'PYEOF'
import os, select, time
# Lines from a child process while torch loads (seconds on a loaded machine), so
# that the ranks are sampled in TCPStore, not in the middle of an import.
r, w = os.pipe()
if os.fork() == 0:
    os.close(w)
    while not select.select([r], [], [], 0.5)[0]:
        print("loading torch", flush=True)
    os._exit(0)
os.close(r)
import torch
import torch.distributed as dist
os.close(w)
os.wait()

if os.environ["RANK"] == "0":
    print("rank 0 comes late", flush=True)
    time.sleep(float(os.environ.get("LATE_S", "7")))
dist.init_process_group("gloo")
t = torch.ones(2)
dist.all_reduce(t)
print(f"rank {dist.get_rank()} done {t.tolist()}", flush=True)
dist.destroy_process_group()  # as hang_ddp.py: a gloo group left to exit can abort
PYEOF
run_dl 120 --nproc-per-node 3 --hang-timeout 2 -- "$PY" "$TMP/late_store.py"
expect_rc 0 "ranks waiting in TCPStore, sampled"
assert_file_matches "$ERR" "^dlaunch: hang: ranks? .* (wait in|is elsewhere:|are elsewhere:) .*(_create_c10d_store|TCPStore|__init__)" \
  "TCPStore: the waiting ranks' stacks"
if grep -q "Interrupted system call" "$OUT" "$ERR"; then fail_run "a rank died of the stack signal (EINTR)"; fi
for r in 0 1 2; do assert_file_matches "$OUT" "^\[$r\]: rank $r done \[3.0, 3.0\]$" "TCPStore: rank $r finished"; done
drop_stacks_dir
wait_for 10 no_marked_processes
assert_no_leftovers "at the end"
pass
