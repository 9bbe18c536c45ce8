#!/usr/bin/env bash
# ctest: LABELS=slow
# dlaunch status / dlaunch stacks: the live view of a running job, over a Unix
# socket only its user can open.
#   1. `status RUN_ID` on a 3-rank job: every rank with a live pid; `status`
#      lists the job; `stacks RUN_ID` prints every rank's stack with the function
#      it sits in, and the job then ends 0;
#   2. `status --watch` in tmux redraws and ends with the job; piped, it writes views;
#   3. the directory is 0700, the socket 0600, and `nobody` cannot reach it;
#   4. an unknown run id, no job, a stale socket (dlaunch and its watchdog
#      SIGKILLed): one line, exit 1, the socket removed; a
#      SIGKILLed dlaunch's socket is removed by its watchdog;
#   5. clients that send nothing, junk, a 1 MiB line, or too many at once: the
#      job is unaffected and ends 0;
#   6. a directory of another user, of mode 0777, or a symlink: one line, the job runs.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

# Every run of this test keeps to its own directory (XDG_RUNTIME_DIR), never
# the machine's /run/user/UID, /dev/shm/dlaunch-UID or /tmp/dlaunch-UID.
export XDG_RUNTIME_DIR=$TMP/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR"
LIVE=$XDG_RUNTIME_DIR/dlaunch
ME=$(id -u)

cp "$SRC/tests/integration/tools/status_worker.py" "$TMP/work.py"
line=$(grep -n WAIT_LINE "$TMP/work.py" | cut -d: -f1)

sock_of() { compgen -G "$LIVE/$1.*.sock" >/dev/null; }

# start_job NAME RUN_ID SECONDS_TO_RUN [NPROC]: a job in the background, waited on until its socket is there.
# It runs for SECONDS_TO_RUN, or until finish_job NAME ends it.
start_job() {
  local name=$1 id=$2 secs=$3 n=${4:-3}
  STOP_FILE=$TMP/stop-$name RUN_S=$secs start_dl "$name" 120 --nproc-per-node "$n" --rdzv-id "$id" -- "$PY" "$TMP/work.py"
  wait_for 10 sock_of "$id" || { show_nodes "$name"; fail "$id: no socket in $LIVE within 10s"; }
}

finish_job() {
  touch "$TMP/stop-$1"
  wait_dl "$1"
  expect_rc 0 "$1: the job after $2"
  for r in 0 1 2; do assert_file_matches "$OUT" "^\[$r\]: rank $r done$" "$1: rank $r finished"; done
}

# 1. status, the list, stacks.
start_job st1 st1 60
wait_for 5 file_has "$TMP/st1.out" "rank 2 tick 1" || { show_nodes st1; fail "st1: no output"; }
run_dl 30 status st1
expect_rc 0 "status st1"
assert_file_matches "$OUT" "^run st1 \(dlaunch pid [0-9]+\), started 20[0-9-]+T[0-9:]+Z: $PY $TMP/work.py$" "status: the job's line"
assert_file_matches "$OUT" "^NODE +HOST +RANK +LOCAL +PID +STATE +TIME +CPU% +RSS +RESTARTS +SILENT +LAST LINE$" "status: the header"
for r in 0 1 2; do
  row=$(awk -v r="$r" '$3 == r && $1 == 0' "$OUT")
  [[ -n $row ]] || fail_run "status: no row for rank $r"
  pid=$(awk '{print $5}' <<<"$row")
  kill -0 "$pid" 2>/dev/null || fail_run "status: rank $r's pid '$pid' is not alive"
  [[ $(tr '\0' ' ' <"/proc/$pid/cmdline") == *work.py* ]] || fail_run "status: pid $pid of rank $r is not the worker"
  [[ $row == *"rank $r tick "* ]] || fail_run "status: rank $r's last line is not its own ('$row')"
  [[ $(awk '{print $6}' <<<"$row") =~ ^(sleeping|running)$ ]] || fail_run "status: rank $r's state in '$row'"
