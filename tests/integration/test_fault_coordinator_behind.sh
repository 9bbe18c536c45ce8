#!/usr/bin/env bash
# ctest: PROCESSORS=2
# A coordinator that falls behind is not a reason to lose its agents. 300
# agents (tools: rdzv_peer.py beat) join one job of `dlaunch coordinator` with
# heartbeat_timeout=2 and beat every 0.3 s. The coordinator is then stopped
# (SIGSTOP) for 4 s, twice its timeout, while they keep beating: their beats wait
# unread in its sockets. When it resumes, its next tick comes before it has read
# them all (an epoll round takes at most 128 sockets), and before the fix it
# declared the agents whose beats it had not read yet lost ("no heartbeat for
# 2s") and aborted the job. Now no agent is aborted or closed, and no line says
# "no heartbeat".
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN
cp "$SRC/tests/integration/rdzv_peer.py" "$TMP/peer.py"
N=300

port=$(free_port)
start_dl daemon 60 coordinator --listen "127.0.0.1:$port" --rdzv-token T --rdzv-conf heartbeat_timeout=2
# shellcheck disable=SC2317  # called through wait_for
listening() { grep -q "listening on 127.0.0.1:$port" "$TMP/daemon.err"; }
wait_for 10 listening || fail "the coordinator did not start: $(cat "$TMP/daemon.err")"
daemon=$(dl_pid daemon)

"$PY" "$TMP/peer.py" beat "$port" T behind "$N" 12 >"$TMP/beat.out" 2>&1 &
peers=$!
wait_for 15 file_has "$TMP/beat.out" "^joined $N$" || fail "the agents did not join: $(cat "$TMP/beat.out")"
"$TMP/bin/sleep" 1
kill -STOP "$daemon"
log "coordinator stopped for 4 s with $N agents beating"
"$TMP/bin/sleep" 4
kill -CONT "$daemon"
wait "$peers" || fail "the beating agents failed: $(cat "$TMP/beat.out")"
log "agents: $(tail -n 1 "$TMP/beat.out")"
assert_file_matches "$TMP/beat.out" "^assigned $N aborted 0 closed 0$" "every agent assigned, none aborted or closed"
if grep -q "no heartbeat" "$TMP/daemon.err"; then
  fail "the coordinator blamed its agents for its own stop: $(grep -m 3 "no heartbeat" "$TMP/daemon.err")"
fi
kill -TERM "$daemon"
wait_dl daemon
