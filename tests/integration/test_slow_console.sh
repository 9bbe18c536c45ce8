#!/usr/bin/env bash
# A slow console (`| less`, Ctrl-S, a slow tee) must never stall dlaunch's event
# loop: workers are held back by the full pipe as under a plain terminal, no line
# is lost, and heartbeats and signals keep working.
#   1. single node, a reader that sleeps 5 s first: every line arrives;
#   2. SIGTERM to dlaunch while its stdout reader is stalled: it exits 143
#      within 2 s;
#   3. head launch of two loopback nodes with heartbeat_timeout=3, workers
#      printing 2 MB each (more than every pipe and buffer on the way holds) and
#      a reader asleep for 9 s: the job completes with exit 0, no line lost, and
#      the head's RSS stays under 64 MiB;
#   4. a reader that goes away (`| head -n 1`): dlaunch neither dies of it nor
#      hangs, and exits 0;
#   5. SIGTERM to a head launch whose reader is stalled: exit 143 within 2 s,
#      nothing left on either node.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
command -v mkfifo >/dev/null || skip "'mkfifo' is not installed"

# Prints 3000 lines of 100 digits.
cat >"$TMP/print.sh" <<'EOF'
for i in $(seq 3000); do printf "%0100d\n" "$i"; done
EOF

# 1. A reader that sleeps first.
lines=$(timeout -k 5 60 "$DLAUNCH" --nproc-per-node 2 -- sh "$TMP/print.sh" 2>"$TMP/1.err" </dev/null |
  ("$TMP/bin/sleep" 5; wc -l))
assert_eq "$lines" 6000 "lines through a reader that sleeps 5s"

# 2. SIGTERM while the reader is stalled. The reader is this shell, holding the
# FIFO open on fd 3 and never reading it. Each worker counts what it wrote, so
# the test can wait until they are blocked (the count stops growing).
cat >"$TMP/spew.sh" <<EOF
i=0
while :; do
  printf "%0100d\n" "\$i"
  i=\$((i + 1))
  [ \$((i % 1000)) = 0 ] && echo "\$i" >"$TMP/count.\$RANK"
