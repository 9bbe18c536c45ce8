#!/usr/bin/env bash
# `dlaunch coordinator` against peers without the token (issue 9, finding 4):
#   1. a junk Hello for run id job42 with min=max=100 and no token, and one with a
#      nonce that then idles, create no job: the real, authenticated 2-agent job42
#      completes with its own size;
#   2. an authenticated agent that joins and goes away leaves an abandoned job,
#      forgotten after the join timeout with one line;
#   3. 10,000 junk Hellos (one connection each) leave 0 jobs open (the stop line
#      on SIGTERM says so), the daemon's RSS stays under 64 MiB, and the drop
#      lines are rate-limited with a count.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN
cp "$SRC/tests/integration/rdzv_peer.py" "$TMP/peer.py"

port=$(free_port)
start_dl daemon 300 coordinator --listen "127.0.0.1:$port" --rdzv-token T --rdzv-conf join_timeout=4
# shellcheck disable=SC2317  # called through wait_for
listening() { grep -q "listening on 127.0.0.1:$port" "$TMP/daemon.err"; }
wait_for 10 listening || fail "the coordinator did not start: $(cat "$TMP/daemon.err")"
daemon=$(dl_pid daemon)

# 1. Junk first, then the real job.
run_cmd 10 "$PY" "$TMP/peer.py" junk "$port" job42 100 100
assert_eq "$(cat "$OUT")" "11" "the reply to a Hello without a nonce (11: refused)"
# It holds its connection until we close the write end of $TMP/hold.
mkfifo "$TMP/hold"
"$PY" "$TMP/peer.py" junk "$port" job42 100 100 nonce <"$TMP/hold" >"$TMP/idle-junk.out" 2>&1 &
exec {hold}>"$TMP/hold"
wait_for 10 file_has "$TMP/idle-junk.out" '^2$' || fail "a Hello with a nonce got no challenge: $(cat "$TMP/idle-junk.out")"
for node in 0 1; do
  # shellcheck disable=SC2016  # expanded by the worker's shell
  start_dl "node$node" 60 --nnodes 2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id job42 --rdzv-conf is_host=0 \
    --rdzv-token T -- sh -c 'echo "rank=$RANK world=$WORLD_SIZE"'
done
for node in 0 1; do
  wait_dl "node$node"
  expect_rc 0 "node $node of the real job42 after junk Hellos for it"
  assert_file_matches "$OUT" "^\[[01]\]: rank=[01] world=2$" "node $node's worker"
done
assert_file_matches "$TMP/daemon.err" "job 'job42' finished on 2 nodes" "the daemon's log of job42"

# 2. An abandoned job expires.
run_cmd 10 "$PY" "$TMP/peer.py" join-leave "$port" T lonely
assert_eq "$(cat "$OUT")" "joined" "the helper's authenticated join"
wait_for 10 file_has "$TMP/daemon.err" "^dlaunch coordinator: rendezvous 127.0.0.1:$port: job 'lonely' expired: no agent connected for 4s$" ||
  fail "the abandoned job did not expire: $(tail -n 5 "$TMP/daemon.err")"

# 3. A flood of junk Hellos.
run_cmd 200 "$PY" "$TMP/peer.py" flood "$port" 10000 180
assert_eq "$(cat "$OUT")" "10000" "junk Hellos sent"
rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$daemon/status")
# ASan's shadow memory and quarantine (256 MiB by default) make RSS meaningless there.
rss_cap=65536
[[ -n ${DLAUNCH_SANITIZED:-} ]] && rss_cap=1048576
le "$rss_kb" "$rss_cap" || fail "the daemon's RSS after 10,000 junk Hellos: ${rss_kb} KiB (expected under 64 MiB)"
wait_for 15 file_has "$TMP/daemon.err" "^dlaunch coordinator: rendezvous 127.0.0.1:$port: dropped [0-9]+ more connections in the last 10s$" ||
  fail "no rate-limited count of dropped connections: $(tail -n 5 "$TMP/daemon.err")"
lines=$(wc -l <"$TMP/daemon.err")
log "after 10,000 junk Hellos: RSS ${rss_kb} KiB, $lines lines of log"
le "$lines" 60 || fail "the daemon logged $lines lines for 10,000 junk connections (expected a rate-limited few)"

exec {hold}>&-
kill -TERM "$daemon"
wait_dl daemon
expect_rc 0 "the coordinator after SIGTERM"
assert_file_matches "$ERR" "^dlaunch coordinator: stopping on SIGTERM with 0 job\(s\) open$" "the stop line"

wait_for 5 no_marked_processes
assert_no_leftovers "after the junk peers"
pass
