#!/usr/bin/env bash
# ctest: LABELS=slow PROCESSORS=2
# --hang-timeout across nodes: the coordinator judges silence from what every
# node's agent reports in its heartbeats, and the host groups the stacks of all
# ranks of the job.
#   1. real DDP over gloo, 2 rendezvous nodes x 2 ranks on 127.0.0.1 and
#      127.0.0.2, rank 2 sleeping in load_batch() before its all_reduce,
#      --hang-timeout 5 --hang-action stop: both dlaunch exit 124 within timeout
#      + 10 s of the ranks' last line; the host's summary names rank 2 in
#      load_batch (file:line) as the odd one out and ranks 0-1,3 in all_reduce;
#      its stacks file holds all four ranks; its --events validate and name rank
#      2; node 1 says why it stopped; nothing is left running; with
#      --hang-action report the job is reported once, rank 2 wakes and every node
#      exits 0; a head launch (-H) reports and stops the same way;
#   2. node 1's ranks print while node 0's are silent for three times the
#      timeout: no hang is reported anywhere and both nodes exit 0;
#   3. `dlaunch coordinator` takes --hang-timeout/--hang-action from the agents'
#      Hello, stops their job with 124 and logs the summary (gdb stacks of sleep).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
export TMPDIR=$TMP  # run directories kept for their stacks (hang reports) go with the test
require_torch
command -v gdb >/dev/null || fail "gdb is missing (scripts/install-deps.sh installs it)"
unset DLAUNCH_RDZV_TOKEN

cp "$SRC/tests/integration/tools/hang_ddp.py" "$TMP/hang_ddp.py"
line=$(grep -n LOAD_BATCH_LINE "$TMP/hang_ddp.py" | cut -d: -f1)

# start_node NAME I IS_HOST ARGS...: rendezvous node I (of 2) on 127.0.0.(I+1).
start_node() {
  local name=$1 i=$2 is_host=$3
  shift 3
  start_dl "$name" 120 --nnodes 2 --node-rank "$i" --nproc-per-node 2 --rdzv-endpoint "127.0.0.1:$port" \
    --rdzv-id "hang-$$-$port" --local-addr "127.0.0.$((i + 1))" --rdzv-conf "is_host=$is_host,heartbeat_timeout=3" "$@"
}

# ---------------------------------------------------------------------------
# 1. A hang across nodes, --hang-action stop.
port=$(free_port)
start_node host 0 1 --hang-timeout 5 --hang-action stop --events "$TMP/events.jsonl" -- "$PY" "$TMP/hang_ddp.py"
start_node peer 1 0 --hang-timeout 5 --hang-action stop -- "$PY" "$TMP/hang_ddp.py"
wait_dl host
host_end=$EPOCHREALTIME
expect_rc 124 "the hosting node after a job-wide hang"
wait_dl peer
expect_rc 124 "node 1 after a job-wide hang"
# The ranks reached their all_reduce, then went silent (the delay from there
# to the stop is the hang watch's, under a fake clock in its unit tests).
silent_from=$(sed -nE 's/^\[[0-9]\]: rank [0-9] quiet from ([0-9.]+)$/\1/p' "$TMP/host.out" "$TMP/peer.out" | sort -n | tail -n 1)
[[ -n $silent_from ]] || { ERR=$TMP/host.err OUT=$TMP/host.out show_run; fail "no rank reached its all_reduce"; }
log "the job stopped $(awk -v a="$silent_from" -v b="$host_end" 'BEGIN{printf "%.1f", b-a}')s after its ranks' last line"

ERR=$TMP/host.err
OUT=$TMP/host.out
assert_file_matches "$ERR" "^dlaunch: no rank has made progress for [0-9]+s: collecting stacks$" "the host's notice"
assert_file_matches "$ERR" \
  "^dlaunch: hang: ranks 0-1,3 \(3\) wait in all_reduce \(distributed_c10d.py:[0-9]+\) <- step \(hang_ddp.py:[0-9]+\)" \
  "ranks 0, 1 (node 0) and 3 (node 1) in all_reduce"
assert_file_matches "$ERR" \
  "^dlaunch: hang: rank 2 \(1\) is elsewhere: load_batch \(hang_ddp.py:$line\) <- step .*<- odd one out$" \
  "rank 2 (node 1) in load_batch, the odd one out of the job"
