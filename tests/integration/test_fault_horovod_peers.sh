#!/usr/bin/env bash
# --env horovod: the gloo store that node rank 0 serves admits, from this
# machine, only sockets of the job's user (the kernel says whose a peer's socket
# is, sock_diag). Before, every local user could read and overwrite it.
#   1. root's job: rank 0 PUTs its address under /global/rank_1 and waits.
#      `nobody` (setpriv) GETs it and PUTs 6.6.6.6:4000 over it, and sends PUTs
#      whose sockets it closes at once: each connection is closed unanswered,
#      dlaunch says so in lines naming nobody's uid (at most 5 of a kind in
#      10 s, then a count), the job's own client is still served, the value is
#      untouched, and the job exits 0.
#   2. a MASTER_ADDR that does not resolve: one line naming it, exit 1, and
#      nothing listens (before, the store listened on every interface).
# Needs root, a 'nobody' user and setpriv.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

[[ $(id -u) == 0 ]] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null ||
  skip "needs root, a 'nobody' user and setpriv"
as_nobody=(setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups)
chmod 711 "$TMP"

# ---------------------------------------------------------------------------
# 1. nobody against root's store.
cat >"$TMP/worker.py" <<PYEOF
import http.client, os, sys, time
addr, port = os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"], int(os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"])
def req(method, path, body=None):
    c = http.client.HTTPConnection(addr, port, timeout=5)
    c.request(method, path, body=body)
    r = c.getresponse()
    return r.status, r.read()
assert req("PUT", "/global/rank_1", b"10.1.1.1:7000")[0] == 200
with open("$TMP/store.addr.tmp", "w") as f:
    f.write(f"{addr} {port}\n")
os.rename("$TMP/store.addr.tmp", "$TMP/store.addr")
while not os.path.exists("$TMP/release"):
    time.sleep(0.05)
got = req("GET", "/global/rank_1")
print(f"rank_1 at the end: {got[0]} {got[1].decode()}")
sys.exit(0 if got == (200, b"10.1.1.1:7000") else 1)
PYEOF
cat >"$TMP/bin/intrude.py" <<'PYEOF'
import http.client, socket, sys
addr, port, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def req(method, path, body=None):
    try:
        c = http.client.HTTPConnection(addr, port, timeout=5)
        c.request(method, path, body=body)
        r = c.getresponse()
        return f"{r.status} {r.read().decode(errors='replace')}"
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        return f"closed ({type(e).__name__})"
if what == "get":
    print(req("GET", "/global/rank_1"))
elif what == "put":
    print(req("PUT", "/global/rank_1", b"6.6.6.6:4000"))
elif what == "put-and-leave":
    # The request, then the socket closed at once: the kernel keeps a remnant
    # of it for a while, which names no owner.
    for _ in range(20):
        s = socket.create_connection((addr, port), timeout=5)
        s.sendall(b"PUT /global/rank_1 HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n6.6.6.6:4000")
        s.close()
    print("sent")
PYEOF
chmod 755 "$TMP/bin/intrude.py"

start_dl hold 60 --nproc-per-node 1 --env horovod -- "$PY" "$TMP/worker.py"
wait_for 20 test -s "$TMP/store.addr" || { show_nodes hold; fail "the worker never started"; }
read -r addr sport <"$TMP/store.addr"
got_get=$("${as_nobody[@]}" "$PY" "$TMP/bin/intrude.py" "$addr" "$sport" get)
got_put=$("${as_nobody[@]}" "$PY" "$TMP/bin/intrude.py" "$addr" "$sport" put)
"${as_nobody[@]}" "$PY" "$TMP/bin/intrude.py" "$addr" "$sport" put-and-leave >/dev/null
got_root=$("$PY" "$TMP/bin/intrude.py" "$addr" "$sport" get)
[[ $got_get == closed* ]] || { show_nodes hold; fail "nobody's GET: expected the connection closed unanswered, got '$got_get'"; }
[[ $got_put == closed* ]] || { show_nodes hold; fail "nobody's PUT: expected the connection closed unanswered, got '$got_put'"; }
[[ $got_root == "200 10.1.1.1:7000" ]] ||
  { show_nodes hold; fail "the job's user: expected rank 1's address (200 10.1.1.1:7000), got '$got_root'"; }
wait_for 5 file_has "$TMP/hold.err" \
  "horovod store on $addr:$sport: refused $addr:[0-9]+ \\(a socket of uid $(id -u nobody), not the job's uid 0\\)" ||
  { show_nodes hold; fail "expected a line naming nobody's uid as refused by the store"; }
lines=$(grep -c "horovod store on $addr:$sport: refused" "$TMP/hold.err")
((lines <= 5)) || { show_nodes hold; fail "expected the refusals rate-limited (at most 5 lines of a kind), got $lines"; }
touch "$TMP/release"
wait_dl hold
[[ $RC == 0 ]] || { show_nodes hold; fail "root's job: expected exit 0 with rank 1's value untouched, got $RC"; }
assert_file_matches "$TMP/hold.out" "rank_1 at the end: 200 10.1.1.1:7000" "root's job"
log "nobody: GET $got_get, PUT $got_put; $(grep -m1 "refused $addr" "$TMP/hold.err")"
assert_no_leftovers "after nobody's tries"

# ---------------------------------------------------------------------------
# 2. A MASTER_ADDR that does not resolve.
port=$(free_port)
run_dl 20 --nnodes 2 --node-rank 0 --master-addr no-such-host.invalid --master-port "$port" --env horovod -- true
[[ $RC == 1 ]] || fail_run "a MASTER_ADDR that does not resolve: expected exit 1"
assert_file_matches "$ERR" \
  "horovod store: cannot listen on MASTER_ADDR no-such-host.invalid \\(does not resolve here: " "an unresolved MASTER_ADDR"

pass
