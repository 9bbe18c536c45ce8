#!/usr/bin/env bash
# ctest: LABELS=slow RESOURCE_LOCK=prometheus TIMEOUT=300
# --metrics-addr under a real Prometheus (Debian's `prometheus`): a 2-node
# loopback rendezvous job (2 ranks a node, node 0 hosting the coordinator), each
# node serving /metrics on a port it chose (--metrics-addr 127.0.0.1:0, read
# from its --events). Prometheus scrapes both every second; the test asks its
# query API, and each answer must match what `dlaunch status` shows:
#   1. ranks running: 4, as status shows 4 rows with a live pid; the world
#      size 4; the host's nodes joined 2;
#   2. a hang the test causes (every rank silent past --hang-timeout 2):
#      the host's hangs detected goes to 1 and stacks taken to 1 or more, as
#      its --events says, and every rank's silence is over 2 s, as in status;
#   3. rank 3 fails once (exit 3) under --max-restarts 1: its restarts go to
#      1 and the job's restart count to 1, as status's RESTARTS column says,
#      and 4 ranks run again; the job then ends 0.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
export TMPDIR=$TMP  # run directories kept for their stacks (hang reports) go with the test
require_python
unset DLAUNCH_RDZV_TOKEN DLAUNCH_METRICS_ADDR
command -v prometheus >/dev/null || skip "no prometheus (Debian package prometheus; scripts/install-deps.sh)"

export XDG_RUNTIME_DIR=$TMP/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR" "$TMP/xdg1"
cp "$SRC/tests/integration/tools/metrics_worker.py" "$TMP/work.py"
GET="$PY $SRC/tests/integration/tools/http_get.py"
export CTL=$TMP/ctl
mkdir "$CTL"

port=$(free_port)
id="mp-$$"
# Node I (of 2) on 127.0.0.(I+1); node 1 keeps its status socket in $TMP/xdg1.
for i in 0 1; do
  wrap=""
  [[ $i == 1 ]] && wrap="env XDG_RUNTIME_DIR=$TMP/xdg1"
  start_dl_wrapped "n$i" 200 "$wrap" --nnodes 2 --node-rank "$i" --nproc-per-node 2 \
    --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "$id" --local-addr "127.0.0.$((i + 1))" \
    --rdzv-conf "is_host=$((1 - i))" --max-restarts 1 --hang-timeout 2 \
    --metrics-addr 127.0.0.1:0 --events "$TMP/ev$i.jsonl" -- "$PY" "$TMP/work.py"
done
metrics_port() { sed -nE 's/.*"event":"metrics_listening".*"port":([0-9]+).*/\1/p' "$TMP/ev$1.jsonl" | head -n 1; }
wait_for 10 file_has "$TMP/ev1.jsonl" metrics_listening || { show_nodes n0; show_nodes n1; fail "no metrics_listening event"; }
wait_for 10 file_has "$TMP/ev0.jsonl" metrics_listening || { show_nodes n0; fail "no metrics_listening event on node 0"; }
m0=$(metrics_port 0) m1=$(metrics_port 1)
[[ -n $m0 && -n $m1 ]] || fail "metrics_listening without a port"
assert_file_matches "$TMP/n0.err" "^dlaunch: metrics on http://127\.0\.0\.1:$m0/metrics \(and /healthz, /readyz\)$" "node 0's line"

# Prometheus, on loopback, with its storage in $TMP.
prom_port=$(free_port)
cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: dlaunch
    static_configs:
      - targets: ["127.0.0.1:$m0", "127.0.0.1:$m1"]
YML
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$TMP/prometheus.log" 2>&1 &
prom_pid=$!
track_pid "$prom_pid"
PROM=http://127.0.0.1:$prom_port
q() { $GET --prom "$PROM" "$1" 2>>"$TMP/prom-queries.err"; }
# expect_q EXPR VALUE SECONDS: waits for Prometheus to answer EXPR with VALUE.
q_is() { [[ $(q "$1") == "$2" ]] || { sleep 0.5; return 1; }; }
expect_q() {
  wait_for "$3" q_is "$1" "$2" || {
    tail -n 20 "$TMP/prometheus.log" >&2
    show_nodes n0
    fail "prometheus: $1 is '$(q "$1")', expected '$2' (within $3 s)"
  }
}
expect_q 'count(up{job="dlaunch"} == 1)' 2 60

# `dlaunch status` as a table: RANK is column 3, PID 5, RESTARTS 10, SILENT 11.
status_rows() { "$DLAUNCH" status "$id" 2>/dev/null | awk '$1 ~ /^[0-9]+$/'; }
status_running() { status_rows | awk '$5 != "-"' | wc -l; }

# 1. Ranks running.
expect_q 'sum(dlaunch_ranks_running)' 4 30
[[ $(status_running) == 4 ]] || fail "status: $(status_running) ranks with a pid, Prometheus says 4"
expect_q 'max(dlaunch_world_size)' 4 5
expect_q "dlaunch_nodes_joined_total{instance=\"127.0.0.1:$m0\"}" 2 5
expect_q 'sum(dlaunch_rank_state{state="running"})' 4 5
expect_q 'count(dlaunch_job_info{run_id="'"$id"'",mode="rendezvous"})' 2 5
expect_q 'sum(dlaunch_ready)' 2 5

# 2. A hang: every rank silent past --hang-timeout 2.
touch "$CTL/hang"
expect_q 'sum(dlaunch_hangs_detected_total)' 1 40
hangs=$(grep -c '"event":"hang_suspected"' "$TMP/ev0.jsonl")
[[ $hangs == 1 ]] || fail "--events of the host: $hangs hang_suspected, Prometheus says 1"
wait_for 20 file_has "$TMP/ev0.jsonl" '"event":"stacks"' || fail "no stacks event after the hang"
stacks=$(grep -c '"event":"stacks"' "$TMP/ev0.jsonl")
expect_q 'sum(dlaunch_stacks_taken_total)' "$stacks" 10
silent_ok() { [[ $(q 'count(dlaunch_rank_silent_seconds > 2)') == 4 ]]; }
if [[ ! -e $CTL/unhang ]]; then
  silent_ok || fail "prometheus: not every rank silent over 2 s during the hang ($(q 'dlaunch_rank_silent_seconds'))"
  # status's SILENT column ("7s") agrees.
  [[ $(status_rows | awk '{s=$11; sub(/s$/, "", s); if (s + 0 >= 2) n++} END {print n + 0}') == 4 ]] ||
    fail "status: not every rank silent for 2 s or more: $(status_rows)"
fi
touch "$CTL/unhang"
expect_q 'count(dlaunch_rank_silent_seconds < 2)' 4 20

# 3. Rank 3 fails once; the job restarts.
touch "$CTL/fail"
expect_q 'dlaunch_rank_restarts_total{rank="3"}' 1 60
expect_q 'sum(dlaunch_ranks_running)' 4 30
expect_q 'max(dlaunch_restarts_total)' 1 10
restarts3=$(status_rows | awk '$3 == 3 {print $10}')
[[ $restarts3 == 1 ]] || fail "status: rank 3's RESTARTS is '$restarts3', Prometheus says 1"
[[ $(status_running) == 4 ]] || fail "status: $(status_running) ranks with a pid after the restart, Prometheus says 4"

touch "$CTL/stop"
for n in n0 n1; do
  wait_dl "$n"
  expect_rc 0 "$n after the hang and the restart"
done
kill -TERM "$prom_pid"
wait "$prom_pid" 2>/dev/null
pass
