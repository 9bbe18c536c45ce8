#!/usr/bin/env bash
# ctest: PROCESSORS=2
# --health-check with real agents:
#   1. three namespace hosts A, B, C, --nnodes 2:3, the coordinator hosted by
#      A; the same check on every host, which fails on C alone (HC_HOST=C):
#      the job runs on A and B and both exit 0; C says its held-out line,
#      runs no worker, and ends non-zero at its (short) join timeout, saying
#      the check kept it out; its events hold health_check with ok false;
#   2. on loopback, a check that hangs (a background sleep in its group) is
#      killed at its 1 s timeout: the line says so, its whole process group is
#      gone, /metrics says the node is held out; SIGTERM then ends the held-out
#      node at once, and nothing of any check is left;
#   3. on loopback, three nodes and --max-restarts 1: a worker on A fails after
#      C's check went bad; before the restart C checks again (its pass is older
#      than the 1 s interval), says it leaves the job, leaves (the host logs
#      that it left) and runs no worker of the new generation. How the job goes on
#      without C is the coordinator's (spares, MIN), not asserted here;
#   4. on loopback, the node that hosts the coordinator fails its check: past
#      its join timeout it serves the job the other two run until it ends,
#      then exits non-zero.
# Every wait is a bounded loop on what the nodes write; no wall time is asserted.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

GET="$PY $SRC/tests/integration/tools/http_get.py"

# ---------------------------------------------------------------------------
# 1. A failing host is held out; the job forms from the other two.
netns_hosts "dlhc$$-" 3
declare -A NS=([A]=${NS_HOSTS[0]} [B]=${NS_HOSTS[1]} [C]=${NS_HOSTS[2]})
export DLAUNCH_RDZV_TOKEN=hc-secret-$$-$RANDOM

cat >"$TMP/check.sh" <<'EOF'
#!/bin/sh
echo "checking /scratch on $HC_HOST"
if [ "$HC_HOST" = C ]; then
  echo "no space left on /scratch ($HC_HOST)" >&2
  exit 3
fi
exit 0
EOF
cat >"$TMP/worker.sh" <<EOF
#!/bin/sh
echo "worker ran on \$HC_HOST as rank \$RANK of \$WORLD_SIZE"
exec "$TMP/bin/sleep" 1
EOF
chmod +x "$TMP/check.sh" "$TMP/worker.sh"

port=$(free_port)
JOIN=6
common=(--nnodes 2:3 --rdzv-backend c10d --rdzv-endpoint "$NET.1:$port" --rdzv-id "hc-$$"
  --rdzv-conf "join_timeout=$JOIN,last_call_timeout=1" --health-check "$TMP/check.sh"
  --health-check-interval 2)
for h in A B C; do
  start_dl_wrapped "$h" 60 "ip netns exec ${NS[$h]} env HC_HOST=$h" "${common[@]}" \
    --events "$TMP/ev$h.jsonl" -- "$TMP/worker.sh"
done
for h in A B C; do
  wait_dl "$h"
  declare "rc$h=$RC"
done
# shellcheck disable=SC2154  # rcA, rcB, rcC: declared above
log "A exited $rcA, B $rcB, C $rcC"
[[ $rcA == 0 && $rcB == 0 ]] || { show_nodes A B C; fail "the job on A and B: expected both to exit 0, got A=$rcA B=$rcB"; }
exited_badly "$rcC" || { show_nodes A B C; fail "held-out C: expected a non-zero exit of its own at its join timeout, got $rcC"; }
assert_file_matches "$TMP/A.out" '^\[[01]\]: worker ran on A as rank [01] of 2$' "A's worker"
assert_file_matches "$TMP/B.out" '^\[[01]\]: worker ran on B as rank [01] of 2$' "B's worker"
grep -q 'worker ran' "$TMP/C.out" && { show_nodes C; fail "held-out C ran a worker"; }
held="^dlaunch: health check '$TMP/check.sh': exited with code 3: no space left on /scratch \(C\) \(this node is held out of the job; "
assert_file_matches "$TMP/C.err" "$held" "C's held-out line"
assert_file_matches "$TMP/C.err" \
  "^dlaunch: health check '$TMP/check.sh': kept this node out of the job until its join timeout ran out \(${JOIN}s of waiting\); last check: exited with code 3: no space left on /scratch \(C\)$" \
  "C's last line"
