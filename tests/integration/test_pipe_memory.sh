#!/usr/bin/env bash
# ctest: PROCESSORS=2
# Pipe memory of a user who is not root. Linux charges a pipe's capacity to
# its user, and past fs.pipe-user-pages-soft (16384 pages, 64 MiB) every new
# pipe of that user's, in any program, gets 8 KiB. dlaunch grows a pipe only
# for a busy stream, within a budget per job:
#   1. a quiet job: its worker's stdout pipe keeps Linux's 64 KiB;
#   2. five 8-rank jobs at once (with every pipe grown to 1 MiB, three and a
#      half of them passed the soft limit), each printing fast into a console
#      nobody reads yet, so that every pipe stays open after it was busy:
#      another pipe of the same user's still gets 64 KiB; once the readers
#      come every line arrives, and busy ranks' pipes had grown to 1 MiB;
#   3. the user's allowance spent by another program: Linux refuses to grow
#      the busy pipes, dlaunch says so once, and every line arrives.
# It runs as uid 4242, a user of its own: the kernel counts pipes per user, and
# spending the allowance of a user that other tests share (nobody) would
# starve them.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
[[ $(id -u) == 0 ]] || skip "not root: cannot run as another user"
command -v setpriv >/dev/null || skip "'setpriv' is not installed"
command -v mkfifo >/dev/null || skip "'mkfifo' is not installed"
require_python
[[ $(cat /proc/sys/fs/pipe-user-pages-soft) == 16384 ]] ||
  skip "fs.pipe-user-pages-soft is $(cat /proc/sys/fs/pipe-user-pages-soft), not Linux's 16384: the job counts assume it"

USER_ID=4242
AS_USER=(setpriv "--reuid=$USER_ID" "--regid=$USER_ID" --clear-groups)
as_user() { "${AS_USER[@]}" "$@"; }
user_pids() { pgrep -u "$USER_ID" 2>/dev/null; }
[[ -z $(user_pids) ]] || fail "uid $USER_ID already runs processes ($(user_pids | tr '\n' ' ')): this test needs its pipe allowance"
stop_user() {
  # This test's user: whatever it left, nothing else runs as it.
  local pid
  for pid in $(user_pids); do kill -KILL "$pid" 2>/dev/null; done
}
at_exit stop_user
chmod 711 "$TMP"
U=$TMP/u
mkdir "$U"
chown "$USER_ID:$USER_ID" "$U"
export TMPDIR=$U OMP_NUM_THREADS=1
as_user test -x "$DLAUNCH" || skip "uid $USER_ID cannot run $DLAUNCH (a directory on the way is closed to others)"

# pipe_size: the capacity Linux gives a new pipe of this user's now.
pipe_size() { as_user "$PY" -c 'import fcntl, os; r, w = os.pipe(); print(fcntl.fcntl(r, 1032))'; }
[[ $(pipe_size) == 65536 ]] || fail "uid $USER_ID's pipes are $(pipe_size) bytes before any job: its allowance is in use"

# Prints LINES lines of 100 digits, then the sizes of its stdout and stderr pipes.
cat >"$U/spew.sh" <<EOF
seq -f %0100.0f 1 \$LINES
exec "$PY" -c 'import fcntl; print("pipe", fcntl.fcntl(1, 1032), fcntl.fcntl(2, 1032))'
EOF

# ---------------------------------------------------------------------------
# 1. A quiet job's pipes keep their size.
export LINES=3
run_cmd 30 "${AS_USER[@]}" "$DLAUNCH" --nproc-per-node 1 -- sh "$U/spew.sh"
expect_rc 0 "a quiet job as uid $USER_ID"
assert_eq "$(tail -n 1 "$OUT")" "pipe 65536 65536" "a quiet worker's stdout and stderr pipes"

# ---------------------------------------------------------------------------
# 2. Five busy 8-rank jobs at once, held back by consoles nobody reads yet.
JOBS=5
RANKS=8
export LINES=30000  # 3 MB a rank: more than a job's pipes and console hold
for j in $(seq "$JOBS"); do
  mkfifo "$U/fifo$j"
  chown "$USER_ID" "$U/fifo$j"
  # Held open, not read, by a process of its own: a descriptor of this shell's
  # would be inherited by every job and reader started after it.
  "$TMP/bin/sleep" 600 <>"$U/fifo$j" &
  eval "HOLD$j=$!"
  track_pid "$!"
  as_user "$DLAUNCH" --nproc-per-node "$RANKS" -- sh "$U/spew.sh" >"$U/fifo$j" 2>"$TMP/2.$j.err" </dev/null &
  eval "JOB$j=$!"
  track_pid "$!"
