#!/usr/bin/env bash
# `dlaunch coordinator` with a full fd table (issue 9, finding 6): under
# `prlimit --nofile=64:64`, idle connections exhaust its fds. It must not spin
# (under 3% of a core over 2s, from /proc/PID/stat: a spinning one gets its
# whole share even on a loaded machine), say so once, and once the
# connections close, accept again and serve a real 2-agent job.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
command -v prlimit >/dev/null || skip "prlimit is not installed"
unset DLAUNCH_RDZV_TOKEN
cp "$SRC/tests/integration/rdzv_peer.py" "$TMP/peer.py"

port=$(free_port)
start_dl_wrapped daemon 120 "prlimit --nofile=64:64" coordinator --listen "127.0.0.1:$port" --rdzv-token T
# shellcheck disable=SC2317  # called through wait_for
listening() { grep -q "listening on 127.0.0.1:$port" "$TMP/daemon.err"; }
wait_for 10 listening || fail "the coordinator did not start: $(cat "$TMP/daemon.err")"
daemon=$(dl_pid daemon)

# They stay open until we close the write end of $TMP/hold.
mkfifo "$TMP/hold"
"$PY" "$TMP/peer.py" idle "$port" 100 <"$TMP/hold" >"$TMP/idle.out" 2>&1 &
exec {hold}>"$TMP/hold"
wait_for 10 file_has "$TMP/idle.out" '^100$' || fail "the idle connections: $(cat "$TMP/idle.out")"
# shellcheck disable=SC2317  # called through wait_for
fds_full() { (($(find "/proc/$daemon/fd" -mindepth 1 | wc -l) >= 62)); }
wait_for 10 fds_full || fail "the idle connections did not fill the fd table ($(find "/proc/$daemon/fd" -mindepth 1 | wc -l) open)"

cpu() { awk '{print $14 + $15}' "/proc/$daemon/stat"; }
hz=$(getconf CLK_TCK)
before=$(cpu)
t0=$EPOCHREALTIME
"$TMP/bin/sleep" 2
ticks=$(($(cpu) - before))
secs=$(since "$t0")
share=$(awk -v t="$ticks" -v hz="$hz" -v s="$secs" 'BEGIN{printf "%.3f", t / hz / s}')
log "CPU with a full fd table: ${share} of a core (${ticks} ticks in ${secs}s)"
le "$share" 0.03 || fail "the coordinator used ${share} of a core with a full fd table (expected under 0.03)"
wait_for 5 file_has "$TMP/daemon.err" "^dlaunch coordinator: rendezvous 127.0.0.1:$port: cannot accept connections \(Too many open files\)" ||
  fail "no line about the full fd table: $(tail -n 5 "$TMP/daemon.err")"

exec {hold}>&-
wait_for 15 file_has "$TMP/daemon.err" "^dlaunch coordinator: rendezvous 127.0.0.1:$port: accepting connections again$" ||
  fail "the coordinator did not recover: $(tail -n 5 "$TMP/daemon.err")"
for node in 0 1; do
  # shellcheck disable=SC2016  # expanded by the worker's shell
  start_dl "node$node" 60 --nnodes 2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id real --rdzv-conf is_host=0 \
    --rdzv-token T -- sh -c 'echo "rank=$RANK world=$WORLD_SIZE"'
done
for node in 0 1; do
  wait_dl "node$node"
  expect_rc 0 "node $node of a real job after the fd table was full"
  assert_file_matches "$OUT" "^\[[01]\]: rank=[01] world=2$" "node $node's worker"
done
assert_eq "$(grep -c "cannot accept connections" "$TMP/daemon.err")" "1" "lines about the full fd table"

kill -TERM "$daemon"
wait_dl daemon
expect_rc 0 "the coordinator after SIGTERM"
wait_for 5 no_marked_processes
assert_no_leftovers "after the idle connections"
pass