done
EOF
mkfifo "$TMP/stalled"
exec 3<>"$TMP/stalled"
"$DLAUNCH" --nproc-per-node 2 -- sh "$TMP/spew.sh" >"$TMP/stalled" 2>"$TMP/2.err" </dev/null &
DLPID=$!
track_pid "$DLPID"
counted() { cat "$TMP/count.0" "$TMP/count.1" 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
LAST=-1
stalled() {
  local now
  now=$(counted)
  [[ $now == "$LAST" && $now -gt 0 ]] && return 0
  LAST=$now
  "$TMP/bin/sleep" 0.3
  return 1
}
wait_for 60 stalled || fail "the workers never blocked on the stalled console (count $(counted))"
kill -0 "$DLPID" 2>/dev/null || fail "dlaunch exited before the SIGTERM: $(tail -n 3 "$TMP/2.err")"
t0=$EPOCHREALTIME
kill -TERM "$DLPID"
gone() { ! kill -0 "$DLPID" 2>/dev/null || [[ $(awk '{print $3}' "/proc/$DLPID/stat" 2>/dev/null) == Z ]]; }
wait_for 10 gone || fail "SIGTERM with a stalled reader: dlaunch still runs 10s later (expected to exit within 2s)"
took=$(since "$t0")
wait "$DLPID"
RC=$?
exec 3<&-
# A real-process bound: only a real pipe with a stalled reader shows a write
# to it that holds the exit up (the 10 s wait above catches a hang, not that).
in_time "$took" 2 || fail "SIGTERM with a stalled reader: dlaunch took ${took}s to exit (expected <= 2s)"
OUT=/dev/null ERR=$TMP/2.err ELAPSED=$took
expect_rc 143 "SIGTERM with a stalled reader"
wait_for 2 no_marked_processes
assert_no_leftovers "after SIGTERM with a stalled reader"

# 3. Multi-node: the head's reader sleeps for 3 heartbeat timeouts.
cat >"$TMP/print_more.sh" <<'EOF'
for i in $(seq 20000); do printf "%0100d\n" "$i"; done
EOF
mkfifo "$TMP/slow"
("$TMP/bin/sleep" 9; wc -l) <"$TMP/slow" >"$TMP/3.count" &
READER=$!
track_pid "$READER"
t0=$EPOCHREALTIME
"$DLAUNCH" -H 127.0.0.1:1,127.0.0.2:1 --rdzv-conf heartbeat_timeout=3 -- sh "$TMP/print_more.sh" \
  >"$TMP/slow" 2>"$TMP/3.err" </dev/null &
DLPID=$!
track_pid "$DLPID"
HWM=0
sample() {
  local kb
  kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$DLPID/status" 2>/dev/null)
  [[ -n $kb ]] && HWM=$kb
  gone
}
wait_for 90 sample || fail "head launch with a slow reader: still running after 90s"
wait "$DLPID"
RC=$?
wait "$READER"
OUT=$TMP/3.count ERR=$TMP/3.err ELAPSED=$(since "$t0")
expect_rc 0 "head launch with a reader asleep for 3 heartbeat timeouts"
assert_eq "$(cat "$TMP/3.count")" 40000 "lines from two nodes through a reader asleep for 9s"
# ASan's shadow memory and quarantine make RSS meaningless under a sanitizer.
rss_cap=65536
[[ -n ${DLAUNCH_SANITIZED:-} ]] && rss_cap=1048576
[[ $HWM -lt $rss_cap ]] || fail "head launch with a slow reader: the head's RSS reached ${HWM} KiB (expected < 64 MiB)"
wait_for 2 no_marked_processes
assert_no_leftovers "after the head launch with a slow reader"

# 4. A reader that goes away after one line.
t0=$EPOCHREALTIME
timeout -k 5 60 "$DLAUNCH" --nproc-per-node 2 -- sh "$TMP/print_more.sh" 2>"$TMP/4.err" </dev/null |
  head -n 1 >"$TMP/4.out"
RC=${PIPESTATUS[0]}
OUT=$TMP/4.out ERR=$TMP/4.err ELAPSED=$(since "$t0")
expect_rc 0 "a reader that goes away after one line"
first=$(cat "$TMP/4.out")
assert_eq "${first#\[?\]: }" "$(printf '%0100d' 1)" "the one line read"
wait_for 2 no_marked_processes
assert_no_leftovers "after a reader that went away"

# 5. SIGTERM to the head while its reader is stalled (the workers of case 2).
rm -f "$TMP"/count.*
LAST=-1
exec 3<>"$TMP/stalled"
"$DLAUNCH" -H 127.0.0.1:1,127.0.0.2:1 -- sh "$TMP/spew.sh" >"$TMP/stalled" 2>"$TMP/5.err" </dev/null &
DLPID=$!
track_pid "$DLPID"
wait_for 60 stalled || fail "the workers never blocked on the head's stalled console (count $(counted))"
kill -0 "$DLPID" 2>/dev/null || fail "the head exited before the SIGTERM: $(tail -n 3 "$TMP/5.err")"
t0=$EPOCHREALTIME
kill -TERM "$DLPID"
wait_for 10 gone || fail "SIGTERM to the head with a stalled reader: still running 10s later (expected to exit within 2s)"
took=$(since "$t0")
wait "$DLPID"
# shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
RC=$?
exec 3<&-
# A real-process bound, as in case 2: the stalled pipe is the head's, and the
# SIGTERM must also reach the agents and their workers.
in_time "$took" 2 || fail "SIGTERM to the head with a stalled reader: it took ${took}s to exit (expected <= 2s)"
# shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
OUT=/dev/null ERR=$TMP/5.err ELAPSED=$took
expect_rc 143 "SIGTERM to the head with a stalled reader"
wait_for 5 no_marked_processes
assert_no_leftovers "after SIGTERM to the head with a stalled reader"
pass