done
run_dl 5 status
expect_rc 0 "status (the list)"
assert_file_matches "$OUT" "^RUN ID +PID +RANKS +STARTED +COMMAND$" "list: the header"
assert_file_matches "$OUT" "^st1 +$(dl_pid st1) +3 +20[0-9-]+T[0-9:]+Z +$PY $TMP/work.py$" "list: the job"
run_dl 30 stacks st1
expect_rc 0 "stacks st1"
assert_file_matches "$OUT" "^stacks: ranks 0-2 \(3\) wait in wait_here \(work.py:$line\) <- main \(work.py:[0-9]+\)" \
  "stacks: the grouped summary"
for r in 0 1 2; do
  assert_file_matches "$OUT" "^=== rank $r \(pid [0-9]+\), by python$" "stacks: rank $r's stack"
done
[[ $(grep -c "line $line in wait_here" "$OUT") == 3 ]] || fail_run "stacks: expected wait_here in 3 full stacks"
finish_job st1 "status and stacks"
[[ $(grep -c "Fatal Python error\|Stack (most recent" "$TMP/st1.err") == 0 ]] || fail "stacks: a dump reached the job's stderr"

# 2. --watch.
if command -v tmux >/dev/null; then
  TMUX_SOCK=$TMP/tmux.sock
  at_exit "tmux -S '$TMUX_SOCK' kill-server 2>/dev/null"
  start_job st2 st2 5
  tmux -S "$TMUX_SOCK" new-session -d -x 200 -y 50 \
    "'$DLAUNCH' status --watch st2; echo \"WATCH-END rc=\$?\"; exec '$TMP/bin/sleep' 60" ||
    fail "tmux new-session failed"
  pane() { tmux -S "$TMUX_SOCK" capture-pane -p >"$TMP/pane$1"; }
  wait_for 5 eval 'pane 1; grep -q "rank 2 tick" "$TMP/pane1"' || fail "watch: no table in the pane: $(cat "$TMP/pane1")"
  sleep 1.5
  pane 2
  cmp -s "$TMP/pane1" "$TMP/pane2" && fail "watch: the view did not change in 1.5s: $(cat "$TMP/pane2")"
  [[ $(grep -c "^NODE " "$TMP/pane2") == 1 ]] || fail "watch: expected the view redrawn in place: $(cat "$TMP/pane2")"
  wait_for 15 eval 'pane 3; grep -q "WATCH-END rc=0" "$TMP/pane3"' || fail "watch: did not end with the job: $(cat "$TMP/pane3")"
  grep -q "^dlaunch status st2: the job has ended$" "$TMP/pane3" || fail "watch: no end line: $(cat "$TMP/pane3")"
  finish_job st2 "--watch"
  tmux -S "$TMUX_SOCK" kill-server
else
  log "tmux is not installed: the terminal view is not checked"
fi
# Into a file: a view after another, and the end line once the job ends. The
# job ends when the test has seen two views (under ASan on a loaded machine a
# job of a fixed 3 s once ended before the second).
start_job st2b st2b 120
start_dl w2b 60 status --watch st2b
two_views() { [[ $(grep -c "^NODE " "$TMP/w2b.out") -ge 2 ]]; }
wait_for 30 two_views || { show_nodes w2b; fail "watch into a file: expected two views within 30s"; }
touch "$TMP/stop-st2b"
wait_dl w2b
expect_rc 0 "status --watch into a file"
grep -q $'\x1b' "$OUT" && fail_run "watch into a file: terminal escapes in a file"
assert_file_matches "$OUT" "^dlaunch status st2b: the job has ended$" "watch into a file: the end"
finish_job st2b "--watch into a file"

# 2b. Two rendezvous agents of one run id on this machine: a socket each, and
# `status RUN_ID` shows both nodes' ranks in one table, each rank once: the
# agent hosting the coordinator answers for the whole job, and the client
# prefers its answer to the other agent's own.
unset DLAUNCH_RDZV_TOKEN
port=$(free_port)
for n in 0 1; do
  STOP_FILE=$TMP/stop-mn RUN_S=30 start_dl "mn$n" 120 --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id mn \
    -- "$PY" "$TMP/work.py"
done
two_sockets() { [[ $(compgen -G "$LIVE/mn.*.sock" | wc -l) == 2 ]]; }
wait_for 10 two_sockets || { show_nodes mn0 mn1; fail "mn: expected two sockets in $LIVE: $(ls "$LIVE")"; }
has_four() {
  run_dl 5 status mn
  [[ $RC == 0 && $(awk '$6 ~ /^(sleeping|running)$/' "$OUT" | wc -l) == 4 ]]
}
wait_for 20 has_four || { show_run; show_nodes mn0 mn1; fail "mn: status did not show 4 running ranks"; }
for r in 0 1 2 3; do
  [[ $(awk -v r="$r" '$3 == r {print $1}' "$OUT") == $((r / 2)) ]] || fail_run "mn: rank $r should be on node $((r / 2))"
