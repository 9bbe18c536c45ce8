#!/usr/bin/env bash
# ctest: PROCESSORS=2
# --env horovod in a head launch onto network-namespace hosts, in horovodrun's
# spelling. HEAD (.1) runs the head dlaunch; A (.2) and B (.3) run
# sshd and the agents; C (.4) is a host outside the job.
#   1. `dlaunch -np 4 -H A:2,B:2 --env horovod CLIENT 2`: the gloo client
#      (tests/integration/tools/gloo_client.cpp) makes Horovod's three contexts
#      through the store that A (node rank 0) serves, over the namespaces'
#      eth0 (HOROVOD_GLOO_IFACE), twice; every sum is right, the head exits 0;
#   2. while a job runs, C asks A's store: the connection is closed unanswered
#      and A's agent says so in one line naming C's address; B, a node of the
#      job, is served;
#   3. the static form on A (node rank 0 of 2, no rendezvous): with
#      `--nodes A,B` the store serves B and refuses C, as in case 2; without a
#      node list it says once that it admits any remote peer, and serves C.
# Needs root, `ip netns`, sshd, ssh and libgloo-dev; skipped otherwise.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

CLIENT=$(dirname "$DLAUNCH")/tests/dlaunch_gloo_client
[[ -x $CLIENT ]] || skip "$CLIENT is not built (libgloo-dev is not installed)"
ln -s "$CLIENT" "$TMP/gloo_client"

ssh_hosts "dlhvd$$-" 4
NS_HEAD=${NS_HOSTS[0]} NS_B=${NS_HOSTS[2]} NS_C=${NS_HOSTS[3]}
ADDR_A=$NET.2 ADDR_B=$NET.3 ADDR_C=$NET.4
unset DLAUNCH_RDZV_TOKEN SSH_AUTH_SOCK 2>/dev/null

start_head() {
  local name=$1 secs=$2
  shift 2
  start_dl_wrapped "$name" "$secs" "ip netns exec $NS_HEAD" "$@"
}

# ---------------------------------------------------------------------------
# 1. Two inits of 2 x 2 ranks over the namespaces.
start_head gloo 120 -np 4 -H "$ADDR_A:2,$ADDR_B:2" --env horovod "${SSH_FLAGS[@]}" "$TMP/gloo_client" 2
wait_dl gloo
[[ $RC == 0 ]] || { show_nodes gloo; fail "head launch of 2 x 2 gloo ranks: expected exit 0, got $RC"; }
for r in 0 1 2 3; do
  grep -Eq "rank $r init 2: global 10 local 3 cross 3" "$TMP/gloo.out" ||
    { show_nodes gloo; fail "head launch: expected rank $r's second init with sums global 10 local 3 cross 3"; }
done
log "head launch, 2 namespace hosts x 2 gloo ranks, two inits: ${ELAPSED}s"

# ---------------------------------------------------------------------------
# 2. A host outside the job asks the store.
cat >"$TMP/hold.sh" <<EOF
#!/bin/sh
[ "\$HOROVOD_RANK" = 0 ] && echo "\$HOROVOD_GLOO_RENDEZVOUS_ADDR \$HOROVOD_GLOO_RENDEZVOUS_PORT \$HOROVOD_GLOO_IFACE" >"$TMP/store.addr"
while [ ! -e "$TMP/release" ]; do "$TMP/bin/sleep" 0.05; done
EOF
chmod +x "$TMP/hold.sh"
start_head hold 60 -np 2 -H "$ADDR_A,$ADDR_B" --env horovod "${SSH_FLAGS[@]}" "$TMP/hold.sh"
wait_for 20 test -s "$TMP/store.addr" || { show_nodes hold; fail "the workers never started"; }
read -r addr sport iface <"$TMP/store.addr"
[[ $addr == "$ADDR_A" && $iface == eth0 ]] ||
  { show_nodes hold; fail "expected the store on A ($ADDR_A) and HOROVOD_GLOO_IFACE=eth0, got '$addr' '$iface'"; }
ask() {
  ip netns exec "$1" "$PY" - "$addr" "$sport" <<'EOF'
import http.client, sys
try:
    c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=5)
    c.request("GET", "/global/none")
    print(c.getresponse().status)
except (ConnectionError, http.client.HTTPException, OSError) as e:
    print(f"closed ({type(e).__name__})")
EOF
}
got_b=$(ask "$NS_B")
got_c=$(ask "$NS_C")
[[ $got_b == 404 ]] || { show_nodes hold; fail "B, a node of the job: expected 404 from the store, got '$got_b'"; }
[[ $got_c == closed* ]] || { show_nodes hold; fail "C, outside the job: expected the connection closed, got '$got_c'"; }
wait_for 5 file_has "$TMP/hold.err" "horovod store on $ADDR_A:$sport: .*$ADDR_C" ||
  { show_nodes hold; fail "expected a line naming C ($ADDR_C) as refused by the store"; }
touch "$TMP/release"
wait_dl hold
[[ $RC == 0 ]] || { show_nodes hold; fail "the held job: expected exit 0, got $RC"; }
log "B served ($got_b), C refused ($got_c): $(grep -m1 "$ADDR_C" "$TMP/hold.err")"

# ---------------------------------------------------------------------------
# 3. The static form: node rank 0 on A, with and without a node list.
NS_A=${NS_HOSTS[1]}
static_node0() {
  local name=$1
  shift
  rm -f "$TMP/store.addr" "$TMP/release"
  start_dl_wrapped "$name" 60 "ip netns exec $NS_A" --nnodes 2 --node-rank 0 --master-addr "$ADDR_A" \
    --master-port "$((20000 + RANDOM % 20000))" --nproc-per-node 1 "$@" --env horovod -- "$TMP/hold.sh"
  wait_for 20 test -s "$TMP/store.addr" || { show_nodes "$name"; fail "$name: the worker never started"; }
  read -r addr sport iface <"$TMP/store.addr"
}
static_node0 listed --nodes "$ADDR_A,$ADDR_B"
got_b=$(ask "$NS_B")
got_c=$(ask "$NS_C")
[[ $got_b == 404 ]] || { show_nodes listed; fail "static form with --nodes: B, a listed node, expected 404, got '$got_b'"; }
[[ $got_c == closed* ]] || { show_nodes listed; fail "static form with --nodes: C, not listed, expected closed, got '$got_c'"; }
wait_for 5 file_has "$TMP/listed.err" "horovod store on $ADDR_A:$sport: refused $ADDR_C:[0-9]+ \\(not an address of the job's nodes\\)" ||
  { show_nodes listed; fail "static form with --nodes: expected a line naming C as refused"; }
touch "$TMP/release"
wait_dl listed
[[ $RC == 0 ]] || { show_nodes listed; fail "static form with --nodes: expected exit 0, got $RC"; }

static_node0 unlisted
got_c=$(ask "$NS_C")
[[ $got_c == 404 ]] || { show_nodes unlisted; fail "static form without a node list: C expected 404, got '$got_c'"; }
[[ $(grep -c "admits any remote peer" "$TMP/unlisted.err") == 1 ]] ||
  { show_nodes unlisted; fail "static form without a node list: expected one line saying the store admits any remote peer"; }
touch "$TMP/release"
wait_dl unlisted
[[ $RC == 0 ]] || { show_nodes unlisted; fail "static form without a node list: expected exit 0, got $RC"; }
log "static form: with --nodes B $got_b and C refused; without, C served and said once"

pass