assert_file_matches "$ERR" "^dlaunch: job stopped after a hang; exit code 124$" "the host's stop line"
assert_file_matches "$ERR" \
  "^dlaunch: root cause: rendezvous 127.0.0.1:$port: no rank on any node made progress for [0-9]+s \(--hang-action stop\)$" \
  "the host's root cause"
assert_file_matches "$ERR" "^dlaunch:   \| hang: rank 2 \(1\) is elsewhere: load_batch" "the summary under the root cause"
file=$(sed -nE 's/^dlaunch: hang: full stacks in (.*)$/\1/p' "$ERR" | head -n 1)
[[ -f $file ]] || fail_run "no stacks file ('$file')"
[[ $(grep -c '^=== rank' "$file") == 4 ]] || fail_run "expected 4 ranks in $file, got: $(grep '^===' "$file")"
grep -q '^=== rank 2 (pid [0-9]*), by python' "$file" || fail_run "rank 2 (node 1) was not sampled by its Python hook"
# Only the coordinator reports: neither node's own watch spoke.
[[ $(grep -c "no rank has made progress" "$TMP/host.err") == 1 ]] || fail_run "expected one hang notice on the host"
grep -q "no rank has made progress" "$TMP/peer.err" && fail "node 1 reported a hang of its own: $(cat "$TMP/peer.err")"
assert_file_matches "$TMP/peer.err" \
  "^dlaunch: rendezvous 127.0.0.1:$port: no rank on any node made progress for [0-9]+s \(--hang-action stop\)$" \
  "node 1 says why it stopped"
"$PY" - "$SRC/docs/events.schema.json" "$TMP/events.jsonl" <<'PYEOF' || fail "--events of the hosting node"
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
events = [json.loads(l) for l in open(sys.argv[2])]
for e in events:
    jsonschema.validate(e, schema)
hang = [e for e in events if e["event"] == "hang_suspected"]
stacks = [e for e in events if e["event"] == "stacks"]
finished = [e for e in events if e["event"] == "job_finished"]
assert len(hang) == 1 and hang[0]["suspects"] == [2], hang
assert len(stacks) == 1, stacks
assert finished[-1]["exit_code"] == 124, finished
assert finished[-1]["root_cause"].startswith("hang: no rank on any node made progress for"), finished
PYEOF
rm -rf "$(dirname "$file")"
wait_for 10 no_marked_processes
assert_no_leftovers "after the job-wide hang"

# ---------------------------------------------------------------------------
# 1b. --hang-action report: reported once, then rank 2 wakes and the job ends 0.
port=$(free_port)
export SLEEP_S=12
start_node rhost 0 1 --hang-timeout 5 -- "$PY" "$TMP/hang_ddp.py"
start_node rpeer 1 0 --hang-timeout 5 -- "$PY" "$TMP/hang_ddp.py"
unset SLEEP_S
wait_dl rhost
expect_rc 0 "the hosting node after a reported hang that resolved"
wait_dl rpeer
expect_rc 0 "node 1 after a reported hang that resolved"
ERR=$TMP/rhost.err
# shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
OUT=$TMP/rhost.out
[[ $(grep -c "no rank has made progress" "$ERR") == 1 ]] || fail_run "expected one hang report"
assert_file_matches "$ERR" "^dlaunch: hang: rank 2 \(1\) is elsewhere: load_batch \(hang_ddp.py:$line\)" "report: rank 2 named"
for r in 0 1; do assert_file_matches "$TMP/rhost.out" "^\[$r\]: rank $r done \[4.0, 4.0, 4.0, 4.0\]$" "rank $r finished"; done
for r in 2 3; do assert_file_matches "$TMP/rpeer.out" "^\[$r\]: rank $r done \[4.0, 4.0, 4.0, 4.0\]$" "rank $r finished"; done
file=$(sed -nE 's/^dlaunch: hang: full stacks in (.*)$/\1/p' "$ERR" | head -n 1)
[[ -f $file ]] && rm -rf "$(dirname "$file")"
wait_for 10 no_marked_processes
assert_no_leftovers "after the reported hang"

# 1c. A head launch over -H 127.0.0.1:2,127.0.0.2:2: the head reports and stops.
run_dl 120 -H 127.0.0.1:2,127.0.0.2:2 --hang-timeout 5 --hang-action stop --rdzv-conf heartbeat_timeout=3 \
  -- "$PY" "$TMP/hang_ddp.py"
expect_rc 124 "a head launch after a job-wide hang"
assert_file_matches "$ERR" \
  "^dlaunch: hang: rank 2 \(1\) is elsewhere: load_batch \(hang_ddp.py:$line\) <- step .*<- odd one out$" \
  "the head names rank 2"