done
[[ $(awk '$6 ~ /^(sleeping|running)$/' "$OUT" | wc -l) == 4 ]] || fail_run "mn: expected each rank once"
assert_file_matches "$OUT" "^run mn \(dlaunch pid [0-9]+\), started " "mn: the host's answer alone"
shown=$(sed -nE 's/^run mn \(dlaunch pid ([0-9]+)\).*/\1/p' "$OUT")
[[ $shown == "$(dl_pid mn0)" || $shown == "$(dl_pid mn1)" ]] || fail_run "mn: pid $shown is neither agent's"
touch "$TMP/stop-mn"
for n in 0 1; do
  wait_dl "mn$n"
  expect_rc 0 "mn: node $n"
done

# 3. Modes, and another user.
start_job st3 st3 60
assert_eq "$(stat -c %a "$LIVE")" 700 "the directory's mode"
sock=$(compgen -G "$LIVE/st3.*.sock")
assert_eq "$sock" "$LIVE/st3.$(dl_pid st3).sock" "the socket's name"
assert_eq "$(stat -c %a "$sock")" 600 "the socket's mode"
[[ $(stat -c %F "$sock") == socket ]] || fail "$sock is not a socket"
if [[ $ME == 0 ]] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
  chmod 711 "$TMP" "$XDG_RUNTIME_DIR"  # so that only the last step, the 0700 directory, keeps nobody out
  cp "$DLAUNCH" "$TMP/bin/dlaunch-copy" && chmod 755 "$TMP/bin" "$TMP/bin/dlaunch-copy"
  as_nobody=(setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups)
  run_cmd 5 "${as_nobody[@]}" "$TMP/bin/dlaunch-copy" status --dir "$LIVE" st3
  expect_rc 1 "nobody: status --dir"
  assert_eq "$(cat "$ERR")" "dlaunch status st3: $LIVE: refused (owned by uid 0, not $(id -u nobody))" "nobody: status --dir"
  run_cmd 5 "${as_nobody[@]}" "$PY" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); s.sendall(b"status\n"); print("answered:", s.recv(100))
except OSError as e:
    print(type(e).__name__)' "$sock"
  assert_eq "$(cat "$OUT")" PermissionError "nobody: a raw connect to the socket"
  run_cmd 5 "${as_nobody[@]}" "$TMP/bin/dlaunch-copy" status st3
  expect_rc 1 "nobody: status"
  assert_contains "$(cat "$ERR")" "dlaunch status st3: no running job with this id on this machine (looked in $(default_temp_parent)/dlaunch-" "nobody: status"
  chmod 700 "$TMP" "$XDG_RUNTIME_DIR"
else
  log "not root, or no 'nobody' or setpriv: another user is not tried"
fi
finish_job st3 "modes"

# 4. Unknown run id, no job, a stale socket.
run_dl 30 status nosuch
expect_rc 1 "status nosuch"
assert_eq "$(cat "$ERR")" "dlaunch status nosuch: no running job with this id on this machine (looked in $LIVE)" "status nosuch"
run_dl 5 stacks nosuch
expect_rc 1 "stacks nosuch"
assert_eq "$(cat "$ERR")" "dlaunch stacks nosuch: no running job with this id on this machine (looked in $LIVE)" "stacks nosuch"
run_dl 5 status
expect_rc 1 "status with no job"
assert_eq "$(cat "$ERR")" "dlaunch status: no running job of this user on this machine (looked in $LIVE)" "status with no job"
run_dl 5 status --bogus
expect_rc 2 "status --bogus"
assert_eq "$(cat "$ERR")" "dlaunch status: --bogus: unknown option (see dlaunch status --help)" "status --bogus"
run_dl 5 stacks --watch
expect_rc 2 "stacks --watch"
assert_eq "$(cat "$ERR")" "dlaunch stacks: --watch: only 'dlaunch status' watches" "stacks --watch"
run_dl 5 status --dir "$TMP/none"
expect_rc 1 "status with no directory"
assert_eq "$(cat "$ERR")" "dlaunch status: no running job of this user on this machine (looked in $TMP/none)" \
  "status with no directory"

