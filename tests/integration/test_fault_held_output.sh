#!/usr/bin/env bash
# Back-pressure is not a hang. A rank that writes without
# pause into a stalled console (`| less`, Ctrl-S, a slow tee) is blocked in
# write(): dlaunch holds its output back, and that time is not silence.
#   1. two ranks print 60,000 lines each into a dlaunch whose stdout is a FIFO
#      nobody reads, --hang-timeout 2 --hang-action stop: once the ranks are
#      blocked, three timeouts pass with no hang reported and the job running;
#      then a reader comes: every line arrives and the job exits 0;
#   2. the same console, ranks that print 10 lines and then sleep: the hang is
#      still reported and the job stops with 124;
#   3. two rendezvous nodes, node 0's ranks silent and node 1's printing into
#      its stalled console: the coordinator hears no silence from node 1 (its
#      heartbeats carry silent_ms), so no hang; once node 1's reader comes and
#      its ranks end, node 0's ranks are told to end too and both exit 0.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
command -v mkfifo >/dev/null || skip "'mkfifo' is not installed"
command -v gdb >/dev/null || fail "gdb is missing (scripts/install-deps.sh installs it)"
unset DLAUNCH_RDZV_TOKEN

LINES_PER_RANK=60000  # 6 MB a rank: more than the console's 4 MiB cap and every pipe hold

# Prints LINES_PER_RANK lines of 100 digits, noting every 1000th in count.RANK
# (so that the test sees when the rank is blocked), unless $STOP_FILE appears.
cat >"$TMP/spew.sh" <<EOF
i=0
while [ \$i -lt $LINES_PER_RANK ]; do
  printf "%0100d\n" "\$i"
  i=\$((i + 1))
  [ \$((i % 1000)) = 0 ] && echo "\$i" >"$TMP/count.\$TAG\$RANK"
done
EOF

