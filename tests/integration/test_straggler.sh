#!/usr/bin/env bash
# ctest: LABELS=slow PROCESSORS=2 RUN_SERIAL=TRUE
# (Alone: its job is built so that 4 ranks on 2 cores hardly wait for each
# other's CPU, and other tests beside it bring the contention it would read.
# Under ctest -j8 beside the sanitizer build's tests its forward case named
# rank 2 with its time "spread over every frame" in 4 of 37 clean-clone runs,
# docs/testing.md.)
# Straggler detection with real workers: a PyTorch DDP job over gloo
# (tools/straggler_train.py, which knows nothing of dlaunch) under
# --straggler-window 2, its slowness injected through test variables only.
#   a. rank 2 loads its batches 0.2 s slower: a `straggler` event names rank 2,
#      at its load_batch frame, within 3 windows of the first straggler_window
#      event; the console says it in one line.
#   b. the same 0.2 s in rank 2's forward: named, at the forward frame.
#   c. two nodes of 2 ranks on loopback, both ranks of node 1 slow: the node
#      is named (scope "node", node_rank 1) by the node that hosts the
#      coordinator, and with --straggler-action stop every node exits 122.
#   d. a clean run of 4 windows of training (of 4 s, see case_quiet):
#      straggler_window events, no straggler event.
#   e. rank 0 logs a line and saves a checkpoint every 10 steps, 4 windows:
#      no straggler event.
#   f. case a with --straggler-action stop: exit 122, the host name in
#      --straggler-file, one summary line.
#   g. a plain script (no torch) under a Python that is not Debian's: 2 ranks
#      meet at a barrier of files (tools/straggler_plain.py), rank 1 sleeps in
#      read_shard: named, at read_shard.
# Every events file holds to docs/events.schema.json. The runs are stopped
# once their outcome is known (events awaited with bounded loops).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch
"$PY" -c 'import jsonschema' 2>/dev/null || fail "$PY cannot import jsonschema (scripts/install-deps.sh installs python3-jsonschema)"

TOOLS=$SRC/tests/integration/tools
TRAIN=$TOOLS/straggler_train.py
HOST=$(hostname)

# check_events FILE WHAT [KEY=COUNT...]: the schema and the counts (tools/check_events.py).
check_events() {
  local file=$1 what=$2 out
  shift 2
  out=$("$PY" "$TOOLS/check_events.py" "$SRC/docs/events.schema.json" "$file" "$@" 2>&1) ||
    { cut -c1-300 "$file" >&2; fail "$what: $(echo "$out" | head -n 8)"; }
}
verdict() { "$PY" "$TOOLS/straggler_verdict.py" "$@"; }
show_bg() {
  local name
  for name in "$@"; do
    OUT=$TMP/$name.out ERR=$TMP/$name.err RC=${RC:--} ELAPSED=${ELAPSED:--} show_run
  done
}
training() { [[ $(grep -c '^\[[0-9]*\]: rank [0-9] of [0-9] training' "$TMP/$1.out" 2>/dev/null) -ge $2 ]]; }
windows() { grep -c '"event":"straggler_window"' "$1" 2>/dev/null; }
windows_at_least() { [[ $(windows "$1") -ge $2 ]]; }

# stop NAME...: SIGTERM to each running dlaunch, then waits for them all.
stop() {
  local name pid
  for name in "$@"; do
    pid=$(dl_pid "$name") && kill -TERM "$pid"
  done
  for name in "$@"; do wait_dl "$name"; done
}

# case_named NAME ENV VERDICT-ARGS... -- DLAUNCH-ARGS...: one node of 4 ranks;
# waits (bounded) until the verdict is known, stops the job, and fails unless
# the verdict is as expected.
case_named() {
  local name=$1 env=$2 args=()
  shift 2
  while [[ $1 != -- ]]; do args+=("$1"); shift; done
  shift
  start_dl_wrapped "$name" 120 "env $env" --nproc-per-node 4 --straggler-window 2 --events "$TMP/$name.jsonl" \
    "$@" -- "$PY" "$TRAIN"
  wait_for 90 verdict "$TMP/$name.jsonl" named "${args[@]}" --decided ||
    { stop "$name"; show_bg "$name"; fail "$name: no verdict within 90 s ($(windows "$TMP/$name.jsonl") windows)"; }
  stop "$name"
  got=$(verdict "$TMP/$name.jsonl" named "${args[@]}") || { show_bg "$name"; fail "$name: $got"; }
  log "$name: $got"
  check_events "$TMP/$name.jsonl" "$name's events"
}

# a. Slow data loading on rank 2.
case_named data STRAGGLER_SLOW_RANKS=2 --ranks 2 --scope rank --node-rank 0 --frame load_batch --
grep -E "^dlaunch: straggler: rank 2 \(node 0, host $HOST\) holds the others back: [0-9]+% of its time in straggler_data.py:[0-9]+ load_batch, against [0-9]+% on the other ranks; the others spend [0-9]+% of theirs waiting in " \
  "$TMP/data.err" >/dev/null || { show_bg data; fail "data: no console line naming rank 2"; }

# b. Slow forward on rank 2.
case_named forward "STRAGGLER_SLOW_RANKS=2 STRAGGLER_SLOW_WHERE=forward" --ranks 2 --scope rank --frame forward --

