#!/usr/bin/env bash
# ctest: LABELS=quick
# Host names resolve as they do for every other program: through
# /etc/nsswitch.conf and its modules. In mount and UTS namespaces of its own,
# with `hosts: files myhostname` (Debian's libnss-myhostname) and an /etc/hosts
# that does not know the host name, the name is one only the module knows
# (`getent ahosts` finds it):
#   1. a two-node rendezvous to NAME:PORT joins and runs;
#   2. a --env horovod job with --master-addr NAME runs, its store on that
#      name's address (Horovod's gloo rendezvous, test_horovod.sh's client);
#   3. a name that nothing knows is said while the agent still waits (at the
#      first failed lookup), naming the endpoint and how it was looked up, and
#      the agent ends at its join timeout.
# The static-pie dlaunch (the default) asks glibc's built-in /etc/hosts and DNS
# first and getent for the rest (test_static_names: no module loaded into it).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

# A static-pie dlaunch (the default) asks `getent ahosts` for what /etc/hosts and DNS do not know.
if [[ $(id -u) != 0 ]] || ! unshare -m -u true 2>/dev/null; then skip "needs root and mount and UTS namespaces"; fi
[[ -e /lib/x86_64-linux-gnu/libnss_myhostname.so.2 || -e /usr/lib/x86_64-linux-gnu/libnss_myhostname.so.2 ]] ||
  skip "libnss-myhostname is not installed"

NAME=dl-nss-$$
printf 'hosts: files myhostname\n' >"$TMP/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$TMP/hosts"
cat >"$TMP/ns.sh" <<NS
#!/bin/sh
# ns.sh CMD...: this test's host name, nsswitch.conf and hosts, then CMD.
hostname "$NAME" || exit 99
mount --bind "$TMP/nsswitch.conf" /etc/nsswitch.conf || exit 99
mount --bind "$TMP/hosts" /etc/hosts || exit 99
exec "\$@"
NS
chmod +x "$TMP/ns.sh"
in_ns() { unshare -m -u "$TMP/ns.sh" "$@"; }

addr=$(in_ns getent ahostsv4 "$NAME" | awk 'NR == 1 {print $1}')
[[ -n $addr ]] || skip "myhostname gives $NAME no IPv4 address here"
! in_ns grep -q "$NAME" /etc/hosts || fail "the test's /etc/hosts knows $NAME"

# 1. Two nodes, both started in the namespace, rendezvous at NAME:PORT.
port=$(free_port)
cat >"$TMP/two.sh" <<TWO
#!/bin/bash
for n in 0 1; do
  "$DLAUNCH" --nnodes 2 --nproc-per-node 1 --rdzv-endpoint "$NAME:$port" --rdzv-id nss1 \\
    --rdzv-conf join_timeout=30 -- sh -c 'echo "rank \$RANK of \$WORLD_SIZE"' \\
    >"$TMP/node\$n.out" 2>"$TMP/node\$n.err" &
done
rc=0
for job in \$(jobs -p); do wait "\$job" || rc=\$?; done
exit "\$rc"
TWO
run_cmd 60 unshare -m -u "$TMP/ns.sh" bash "$TMP/two.sh"
[[ $RC == 0 ]] || fail "1: the two nodes at $NAME:$port exited $RC: $(cat "$TMP"/node*.err | head -c 600)"
cat "$TMP/node0.out" "$TMP/node1.out" >"$TMP/both.out"
file_has "$TMP/both.out" "rank 0 of 2" || fail "1: no rank 0 in $(cat "$TMP/both.out")"
file_has "$TMP/both.out" "rank 1 of 2" || fail "1: no rank 1 in $(cat "$TMP/both.out")"

# 2. Horovod's store at the master address NAME.
client=$(dirname "$DLAUNCH")/tests/dlaunch_gloo_client
if [[ -x $client ]]; then
  ln -s "$client" "$TMP/gloo_client"  # the mark in its command line
  run_cmd 60 unshare -m -u "$TMP/ns.sh" "$DLAUNCH" --env horovod --nproc-per-node 2 --master-addr "$NAME" -- "$TMP/gloo_client" 1
  expect_rc 0 "2: a Horovod job with --master-addr $NAME"
else
  log "2: the gloo client is not built (libgloo-dev): only the store's address is checked"
fi
# The store listens on NAME's address, not on every interface.
run_cmd 30 unshare -m -u "$TMP/ns.sh" "$DLAUNCH" --env horovod --nproc-per-node 1 --master-addr "$NAME" -- \
  sh -c 'echo "at $HOROVOD_GLOO_RENDEZVOUS_ADDR"; ss -Hltn "sport = :$HOROVOD_GLOO_RENDEZVOUS_PORT"'
expect_rc 0 "2: a Horovod job that shows its store"
# ss shows "192.0.2.2:PORT" or "[fe80::1]%eth0:PORT": the address alone.
listening=$(awk '/LISTEN/ {sub(/:[0-9]+$/, "", $4); sub(/%.*$/, "", $4); gsub(/[][]/, "", $4); print $4}' "$OUT")
[[ -n $listening ]] || fail_run "2: the store is not listening"
unshare -m -u "$TMP/ns.sh" getent ahosts "$NAME" | awk '{sub(/%.*/, "", $1); print $1}' | grep -qxF -- "$listening" ||
  fail_run "2: the store listens on '$listening', which is not an address of $NAME"

# 3. A name nothing knows: said at once, then quiet retries until join_timeout.
port=$(free_port)
start_dl_wrapped bad 30 "unshare -m -u $TMP/ns.sh" --nnodes 2 --nproc-per-node 1 \
  --rdzv-endpoint "no-such-host.invalid:$port" --rdzv-id nss3 --rdzv-conf join_timeout=5 -- true
# Said at the first failed lookup (agent_machine_test holds it to that event);
# here it must come long before the join timeout's final line.
wait_for 10 file_has "$TMP/bad.err" "cannot resolve no-such-host.invalid" ||
  fail "3: no line naming the name; stderr: $(head -c 400 "$TMP/bad.err")"
bg_running bad || fail "3: the agent ended before it said the name did not resolve"
wait_dl bad
exited_badly "$RC" || fail_run "3: expected a failure, got exit $RC"
line=$(grep -m1 "cannot resolve no-such-host.invalid" "$TMP/bad.err")
assert_contains "$line" "rendezvous no-such-host.invalid:$port: " "3: the line names the endpoint"
assert_contains "$line" "/etc/nsswitch.conf: files myhostname" "3: the line says how"
# The notice and the final error: the retries in between are quiet.
[[ $(grep -c "cannot resolve no-such-host.invalid" "$TMP/bad.err") -le 2 ]] ||
  fail_run "3: the failed lookup is repeated"
assert_no_leftovers "the end"
pass