# counted TAG: the lines the ranks of run TAG have written so far.
counted() { cat "$TMP/count.$1"* 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
# stalled TAG: true once the count of TAG stops growing (checked 0.5s apart).
LAST=-1
stalled() {
  local now
  now=$(counted "$1")
  [[ $now == "$LAST" && $now -gt 0 ]] && return 0
  LAST=$now
  "$TMP/bin/sleep" 0.5
  return 1
}
hang_reported() { file_has "$1" "no rank (on any node )?(has )?made progress"; }

# holds_open PID PATH: true when process PID has PATH open.
holds_open() {
  local fd
  for fd in /proc/"$1"/fd/*; do [[ $(readlink "$fd" 2>/dev/null) == "$2" ]] && return 0; done
  return 1
}

# ---------------------------------------------------------------------------
# 1. Ranks blocked on a stalled console are making progress.
mkfifo "$TMP/fifo1"
exec 3<>"$TMP/fifo1"  # holds the FIFO open without reading it
export TAG=a
"$DLAUNCH" --nproc-per-node 2 --hang-timeout 2 --hang-action stop -- sh "$TMP/spew.sh" \
  >"$TMP/fifo1" 2>"$TMP/1.err" </dev/null &
DLPID=$!
track_pid "$DLPID"
wait_for 60 stalled a || fail "the ranks never blocked on the stalled console (count $(counted a))"
blocked_at=$(counted a)
log "ranks blocked after $blocked_at lines"
((blocked_at < 2 * LINES_PER_RANK)) || fail "the ranks finished without blocking: nothing was tested"
# Three hang timeouts with the ranks held back: the hang watch must stay quiet.
if wait_for 6 hang_reported "$TMP/1.err"; then
  tail -n 5 "$TMP/1.err" >&2
  fail "ranks blocked writing to a stalled console were reported as a hang"
fi
kill -0 "$DLPID" 2>/dev/null || fail "dlaunch ended while its ranks were held back: $(tail -n 3 "$TMP/1.err")"
wc -l <"$TMP/fifo1" >"$TMP/1.lines" 3<&- &  # not holding the FIFO open itself
READER=$!
track_pid "$READER"
# Only once the reader has the FIFO open: with no reader for an instant,
# dlaunch's write would meet a broken pipe rather than a slow reader.
wait_for 10 holds_open "$READER" "$TMP/fifo1" || fail "the reader never opened $TMP/fifo1"
exec 3<&-
t0=$EPOCHREALTIME
gone() { ! kill -0 "$DLPID" 2>/dev/null || [[ $(awk '{print $3}' "/proc/$DLPID/stat" 2>/dev/null) == Z ]]; }
wait_for 60 gone || fail "dlaunch still runs 60s after its reader came"
wait "$DLPID"
RC=$?
wait "$READER"
OUT=$TMP/1.lines ERR=$TMP/1.err ELAPSED=$(since "$t0")
expect_rc 0 "ranks held back by a stalled console, then read"
assert_eq "$(tr -d ' ' <"$TMP/1.lines")" $((2 * LINES_PER_RANK)) "lines that reached the reader"
hang_reported "$TMP/1.err" && fail "a hang was reported: $(grep -m1 progress "$TMP/1.err")"
wait_for 3 no_marked_processes
assert_no_leftovers "after the held-back job"

# ---------------------------------------------------------------------------
# 2. A genuinely silent job on the same stalled console is still a hang.
cat >"$TMP/quiet.sh" <<EOF
for i in 1 2 3 4 5 6 7 8 9 10; do echo "line \$i"; done
exec "$TMP/bin/sleep" 300
EOF
mkfifo "$TMP/fifo2"
exec 3<>"$TMP/fifo2"
# Not run_dl: that sends stdout to a file, and this run's must be the FIFO.
t0=$EPOCHREALTIME
timeout -k 5 60 "$DLAUNCH" --nproc-per-node 2 --hang-timeout 2 --hang-action stop -- sh "$TMP/quiet.sh" \
  >"$TMP/fifo2" 2>"$TMP/2.err" </dev/null
RC=$?
OUT=/dev/null ERR=$TMP/2.err ELAPSED=$(since "$t0")
exec 3<&-
expect_rc 124 "silent ranks behind a stalled console"
assert_file_matches "$ERR" "^dlaunch: no rank has made progress for [0-9]+s: collecting stacks$" "the hang notice"
assert_file_matches "$ERR" "^dlaunch: stacks are in .*/dlaunch-[^/]+$" "where the hang's stacks are kept"
wait_for 3 no_marked_processes
assert_no_leftovers "after the silent job"
# The hang's stacks keep the run directory for the user (in /dev/shm by
# default); this test is that user.
kept=$(sed -n 's/^dlaunch: stacks are in //p' "$ERR")
[[ $kept == */dlaunch-* && -d $kept ]] && rm -rf -- "$kept"

# ---------------------------------------------------------------------------
# 3. Two rendezvous nodes: node 1's ranks are held back, node 0's are silent.
cat >"$TMP/node.sh" <<EOF
if [ "\$GROUP_RANK" = 1 ]; then exec sh "$TMP/spew.sh"; fi
echo "rank \$RANK waits"
while [ ! -e "$TMP/done" ]; do "$TMP/bin/sleep" 0.2; done
EOF
port=$(free_port)
export TAG=c
mkfifo "$TMP/fifo3"
exec 3<>"$TMP/fifo3"
common=(--nnodes 2 --nproc-per-node 2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "held-$$-$port"
  --hang-timeout 2 --hang-action stop)
start_dl host 120 "${common[@]}" --node-rank 0 --rdzv-conf "is_host=1,heartbeat_timeout=10" -- sh "$TMP/node.sh"
timeout -k 5 120 "$DLAUNCH" "${common[@]}" --node-rank 1 --rdzv-conf "is_host=0,heartbeat_timeout=10" \
  -- sh "$TMP/node.sh" >"$TMP/fifo3" 2>"$TMP/peer.err" </dev/null &
PEER=$!
track_pid "$PEER"
LAST=-1
wait_for 60 stalled c || { cat "$TMP/peer.err" >&2; fail "node 1's ranks never blocked (count $(counted c))"; }
(($(counted c) < 2 * LINES_PER_RANK)) || fail "node 1's ranks finished without blocking: nothing was tested"
if wait_for 6 hang_reported "$TMP/host.err"; then
  tail -n 5 "$TMP/host.err" >&2
  fail "a node whose ranks were held back by its console was counted as silent"
fi
bg_running host || fail "the hosting node ended while node 1's ranks were held back: $(tail -n 3 "$TMP/host.err")"
wc -l <"$TMP/fifo3" >"$TMP/3.lines" 3<&- &
READER=$!
track_pid "$READER"
# Only once the reader has the FIFO open: with no reader for an instant,
# dlaunch's write would meet a broken pipe rather than a slow reader.
wait_for 10 holds_open "$READER" "$TMP/fifo3" || fail "the reader never opened $TMP/fifo3"
exec 3<&-
touch "$TMP/done"
t0=$EPOCHREALTIME
wait "$PEER"
# shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
RC=$?
wait "$READER"
# shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
OUT=$TMP/3.lines ERR=$TMP/peer.err ELAPSED=$(since "$t0")
expect_rc 0 "node 1, held back and then read"
assert_eq "$(tr -d ' ' <"$TMP/3.lines")" $((2 * LINES_PER_RANK)) "lines that reached node 1's reader"
wait_dl host
expect_rc 0 "the hosting node, whose ranks were silent while node 1's were held back"
hang_reported "$TMP/host.err" && fail "the coordinator reported a hang: $(grep -m1 progress "$TMP/host.err")"
wait_for 3 no_marked_processes
assert_no_leftovers "after the two-node job"

pass