# c. Two nodes; node 1's two ranks are slow. --straggler-action stop: the host
# names the node and stops the whole job, every node exiting 122.
port=$(free_port)
common=(--nnodes 2 --nproc-per-node 2 --straggler-window 2 --straggler-action stop --rdzv-endpoint "127.0.0.1:$port"
  --rdzv-id "straggler-$$")
start_dl_wrapped node0 120 "env STRAGGLER_SLOW_RANKS=2,3" "${common[@]}" --rdzv-conf is_host=1 \
  --straggler-file "$TMP/slow-node1" --events "$TMP/node.jsonl" -- "$PY" "$TRAIN"
start_dl_wrapped node1 120 "env STRAGGLER_SLOW_RANKS=2,3" "${common[@]}" --rdzv-conf is_host=0 -- "$PY" "$TRAIN"
for n in node0 node1; do
  wait_dl "$n"
  [[ $RC == 122 ]] || { show_bg node0 node1; fail "node: $n exited $RC; --straggler-action stop ends every node with 122"; }
done
got=$(verdict "$TMP/node.jsonl" named --ranks "2,3" --scope node --node-rank 1) || { show_bg node0 node1; fail "node: $got"; }
log "node: $got"
# With stop the line is the job's root cause, said once, as the coordinator ends the job.
[[ $(grep -cE "^dlaunch: .*straggler: node 1 \(host $HOST, ranks 2-3\) holds the others back: " "$TMP/node0.err") == 1 ]] ||
  { show_bg node0; fail "node: the host's console should name node 1, once"; }
assert_eq "$(cat "$TMP/slow-node1" 2>/dev/null)" "$HOST" "node: --straggler-file"
check_events "$TMP/node.jsonl" "node's events" straggler=1 job_finished.exit_code:122=1

# case_quiet NAME ENV: one node of 4 ranks trains for 4 windows after every
# rank has started training; no straggler may be named. Windows of 2 s hold
# 20 samples a rank, where two samples are already 10%: the detector's noise
# margin keeps chance from naming a rank (bench/straggler.sh counts how often
# it would, 20 runs).
case_quiet() {
  local name=$1 env=$2 from
  start_dl_wrapped "$name" 120 "env $env" --nproc-per-node 4 --straggler-window 2 --events "$TMP/$name.jsonl" \
    -- "$PY" "$TRAIN"
  wait_for 90 training "$name" 4 || { stop "$name"; show_bg "$name"; fail "$name: the ranks did not start training"; }
  from=$(windows "$TMP/$name.jsonl")
  wait_for 90 windows_at_least "$TMP/$name.jsonl" $((from + 4)) ||
    { stop "$name"; show_bg "$name"; fail "$name: fewer than 4 windows in 90 s of training"; }
  stop "$name"
  got=$(verdict "$TMP/$name.jsonl" none --windows $((from + 4))) || { show_bg "$name"; fail "$name: $got"; }
  log "$name: $got"
  if grep -q '^dlaunch: straggler:' "$TMP/$name.err"; then show_bg "$name"; fail "$name: a straggler line on the console"; fi
  check_events "$TMP/$name.jsonl" "$name's events" straggler=0 "straggler_window>=$((from + 4))"
}

# d. Clean. e. A chatty rank 0 (its checkpoints in $TMP).
case_quiet clean STRAGGLER_SLOW_RANKS=
case_quiet chatty "STRAGGLER_CHATTY_RANK0=1 TMPDIR=$TMP"
grep -q '^\[0\]: step 10 loss' "$TMP/chatty.out" || { show_bg chatty; fail "chatty: rank 0 never logged its step"; }

# f. --straggler-action stop: 122 everywhere, the host name in the file, one line.
run_cmd 120 env STRAGGLER_SLOW_RANKS=2 "$DLAUNCH" --nproc-per-node 4 --straggler-window 2 --straggler-action stop \
  --straggler-file "$TMP/slow-node" --events "$TMP/stop.jsonl" -- "$PY" "$TRAIN"
expect_rc 122 "--straggler-action stop"
assert_eq "$(cat "$TMP/slow-node" 2>/dev/null)" "$HOST" "--straggler-file"
[[ $(grep -c 'exit code 122' "$ERR") == 1 ]] || fail_run "--straggler-action stop: expected one summary line with exit code 122"
check_events "$TMP/stop.jsonl" "stop's events" straggler.state:named=1 job_finished.exit_code:122=1

# g. A plain script under another Python: pyenv's 3.12 where it is installed,
# else the python3 first on PATH.
OTHER=/root/.pyenv/versions/3.12.1/bin/python3
[[ -x $OTHER ]] || OTHER=$(command -v python3)
mkdir -p "$TMP/barrier"
start_dl_wrapped plain 120 "env STRAGGLER_SLOW_RANKS=1" --nproc-per-node 2 --straggler-window 2 \
  --events "$TMP/plain.jsonl" -- "$OTHER" "$TOOLS/straggler_plain.py" "$TMP/barrier"
wait_for 60 verdict "$TMP/plain.jsonl" named --ranks 1 --frame read_shard --decided ||
  { stop plain; show_bg plain; fail "plain ($OTHER): no verdict within 60 s"; }
stop plain
got=$(verdict "$TMP/plain.jsonl" named --ranks 1 --scope rank --frame read_shard) ||
  { show_bg plain; fail "plain ($OTHER): $got"; }
log "plain ($OTHER): $got"
check_events "$TMP/plain.jsonl" "plain's events"

assert_no_leftovers "after the straggler cases"
pass
