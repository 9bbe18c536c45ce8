#!/usr/bin/env bash
# Issue 9 (Low): an agent whose endpoint is taken by something else, here a
# listener that greets every connection like sshd ("SSH-2.0-OpenSSH_9.2"),
# says so: it exits non-zero of its own, before its join_timeout (600 s, far
# beyond the run's guard of 20 s), with one line naming the
# endpoint and saying the peer is not a dlaunch coordinator (before the fix:
# "lost the coordinator (frame: bad magic ...)"), and starts no worker.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN

port=$(free_port)
endpoint=127.0.0.1:$port
cat >"$TMP/listener.py" <<'EOF'
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16); s.settimeout(20)
conns = []
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    try:
        c, _ = s.accept()
    except socket.timeout:
        break
    c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
    conns.append(c)
EOF
"$PY" "$TMP/listener.py" "$port" &
track_pid "$!"
disown "$!"  # no "Killed" report when the exit trap ends it
wait_for 5 port_listening "$port" || fail "fixture: the foreign listener on $port did not start"

run_dl 20 --nnodes 2 --rdzv-endpoint "$endpoint" --rdzv-id "foreign-$$" \
  --rdzv-conf is_host=0,join_timeout=600 -- "$TMP/bin/sleep" 0
log "foreign listener: exit $RC after ${ELAPSED}s: $(head -c 300 "$ERR")"
exited_badly "$RC" || fail_run "expected a non-zero exit of dlaunch's own, got $RC"
[[ -s $OUT ]] && fail_run "no worker should have started"
assert_eq "$(grep -c . "$ERR")" 1 "lines on stderr"
assert_file_matches "$ERR" "^dlaunch: .*$endpoint.*not a dlaunch coordinator" \
  "the line says the peer at $endpoint is not a dlaunch coordinator"

for pid in $(marked_pids); do kill "$pid" 2>/dev/null; done
wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