done
# Every rank blocked on its full pipe: each job's pipes are all open and were busy.
# Every rank still writing is blocked on its full pipe (one may have got all of
# its output out before its job's console filled): the jobs' pipes are open
# and were busy.
writers() { pgrep -u "$USER_ID" -x seq | wc -l; }
writing() {
  local pid n=0
  for pid in $(pgrep -u "$USER_ID" -x seq); do grep -q pipe_write "/proc/$pid/wchan" 2>/dev/null && n=$((n + 1)); done
  echo "$n"
}
blocked() {
  local n
  n=$(writers)
  ((n >= JOBS * RANKS / 2 && $(writing) == n))
}
wait_for 120 blocked || fail "the ranks never all blocked ($(writing) of $(writers) writing ranks)"
size=$(pipe_size)
[[ $size == 65536 ]] || fail "with $JOBS busy jobs running, a new pipe of uid $USER_ID's gets $size bytes, not 65536"
log "$JOBS jobs held back; a new pipe of the user's still holds 64 KiB"
# reading PID J: the reader PID has the FIFO of job J open (only then may its
# holder go: a FIFO with no reader would fail dlaunch's writes).
reading() { [[ $(readlink "/proc/$1/fd/0" 2>/dev/null) == "$U/fifo$2" ]]; }
for j in $(seq "$JOBS"); do
  cat <"$U/fifo$j" >"$TMP/2.$j.out" &
  eval "READER$j=$!"
  wait_for 10 reading "$!" "$j" || fail "the reader of job $j never opened its FIFO"
  eval "kill \$HOLD$j"
done
for j in $(seq "$JOBS"); do
  eval "wait \$JOB$j"
  # shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
  RC=$? OUT=$TMP/2.$j.out ERR=$TMP/2.$j.err
  expect_rc 0 "job $j of $JOBS, held back and then read"
  eval "wait \$READER$j"
  for r in $(seq 0 $((RANKS - 1))); do
    n=$(grep -c "^\[$r\]: [0-9]\{100\}$" "$OUT")
    [[ $n == "$LINES" ]] || fail "job $j, rank $r: $n lines of $LINES arrived"
  done
  # A busy stdout is grown (or not, once the budget is spent); a quiet stderr
  # keeps Linux's 64 KiB, as every other pipe of the user's does.
  grep -q "^\[[0-9]\]: pipe 1048576 " "$OUT" || fail "job $j: no busy rank's pipe grew to 1 MiB ($(grep -m1 ': pipe' "$OUT"))"
  bad=$(grep ": pipe " "$OUT" | grep -cv ": pipe \(65536\|1048576\) 65536$")
  [[ $bad == 0 ]] || fail "job $j: a rank's pipes were not 64 KiB or 1 MiB and 64 KiB: $(grep ': pipe ' "$OUT" | sort | uniq -c | head -n 4 | tr '\n' ';')"
  grep -q "busy pipe" "$ERR" && fail "job $j: Linux refused a pipe within the budget: $(grep -m1 'busy pipe' "$ERR")"
done

# ---------------------------------------------------------------------------
# 3. The user's allowance spent by another program: the job goes on, and says why once.
cat >"$U/hog.py" <<'EOF'
import fcntl, os, sys, time
held = []
while True:  # grow pipes to 1 MiB until Linux refuses, then take small ones until they shrink
    r, w = os.pipe()
    held.append((r, w))
    try:
        fcntl.fcntl(r, 1031, 1 << 20)
    except PermissionError:
        break
while fcntl.fcntl(held[-1][0], 1032) > 8192:
    held.append(os.pipe())
print("spent", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
EOF
as_user "$PY" "$U/hog.py" "$U/done" >"$TMP/hog.out" &
track_pid "$!"
hog_ready() { grep -q spent "$TMP/hog.out"; }
wait_for 30 hog_ready || fail "the helper never spent uid $USER_ID's pipe allowance"
export LINES=20000
run_cmd 60 "${AS_USER[@]}" "$DLAUNCH" --nproc-per-node 2 -- sh "$U/spew.sh"
touch "$U/done"
expect_rc 0 "a busy job whose user's pipe allowance is spent"
for r in 0 1; do
  n=$(grep -c "^\[$r\]: [0-9]\{100\}$" "$OUT")
  [[ $n == 20000 ]] || fail "allowance spent, rank $r: $n lines of 20000 arrived"
done
assert_eq "$(grep -c '^dlaunch: output: a busy pipe stays at' "$ERR")" 1 "lines saying Linux refused to grow a pipe"
assert_file_matches "$ERR" "^dlaunch: output: a busy pipe stays at 8 KiB, not 1024 KiB \(Linux refused: this user's pipes have reached fs.pipe-user-pages-soft; output goes on, with more wake-ups\)$" "the refusal"

wait_for 10 no_marked_processes
assert_no_leftovers "after the pipe memory test"
pass
