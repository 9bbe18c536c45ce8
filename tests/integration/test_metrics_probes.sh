#!/usr/bin/env bash
# ctest: LABELS=slow TIMEOUT=300
# --metrics-addr's probes, hostile clients and refusals:
#   1. /readyz is 503 while the host waits for a late node in the rendezvous
#      (and /metrics says dlaunch_ready 0, 1 node joined), 200 once both run;
#   2. /healthz: no answer within a probe's 1 s while the host's dlaunch is
#      SIGSTOPped; after SIGCONT it answers again (a 503 "event loop behind"
#      first is allowed, until a tick on time), then 200 within 6 s;
#   3. hostile clients on the host's port while the job runs: a slowloris, a
#      1 MiB header (431 or closed), 2,000 idle connections, junk bytes (400 or
#      closed). The job then completes with 0, dlaunch's RSS grew by less than
#      16 MiB, and /metrics answers again in between;
#   4. `dlaunch coordinator --metrics-addr 127.0.0.1:0`: an agent with a wrong
#      token counts as a rendezvous attempt and an auth refusal;
#   5. a bad --metrics-addr, a bad DLAUNCH_METRICS_ADDR and a port in use: one
#      line naming it, exit 2.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN DLAUNCH_METRICS_ADDR

export XDG_RUNTIME_DIR=$TMP/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR"
cp "$SRC/tests/integration/tools/metrics_worker.py" "$TMP/work.py"
GET="$PY $SRC/tests/integration/tools/http_get.py"
HOSTILE="$PY $SRC/tests/integration/tools/hostile_http.py"
export CTL=$TMP/ctl
mkdir "$CTL"

# code URL [SECONDS]: the status code, "timeout" or "refused".
code() { $GET "$1" "${2:-5}" | awk 'NR == 1'; }
code_is() { [[ $(code "$1" "${3:-5}") == "$2" ]]; }
metrics_port() { sed -nE 's/.*"event":"metrics_listening".*"port":([0-9]+).*/\1/p' "$TMP/$1" | head -n 1; }

# ---------------------------------------------------------------------------
# 1. Ready only once the late node has joined and the workers run.
port=$(free_port)
id="pr-$$"
start_node() {
  start_dl "n$1" 200 --nnodes 2 --node-rank "$1" --nproc-per-node 2 \
    --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "$id" --local-addr "127.0.0.$(($1 + 1))" \
    --rdzv-conf "is_host=$((1 - $1))" --metrics-addr 127.0.0.1:0 --events "$TMP/ev$1.jsonl" -- "$PY" "$TMP/work.py"
}
start_node 0
wait_for 10 file_has "$TMP/ev0.jsonl" metrics_listening || { show_nodes n0; fail "no metrics_listening event"; }
M=http://127.0.0.1:$(metrics_port ev0.jsonl)
expect_ready() { code_is "$M/readyz" "$1"; }
wait_for 5 expect_ready 503 || fail "/readyz before the late node: $(code "$M/readyz"), expected 503"
code_is "$M/healthz" 200 || fail "/healthz while waiting: $(code "$M/healthz"), expected 200"
$GET "$M/metrics" 5 >"$TMP/m1.txt"
assert_file_matches "$TMP/m1.txt" '^dlaunch_ready 0$' "metrics before the late node"
assert_file_matches "$TMP/m1.txt" '^dlaunch_nodes_joined_total 1$' "one node joined"
assert_file_matches "$TMP/m1.txt" '^dlaunch_ranks_running 0$' "no rank running"
sleep 1  # the node is late
expect_ready 503 || fail "/readyz a second later: $(code "$M/readyz"), expected 503"
start_node 1
wait_for 30 expect_ready 200 || { show_nodes n0; fail "/readyz after the late node: $(code "$M/readyz"), expected 200"; }
$GET "$M/metrics" 5 >"$TMP/m2.txt"
assert_file_matches "$TMP/m2.txt" '^dlaunch_ranks_running 2$' "node 0's 2 ranks running"
assert_file_matches "$TMP/m2.txt" '^dlaunch_nodes_joined_total 2$' "two nodes joined"

# ---------------------------------------------------------------------------
# 2. /healthz while dlaunch is stopped, and after.
pid0=$(dl_pid n0)
[[ -n $pid0 ]] || fail "no dlaunch pid for node 0"
kill -STOP "$pid0"
sleep 2.5  # longer than /healthz's bound, so the loop is behind when it comes back
got=$(code "$M/healthz" 1)
kill -CONT "$pid0"
[[ $got == timeout ]] || fail "/healthz while dlaunch is stopped: '$got', expected no answer within 1 s"
first=$(code "$M/healthz" 5)
[[ $first == 200 || $first == 503 ]] || fail "/healthz after SIGCONT: '$first', expected 503 or 200"
log "first /healthz after SIGCONT: $first"
wait_for 6 code_is "$M/healthz" 200 || fail "/healthz 6 s after SIGCONT: $(code "$M/healthz"), expected 200"