# A SIGKILLed dlaunch: its watchdog removes the socket.
start_job st4a st4a 60 1
pid=$(dl_pid st4a)
kill -KILL "$pid"
wait_dl st4a
sock_gone() { [[ ! -e $LIVE/st4a.$pid.sock ]]; }
wait_for 5 sock_gone || fail "the watchdog did not remove the SIGKILLed dlaunch's socket"
# dlaunch and its watchdog both SIGKILLed (an OOM kill of both, a kill of
# everything): the socket stays, and the next client removes it.
start_job st4 st4 60 1
pid=$(dl_pid st4)
watch=$(pgrep -x -P "$pid" dlaunch-watch)  # dlaunch's own child
[[ -n $watch ]] || fail "st4: its watchdog was not found"
# Nobody is left to remove the job's private directory either (in /dev/shm by
# default): the worker's environment names it, and the test removes it below.
private_of() {
  local w
  for w in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$w/environ" 2>/dev/null | sed -n 's/^DLAUNCH_STACKS_DIR=//p'
  done | head -n 1
}
st4_private=""
wait_for 10 eval 'st4_private=$(private_of "$pid"); [[ -n $st4_private ]]' || fail "st4: its worker was not found"
kill -KILL "$watch"
kill -KILL "$pid"
wait_dl st4
[[ -S $LIVE/st4.$pid.sock ]] || fail "the socket of a dlaunch killed with its watchdog should still be there"
run_dl 30 status st4
expect_rc 1 "status of a SIGKILLed job"
assert_eq "$(cat "$ERR")" "dlaunch status st4: no running job with this id on this machine (looked in $LIVE)" "stale socket"
[[ -e $LIVE/st4.$pid.sock ]] && fail "the stale socket was not removed"
wait_for 10 no_marked_processes || true
[[ $st4_private == */dlaunch-* ]] && rm -rf -- "$st4_private"

# 5. Hostile clients.
start_job st5 st5 60
sock=$(compgen -G "$LIVE/st5.*.sock")
"$PY" - "$sock" "$MARK" >"$TMP/hostile.out" 2>&1 <<'PYEOF' || fail "hostile clients: $(cat "$TMP/hostile.out")"
import socket, sys, time

path = sys.argv[1]


def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s


def answer(s, timeout=5):
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b
    except (ConnectionResetError, BrokenPipeError):
        return out


# Junk: an error, then closed.
s = conn()
s.sendall(b"hello\n")
a = answer(s)
assert a == b'{"error":"unknown request (expected \'status\' or \'stacks\')"}\n', a
# A line past the cap: closed, unanswered.
s = conn()
try:
    s.sendall(b"x" * (1 << 20))
except (BrokenPipeError, ConnectionResetError):
    pass
assert answer(s) == b"", "1 MiB line answered"
# Silent clients: 16 are held, the 17th and on told at once that it is busy,
# and all dropped after the request timeout.
silent = [conn() for _ in range(16)]
time.sleep(0.3)
extra = conn()
a = answer(extra, 2)
assert a == b'{"error":"busy: 16 clients already"}', a
t0 = time.monotonic()
for s in silent:
    assert answer(s, 5) == b""
waited = time.monotonic() - t0
assert waited < 4, f"silent clients were held {waited:.1f}s"
# A client that asks and never reads: the job does not wait for it.
lazy = conn()
lazy.sendall(b"stacks\n")
print("ok")
PYEOF
run_dl 5 status st5
expect_rc 0 "status after hostile clients"
[[ $(grep -c "tick" "$OUT") == 3 ]] || fail_run "status after hostile clients: expected 3 rows"
finish_job st5 "hostile clients"