grep -q 'health check' "$TMP/A.err" "$TMP/B.err" && { show_nodes A B; fail "a passing check should say nothing"; }
assert_file_matches "$TMP/evC.jsonl" '"event":"health_check".*"ok":false,"how":"exited with code 3","last_line":"no space left on /scratch \(C\)"' "C's health_check event"
grep -q '"event":"rendezvous"' "$TMP/evC.jsonl" && fail "held-out C got an assignment"
assert_file_matches "$TMP/evA.jsonl" '"event":"health_check".*"ok":true' "A's health_check event"
if "$PY" -c 'import jsonschema' 2>/dev/null; then
  "$PY" - "$SRC/docs/events.schema.json" "$TMP"/ev{A,B,C}.jsonl <<'PYEOF' || fail "the events do not hold to docs/events.schema.json"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
for path in sys.argv[2:]:
    for line in open(path):
        jsonschema.validate(json.loads(line), schema)
PYEOF
fi

# ---------------------------------------------------------------------------
# 2. A check that hangs is killed at its timeout, with its whole group.
cat >"$TMP/hang.sh" <<EOF
#!/bin/sh
echo \$\$ >>"$TMP/hang.groups"
"$TMP/bin/sleep" 100 &
echo "still looking for GPU 3"
exec "$TMP/bin/sleep" 100
EOF
chmod +x "$TMP/hang.sh"
port=$(free_port)
start_dl hang 60 --nnodes 2 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-conf "is_host=0,join_timeout=50" \
  --health-check "$TMP/hang.sh" --health-check-timeout 1 --health-check-interval 1 \
  --metrics-addr 127.0.0.1:0 --events "$TMP/evhang.jsonl" -- "$TMP/worker.sh"
timed_out="^dlaunch: health check '$TMP/hang.sh': did not finish within 1s; killed: still looking for GPU 3 \(this node is held out of the job; next check in 1s\)$"
wait_for 20 file_has "$TMP/hang.err" "$timed_out" || { show_nodes hang; fail "no line saying the hanging check was killed at its timeout"; }
first=$(head -n 1 "$TMP/hang.groups")
[[ -n $first ]] || fail "the hanging check did not record its process group"
group_gone() { [[ -z $(pgrep -g "$1" 2>/dev/null) ]]; }
wait_for 5 group_gone "$first" || {
  # shellcheck disable=SC2046  # one pid a word
  fail "the timed-out check's process group $first is still there:$(describe_pids $(pgrep -g "$first"))"
}
mport=$(sed -nE 's/.*"event":"metrics_listening".*"port":([0-9]+).*/\1/p' "$TMP/evhang.jsonl" | head -n 1)
[[ -n $mport ]] || fail "no metrics_listening event"
$GET "http://127.0.0.1:$mport/metrics" 5 >"$TMP/metrics.txt" || fail "GET /metrics failed"
assert_file_matches "$TMP/metrics.txt" '^dlaunch_node_held_out 1$' "the held-out gauge"
assert_file_matches "$TMP/metrics.txt" '^dlaunch_health_check_failures_total [1-9][0-9]*$' "the failures counter"
# Held out, it is still a well-behaved process: SIGTERM ends it at once.
victim=$(dl_pid hang)
[[ -n $victim ]] || fail "cannot find the held-out dlaunch"
kill -TERM "$victim"
wait_dl hang
[[ $RC == 143 ]] || { show_nodes hang; fail "SIGTERM while held out: expected exit 143, got $RC"; }
assert_file_matches "$TMP/hang.err" '^dlaunch: health check: stopped by SIGTERM before this node joined$' "the stop line"
grep -q 'worker ran' "$TMP/hang.out" && fail "the held-out node ran a worker"
wait_for 5 no_marked_processes || {
  # shellcheck disable=SC2046  # one pid a word
  fail "processes left after the held-out node ended:$(describe_pids $(marked_pids))"
}

# ---------------------------------------------------------------------------
# 3. Before a restart a stale pass is checked again; C fails it and leaves.
cat >"$TMP/restart_worker.sh" <<EOF
#!/bin/sh
g=\$TORCHELASTIC_RESTART_COUNT
echo "worker on \$HC_HOST generation \$g"
if [ "\$g" = 0 ] && [ "\$HC_HOST" = A ]; then
  until [ -e "$TMP/bad.C" ]; do "$TMP/bin/sleep" 0.1; done
  exit 7
