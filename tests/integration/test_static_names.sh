#!/usr/bin/env bash
# ctest: LABELS=quick
# A static dlaunch (CMake's opt-in DLAUNCH_STATIC_PIE) looks host names up in
# /etc/hosts and DNS only, and never loads an NSS module: a module built for
# another glibc than the one inside dlaunch can crash it in getaddrinfo. In a
# mount namespace of its own, with an nsswitch.conf that names a module
# (compat, which every glibc ships) before files and an /etc/hosts that
# knows one more name:
#   1. a rendezvous endpoint given by that name works (files is consulted);
#   2. an agent that has looked the name up and connected has no NSS module
#      and no second libc mapped (without the narrowing it has both:
#      libnss_compat.so.2 and the libc.so.6 it needs);
#   3. a name nothing knows ends the agent at its join timeout, naming the name.
# A dynamic dlaunch (the sanitized build) loads modules with the system's own
# glibc, like every program: nothing to test there.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

loads_libraries "$DLAUNCH" &&
  skip "dlaunch is linked dynamically: its NSS modules are the system glibc's"
if [[ $(id -u) != 0 ]] || ! unshare -m true 2>/dev/null; then skip "needs root and mount namespaces"; fi
[[ -e /lib/x86_64-linux-gnu/libnss_compat.so.2 || -e /usr/lib/x86_64-linux-gnu/libnss_compat.so.2 ]] ||
  skip "no libnss_compat.so.2 to name in nsswitch.conf"

NAME=dl-static-name-test
printf 'hosts: compat files dns\n' >"$TMP/nsswitch.conf"
{ cat /etc/hosts; printf '127.0.0.1 %s\n' "$NAME"; } >"$TMP/hosts"
cat >"$TMP/ns.sh" <<EOF
#!/bin/sh
# ns.sh ARGS...: this test's nsswitch.conf and hosts, then ARGS.
mount --bind "$TMP/nsswitch.conf" /etc/nsswitch.conf || exit 99
mount --bind "$TMP/hosts" /etc/hosts || exit 99
exec "\$@"
EOF
chmod +x "$TMP/ns.sh"

# 1. The name resolves through /etc/hosts.
port=$(free_port)
run_cmd 20 unshare -m "$TMP/ns.sh" "$DLAUNCH" --nnodes 1 --nproc-per-node 1 --rdzv-endpoint "$NAME:$port" \
  --rdzv-id sn1 -- echo RAN
expect_rc 0 "1: a job whose endpoint is a name in /etc/hosts"
assert_eq "$(cat "$OUT")" RAN "1: the job's output"

# 2. An agent that connected by name: no module, no second libc.
port=$(free_port)
"$PY" - "$port" "$TMP/accepted" <<'EOF' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(1)
s.settimeout(20)
c, _ = s.accept()
open(sys.argv[2], "w").close()
c.settimeout(30)
while c.recv(4096):  # until the agent is gone
    pass
EOF
listener=$!
track_pid "$listener"
unshare -m "$TMP/ns.sh" "$DLAUNCH" --nnodes 2 --nproc-per-node 1 --rdzv-endpoint "$NAME:$port" --rdzv-id sn2 \
  --rdzv-conf is_host=0,join_timeout=20 -- true >"$TMP/agent.out" 2>"$TMP/agent.err" &
agent=$!
track_pid "$agent"
wait_for 10 test -e "$TMP/accepted" || fail "2: the agent never connected to $NAME:$port: $(head -c 300 "$TMP/agent.err")"
[[ $(readlink "/proc/$agent/exe") == "$DLAUNCH" ]] || fail "2: pid $agent is not dlaunch"
loaded=$(grep -oE '[^ /]*(libnss_[a-z]+|libc)\.so[.0-9]*' "/proc/$agent/maps" | sort -u | tr '\n' ' ')
[[ -z $loaded ]] || fail "2: the static dlaunch loaded $loaded"
kill "$agent" 2>/dev/null
wait "$agent" "$listener" 2>/dev/null

# 3. A name that nothing knows.
run_cmd 20 unshare -m "$TMP/ns.sh" "$DLAUNCH" --nnodes 2 --nproc-per-node 1 \
  --rdzv-endpoint "no-such-host.invalid:$port" --rdzv-id sn3 --rdzv-conf join_timeout=2 -- true
[[ $RC != 0 && $RC -lt 124 ]] || fail_run "3: expected a failure, got exit $RC"
grep -q "no-such-host.invalid" "$ERR" || fail_run "3: the message should name the host"

wait_for 5 no_marked_processes
assert_no_leftovers "after the name lookups"
pass
