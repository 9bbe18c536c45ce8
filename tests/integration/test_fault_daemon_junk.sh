#!/usr/bin/env bash
# Finding 4 of issue 9: `dlaunch coordinator` must not create jobs from
# unauthenticated Hellos. A stand-alone coordinator with a token; a peer
# without the token sends, before the real job:
#   - a Hello for the real job's run id with min = max = 100 nodes, and keeps
#     that connection open;
#   - 2,000 Hellos for other run ids (one connection each, then closed).
# Then:
#   - the real 2-node job (agents with the token) completes: both exit 0,
#     within 20 s (before the fix it waits for 100 nodes: join_timeout=15 ends
#     it with a non-zero exit);
#   - on SIGTERM the coordinator says "with 0 job(s) open": none of the junk
#     made a job (before the fix: 2,001).
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

JUNK=2000
token=daemon-secret-$$-$RANDOM
port=$(free_port)
endpoint=127.0.0.1:$port
run_id=job42-$$
start_dl_wrapped daemon 60 "env DLAUNCH_RDZV_TOKEN=$token" coordinator --listen "$endpoint" \
  --rdzv-conf join_timeout=15
listening() { grep -q "listening on $endpoint" "$TMP/daemon.err"; }
wait_for 10 listening || fail "the coordinator did not start: $(cat "$TMP/daemon.err")"

cat >"$TMP/junk.py" <<'EOF'
import os, socket, sys, time
sys.path.insert(0, sys.argv[1])
from rdzv_hostile import MAGIC, protocol_version, s, u32

src, port, run_id, junk, stop_file = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
v = protocol_version(src)

def hello(rid, nodes):
    p = u32(v) + s(rid) + s(b"") + u32(nodes) + u32(nodes) + u32(0)
    return MAGIC + bytes([v, 1]) + b"\0\0" + u32(len(p)) + p

squatter = socket.create_connection(("127.0.0.1", port), timeout=5)
squatter.sendall(hello(run_id, 100))
sent = 0
for i in range(junk):
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        c.sendall(hello(f"junk-{i}", 1 + i % 7))
        c.settimeout(0.2)
        try:
            c.recv(4096)  # the challenge, once the coordinator has read the hello
        except OSError:
            pass
        c.close()
        sent += 1
    except OSError as e:
        print(f"junk: connection {i}: {e}", flush=True)
print(f"junk: squatting on {run_id} (100 nodes), {sent} junk hellos sent", flush=True)
deadline = time.monotonic() + 45
while not os.path.exists(stop_file) and time.monotonic() < deadline:
    time.sleep(0.1)
squatter.close()
EOF
timeout -k 5 60 "$PY" "$TMP/junk.py" "$SRC/tests/integration/tools" "$SRC" "$port" "$run_id" "$JUNK" "$TMP/stop-junk" \
  >"$TMP/junk.out" 2>&1 &
junk_pid=$!
track_pid "$junk_pid"
wait_for 40 file_has "$TMP/junk.out" '^junk: squatting' || { cat "$TMP/junk.out" >&2; fail "the junk Hellos were not sent within 40s"; }
log "$(tail -n 1 "$TMP/junk.out")"

cat >"$TMP/worker.sh" <<EOF
#!/bin/sh
echo "rank \$RANK of \$WORLD_SIZE done"
EOF
chmod +x "$TMP/worker.sh"
common=(--nnodes 2 --nproc-per-node 1 --rdzv-endpoint "$endpoint" --rdzv-id "$run_id" --rdzv-conf "is_host=0,join_timeout=15")
start_dl_wrapped node0 30 "env DLAUNCH_RDZV_TOKEN=$token" "${common[@]}" -- "$TMP/worker.sh"
start_dl_wrapped node1 30 "env DLAUNCH_RDZV_TOKEN=$token" "${common[@]}" -- "$TMP/worker.sh"
wait_dl node0
rc0=$RC el0=$ELAPSED
wait_dl node1
rc1=$RC el1=$ELAPSED
log "the real job: node 0 exited $rc0 (${el0}s), node 1 exited $rc1 (${el1}s)"
: >"$TMP/stop-junk"
wait "$junk_pid"

kill -TERM "$(dl_pid daemon)"
wait_dl daemon
rc_daemon=$RC
open_line=$(grep -m1 'stopping on' "$TMP/daemon.err")
log "the coordinator exited $rc_daemon: ${open_line:-no 'stopping on' line}"

[[ $rc0 == 0 && $rc1 == 0 ]] || {
  show_nodes node0 node1
  fail "a tokenless Hello for '$run_id' with 100 nodes (and $JUNK junk Hellos) came first; expected the real 2-node job to complete (0 and 0), got $rc0 and $rc1"
}
for r in 0 1; do
  grep -qh "^\[$r\]: rank $r of 2 done$" "$TMP/node0.out" "$TMP/node1.out" || { show_nodes node0 node1; fail "rank $r did not finish"; }
done
[[ $rc_daemon == 0 ]] || { show_nodes daemon; fail "the coordinator should stop with 0 on SIGTERM, got $rc_daemon"; }
[[ $open_line == *"with 0 job(s) open"* ]] ||
  { show_nodes daemon; fail "unauthenticated Hellos created jobs: expected 'with 0 job(s) open' on SIGTERM, got '${open_line}'"; }
wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