fi
if [ "\$g" = 0 ]; then exec "$TMP/bin/sleep" 30; fi
exec "$TMP/bin/sleep" 1
EOF
chmod +x "$TMP/restart_worker.sh"
port=$(free_port)
for h in A B C; do
  start_dl_wrapped "r$h" 60 "env HC_HOST=$h" --nnodes 2:3 --max-restarts 1 --rdzv-backend c10d \
    --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "hcr-$$" \
    --rdzv-conf "is_host=$([[ $h == A ]] && echo 1 || echo 0),join_timeout=$JOIN,last_call_timeout=1" \
    --health-check "test ! -e $TMP/bad.\$HC_HOST || { echo \"bad disk on \$HC_HOST\"; exit 4; }" \
    --health-check-interval 1 -- "$TMP/restart_worker.sh"
done
three_ran() { [[ $(cat "$TMP"/r{A,B,C}.out 2>/dev/null | grep -c 'generation 0') == 3 ]]; }
wait_for 20 three_ran || { show_nodes rA rB rC; fail "the first generation did not start on the three nodes"; }
sleep 1 # C's pass is now older than the interval
touch "$TMP/bad.C"
wait_dl rC
rcC=$RC
for h in A B; do wait_dl "r$h"; done
exited_badly "$rcC" || { show_nodes rA rB rC; fail "C, held out after the restart: expected a non-zero exit of its own, got $rcC"; }
assert_file_matches "$TMP/rC.err" ': exited with code 4: bad disk on C \(before the restart; this node leaves the job and is held out\)$' "C's line before the restart"
grep -q 'generation 1' "$TMP/rC.out" && { show_nodes rC; fail "C ran a worker of the restarted job"; }
assert_file_matches "$TMP/rA.err" 'node [0-9] \([^)]*\) left' "the host's line that C left"
grep -q 'lost (connection closed)' "$TMP/rA.err" && { show_nodes rA; fail "the host counted C lost rather than left"; }
wait_for 5 no_marked_processes || {
  # shellcheck disable=SC2046  # one pid a word
  fail "processes left after the restart case:$(describe_pids $(marked_pids))"
}

# ---------------------------------------------------------------------------
# 4. A held-out node that hosts the coordinator serves the others' job to its end.
cat >"$TMP/held_worker.sh" <<EOF
#!/bin/sh
echo "worker ran on \$HC_HOST"
until [ -e "$TMP/release" ]; do "$TMP/bin/sleep" 0.1; done
EOF
chmod +x "$TMP/held_worker.sh"
port=$(free_port)
start_dl_wrapped hostA 60 "env HC_HOST=A" --nnodes 2:3 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" \
  --rdzv-id "hch-$$" --rdzv-conf "is_host=1,join_timeout=4,last_call_timeout=1" --health-check "exit 9 # $MARK" \
  --health-check-interval 1 -- "$TMP/held_worker.sh"
wait_for 10 port_listening "$port" || { show_nodes hostA; fail "the held-out host does not serve the coordinator"; }
for h in B C; do
  start_dl_wrapped "host$h" 60 "env HC_HOST=$h" --nnodes 2:3 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" \
    --rdzv-id "hch-$$" --rdzv-conf "is_host=0,join_timeout=20,last_call_timeout=1" --health-check true \
    -- "$TMP/held_worker.sh"
done
serving="kept this node out of the job until its join timeout ran out .*; this node serves the job's coordinator until the job ends$"
wait_for 20 file_has "$TMP/hostA.err" "$serving" || { show_nodes hostA hostB hostC; fail "the held-out host did not say it serves the job"; }
touch "$TMP/release"
for h in B C; do
  wait_dl "host$h"
  [[ $RC == 0 ]] || { show_nodes hostA hostB hostC; fail "$h, with the held-out host serving: expected exit 0, got $RC"; }
done
wait_dl hostA
exited_badly "$RC" || { show_nodes hostA; fail "the held-out host: expected a non-zero exit of its own after the job, got $RC"; }
assert_file_matches "$TMP/hostA.err" "job 'hch-$$' finished on 2 nodes" "the job's end, on the host"
grep -q 'worker ran' "$TMP/hostA.out" && fail "the held-out host ran a worker"
pass