# ---------------------------------------------------------------------------
# 3. Hostile clients, while the job runs.
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$pid0/status"; }
rss0=$(rss)
H=(127.0.0.1 "${M##*:}")
$HOSTILE slowloris "${H[@]}" 30 >"$TMP/slow.txt" &
slow=$!
$HOSTILE big_header "${H[@]}" >"$TMP/big.txt"
assert_file_matches "$TMP/big.txt" '^big_header: (HTTP/1.1 431 .*|closed|reset)$' "a 1 MiB header refused"
$HOSTILE junk "${H[@]}" >"$TMP/junk.txt"
assert_file_matches "$TMP/junk.txt" '^junk: (HTTP/1.1 400 .*|closed|reset)$' "junk refused"
# The idle client holds its connections for 60 s, past the wait for /metrics:
# an answer comes only from an eviction.
$HOSTILE idle "${H[@]}" 2000 60 >"$TMP/idle.txt" &
idle=$!
sleep 1
# A full server evicts a connection idle for 1 s to make room (launcher/http/server.hpp).
wait_for 20 code_is "$M/metrics" 200 || fail "/metrics among 2,000 idle connections: $(code "$M/metrics")"
kill -0 "$idle" 2>/dev/null || fail "fixture: the idle client ended before /metrics answered: $(cat "$TMP/idle.txt")"
kill "$idle" 2>/dev/null
wait "$idle" 2>/dev/null
wait "$slow"
assert_file_matches "$TMP/slow.txt" '^slowloris: (HTTP/1.1 408 .*|closed|reset) after' "the slowloris closed"
code_is "$M/metrics" 200 || fail "/metrics after the hostile clients: $(code "$M/metrics")"
grow=$(($(rss) - rss0))
((grow < 16384)) || fail "dlaunch's RSS grew by $grow KiB under hostile clients"
bg_running n0 || fail "node 0 died under hostile clients"
touch "$CTL/stop"
for n in n0 n1; do
  wait_dl "$n"
  expect_rc 0 "$n after the hostile clients"
done
# The events file, metrics_listening included, holds to docs/events.schema.json.
"$PY" - "$SRC/docs/events.schema.json" "$TMP/ev0.jsonl" <<'PYEOF' || fail "ev0.jsonl does not hold to the schema"
import json, sys
import jsonschema
v = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
events = [json.loads(line) for line in open(sys.argv[2])]
bad = [e for e in events if list(v.iter_errors(e))]
names = [e["event"] for e in events]
sys.exit(1 if bad or names[:2] != ["job_started", "metrics_listening"] or names.count("metrics_listening") != 1 else 0)
PYEOF
lines=$(grep -c '^dlaunch: metrics on' "$TMP/n0.err")
((lines <= 20)) || fail "node 0 wrote $lines refusal lines; rate-limited expected"

# ---------------------------------------------------------------------------
# 4. The coordinator's counters.
cport=$(free_port)
start_dl coord 60 coordinator --listen "127.0.0.1:$cport" --rdzv-token right --metrics-addr 127.0.0.1:0
wait_for 10 file_has "$TMP/coord.err" 'metrics on http://' || { show_nodes coord; fail "the coordinator serves no metrics"; }
C=$(sed -nE 's|.*metrics on (http://[0-9.:]+)/metrics.*|\1|p' "$TMP/coord.err" | head -n 1)
run_dl 20 --nnodes 1 --rdzv-endpoint "127.0.0.1:$cport" --rdzv-id wrong --rdzv-token wrong -- true
[[ $RC != 0 ]] || fail_run "an agent with the wrong token was let in"
$GET "$C/metrics" 5 >"$TMP/c.txt"
assert_file_matches "$TMP/c.txt" '^dlaunch_rendezvous_attempts_total [1-9]' "the coordinator counted the attempt"
assert_file_matches "$TMP/c.txt" '^dlaunch_auth_refusals_total [1-9]' "the coordinator counted the refusal"
assert_file_matches "$TMP/c.txt" '^dlaunch_nodes_joined_total 0$' "nobody joined"
code_is "$C/readyz" 200 || fail "the coordinator's /readyz: $(code "$C/readyz")"

# ---------------------------------------------------------------------------
# 5. Bad addresses (the coordinator's metrics port is the one in use).
busy=$(sed -nE 's|http://127.0.0.1:([0-9]+)|\1|p' <<<"$C")
for bad in "--metrics-addr nope" "--metrics-addr 127.0.0.1:70000" "--metrics-addr 127.0.0.1:$busy"; do
  # shellcheck disable=SC2086
  run_dl 30 $bad -- true
  expect_rc 2 "$bad"
  [[ $(wc -l <"$ERR") == 1 ]] || fail_run "$bad: expected one line"
done
assert_file_matches "$ERR" "^dlaunch: --metrics-addr 127\.0\.0\.1:$busy: cannot listen \(Address already in use\)$" "the port in use"
run_cmd 5 env DLAUNCH_METRICS_ADDR=x:1 "$DLAUNCH" -- true
expect_rc 2 "DLAUNCH_METRICS_ADDR=x:1"
assert_file_matches "$ERR" '^dlaunch: DLAUNCH_METRICS_ADDR=x:1: expected ADDR:PORT or PORT' "the variable named"
kill -TERM "$(dl_pid coord)"
wait_dl coord
expect_rc 0 "the coordinator after SIGTERM"
pass