assert_file_matches "$ERR" "^dlaunch: job stopped after a hang; exit code 124$" "the head's stop line"
file=$(sed -nE 's/^dlaunch: hang: full stacks in (.*)$/\1/p' "$ERR" | head -n 1)
[[ -f $file ]] || fail_run "no stacks file from the head ('$file')"
[[ $(grep -c '^=== rank' "$file") == 4 ]] || fail_run "expected 4 ranks in the head's $file"
rm -rf "$(dirname "$file")"
wait_for 10 no_marked_processes
assert_no_leftovers "after the head launch"

# ---------------------------------------------------------------------------
# 2. One node silent, the other printing: not a hang. The printing node finishes
# first; the silent one ends a second after it (less than --hang-timeout), so its
# silence since the start must not count once its peer is done.
cat >"$TMP/one_quiet.py" <<'PYEOF'
import os, sys, time
rank = int(os.environ["RANK"])
flags = [os.path.join(sys.argv[1], f"busy-{r}-done") for r in (2, 3)]
if rank >= 2:
    end = time.time() + 7
    while time.time() < end:
        print(f"rank {rank} busy", flush=True)
        time.sleep(0.5)
    open(flags[rank - 2], "w").close()
else:
    deadline = time.time() + 60  # bounded: the test fails on the exit code if it runs out
    while not all(os.path.exists(f) for f in flags) and time.time() < deadline:
        time.sleep(0.1)  # silent for more than twice --hang-timeout
    time.sleep(1)
print(f"rank {rank} finished", flush=True)
PYEOF
port=$(free_port)
start_node quiet 0 1 --hang-timeout 3 --hang-action stop -- "$PY" "$TMP/one_quiet.py" "$TMP"
start_node busy 1 0 --hang-timeout 3 --hang-action stop -- "$PY" "$TMP/one_quiet.py" "$TMP"
wait_dl quiet
expect_rc 0 "the silent node while the other prints"
wait_dl busy
expect_rc 0 "the printing node"
for n in quiet busy; do
  grep -Eq "no rank|hang:" "$TMP/$n.err" && fail "$n reported a hang: $(cat "$TMP/$n.err")"
done
for r in 0 1; do assert_file_matches "$TMP/quiet.out" "^\[$r\]: rank $r finished$" "rank $r finished"; done
wait_for 10 no_marked_processes
assert_no_leftovers "after the one-quiet-node job"

# ---------------------------------------------------------------------------
# 3. A stand-alone coordinator takes the hang settings from the agents' Hello
# and logs the job-wide summary (native workers: gdb stacks).
port=$(free_port)
start_dl daemon 60 coordinator --listen "127.0.0.1:$port" --rdzv-conf heartbeat_timeout=3
# shellcheck disable=SC2317  # called through wait_for
listening() { grep -q "listening on 127.0.0.1:$port" "$TMP/daemon.err"; }
wait_for 10 listening || fail "the coordinator did not start: $(cat "$TMP/daemon.err")"
for i in 0 1; do
  start_dl "agent$i" 60 --nnodes 2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "daemon-$$" \
    --rdzv-conf is_host=0,heartbeat_timeout=3 --hang-timeout 2 --hang-action stop -- "$TMP/bin/sleep" 30
done
for i in 0 1; do
  wait_dl "agent$i"
  # Its own 124 (expect_rc tells the guard's apart), before the worker's sleep 30 ends.
  expect_rc 124 "agent $i of a stand-alone coordinator's hung job"
done
kill -TERM "$(dl_pid daemon)"
wait_dl daemon
ERR=$TMP/daemon.err
assert_file_matches "$ERR" "^dlaunch coordinator: job 'daemon-$$': no rank has made progress for [0-9]+s: collecting stacks$" \
  "the daemon's notice"
assert_file_matches "$ERR" "^dlaunch coordinator: job 'daemon-$$': hang: ranks 0-1 \(2\) wait in .*nanosleep" \
  "the daemon's summary (gdb's stacks of sleep)"
file=$(sed -nE "s/^dlaunch coordinator: job 'daemon-$$': hang: full stacks in (.*)$/\1/p" "$ERR" | head -n 1)
[[ -f $file ]] || fail_run "no stacks file from the daemon ('$file')"
rm -rf "$(dirname "$file")"
wait_for 10 no_marked_processes
assert_no_leftovers "at the end"
pass