# 5b. Out of descriptors: the job's dlaunch gets an open-file limit a few above
# what it uses, and a crowd connects. Accepting fails with EMFILE; it must back
# off (not spin), say so once, and serve again once the crowd has gone. A flap
# (one descriptor more lets one client in, then the table is full again) is the
# same shortage: "accepting again" once, and no second "cannot accept".
if command -v prlimit >/dev/null; then
  start_job st6 st6 60 1
  pid=$(dl_pid st6)
  nfd=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
  # The soft limit only: raising a hard limit again needs CAP_SYS_RESOURCE.
  prlimit --pid "$pid" --nofile=$((nfd + 3)): || fail "prlimit --pid $pid failed"
  cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
  sock=$(compgen -G "$LIVE/st6.*.sock")
  # The crowd holds its connections until the file "$TMP/crowd-go" appears.
  "$PY" - "$sock" "$TMP/crowd-go" >"$TMP/crowd.out" 2>&1 <<'PYEOF' &
import os, socket, sys, time
held = []
for _ in range(30):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(0.2)
    try:
        s.connect(sys.argv[1])
        held.append(s)
    except OSError:
        s.close()
print(len(held), flush=True)
for _ in range(600):  # at most 60 s
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.1)
PYEOF
  crowd=$!
  wait_for 30 file_has "$TMP/st6.err" "cannot accept connections" || fail "EMFILE: no line about the full table"
  c0=$(cpu)
  sleep 1
  c1=$(cpu)
  (((c1 - c0) <= 15)) || fail "EMFILE: dlaunch used $((c1 - c0)) ticks of CPU in 1s (a busy loop?)"
  assert_file_matches "$TMP/st6.err" "^dlaunch: $sock: cannot accept connections \(Too many open files\); retrying, backing off to 1s$" \
    "EMFILE: said once"
  # A flap: one descriptor more lets a queued client in, and the table is full
  # again. (Sessions the crowd leaves silent time out after 2 s and make such
  # flaps too, under load sooner; the raise makes sure there is at least one.)
  prlimit --pid "$pid" --nofile=$((nfd + 4)): || fail "prlimit --pid $pid failed"
  wait_for 10 file_has "$TMP/st6.err" "accepting connections again" || fail "EMFILE: the flap's client was never let in"
  # The next accept fails at once (clients are still queued); an absence has no
  # event to wait for, and a late failure could only let this pass, never fail.
  sleep 0.5
  [[ $(grep -c "cannot accept connections" "$TMP/st6.err") == 1 ]] || fail "EMFILE: said more than once: $(cat "$TMP/st6.err")"
  [[ $(grep -c "accepting connections again" "$TMP/st6.err") == 1 ]] || fail "EMFILE: 'again' more than once: $(cat "$TMP/st6.err")"
  touch "$TMP/crowd-go"
  wait "$crowd"
  served() { run_dl 5 status st6; [[ $RC == 0 ]]; }
  wait_for 10 served || fail_run "EMFILE: status after the crowd left"
  touch "$TMP/stop-st6"
  wait_dl st6
  expect_rc 0 "EMFILE: the job"
fi

# 6. Unsafe directories: one line, and the job runs.
bad_dir() {
  local what=$1 expect=$2
  XDG_RUNTIME_DIR=$TMP/$what RUN_S=0.2 run_dl 60 --nproc-per-node 1 --rdzv-id bad -- "$PY" "$TMP/work.py"
  expect_rc 0 "$what: the job"
  assert_file_matches "$OUT" "^rank 0 done$" "$what: the job ran"
  assert_eq "$(cat "$ERR")" "dlaunch: $TMP/$what/dlaunch: refused ($expect); the job runs without 'dlaunch status'" "$what"
}
mkdir -m 700 "$TMP/mode777" && mkdir -m 777 "$TMP/mode777/dlaunch" && chmod 777 "$TMP/mode777/dlaunch"
bad_dir mode777 "mode 0777 lets other users in; 0700 expected"
mkdir -m 700 "$TMP/link" "$TMP/elsewhere" && ln -s "$TMP/elsewhere" "$TMP/link/dlaunch"
bad_dir link "a symlink"
if [[ $ME == 0 ]] && id nobody >/dev/null 2>&1; then
  mkdir -m 700 "$TMP/owner" "$TMP/owner/dlaunch" && chown nobody "$TMP/owner/dlaunch"
  bad_dir owner "owned by uid $(id -u nobody), not 0"
fi
[[ -z $(ls -A "$TMP/elsewhere") ]] || fail "a socket was made through the symlink"

wait_for 10 no_marked_processes
assert_no_leftovers "at the end"
[[ -z $(compgen -G "$LIVE/*.sock") ]] || fail "sockets left behind: $(ls "$LIVE")"
pass
