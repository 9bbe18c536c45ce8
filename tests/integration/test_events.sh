#!/usr/bin/env bash
# --events FILE: one JSON object per line, each valid against
# docs/events.schema.json, with counts that match what ran:
#   1. a single node with a restart, then a failure, then SIGTERM;
#   2. two rendezvous nodes: each writes 'rendezvous'; killing node 1 mid-job
#      makes the hosting node write 'node_lost';
#   3. a head launch: the head's job_started and job_finished, and the standby
#      of a restart that backs off (the head hosts the coordinator);
#   4. a path that cannot be written, a FIFO with no reader, a directory: one
#      line naming --events, exit 2, at once.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
"$PY" -c 'import jsonschema' 2>/dev/null || fail "$PY cannot import jsonschema (scripts/install-deps.sh installs python3-jsonschema)"
SCHEMA=$(cd "$(dirname "$0")/../.." && pwd)/docs/events.schema.json

# check FILE WHAT KEY=COUNT...: every line validates; then counts of each event
# (KEY is an event name) and of fields (KEY is EVENT.FIELD:VALUE, counted
# exactly), as tools/check_events.py does them.
check() {
  local file=$1 what=$2 out
  shift 2
  out=$("$PY" "$SRC/tests/integration/tools/check_events.py" "$SCHEMA" "$file" "$@" 2>&1) ||
    { show_run; echo "--- $file:" >&2; cut -c1-300 "$file" >&2; fail "$what: $(echo "$out" | head -n 8)"; }
}

# 1. One node: rank 1 fails once, the restart succeeds.
run_dl 30 --events "$TMP/restart.jsonl" --nproc-per-node 2 --max-restarts 1 -- \
  /bin/sh -c '[ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 3; exit 0'
expect_rc 0 "a restart that succeeds"
check "$TMP/restart.jsonl" "one restart" job_started=1 worker_started=4 worker_exited=4 restart=1 job_finished=1 \
  worker_exited.exit_code:3=1 worker_started.restart:1=2 job_finished.exit_code:0=1

run_dl 30 --events "$TMP/fail.jsonl" --nproc-per-node 2 -- /bin/sh -c 'exit $RANK$RANK$RANK'
expect_rc 111 "rank 1 exits 111"
check "$TMP/fail.jsonl" "a failure" job_started=1 worker_started=2 worker_exited=2 restart=0 \
  "job_finished.root_cause:rank 1 exited with code 111=1" job_finished.exit_code:111=1

start_dl term 30 --events "$TMP/term.jsonl" --nproc-per-node 2 -- sleep 30
wait_for 10 file_has "$TMP/term.jsonl" '"worker_started".*"local_rank":1' || fail "the workers did not start"
kill -TERM "$(dl_pid term)"
wait_dl term
expect_rc 143 "SIGTERM to dlaunch"
check "$TMP/term.jsonl" "SIGTERM" worker_exited.signal:SIGTERM=2 "job_finished.root_cause:dlaunch was sent SIGTERM=1"
wait_for 5 no_marked_processes
assert_no_leftovers "after the single-node runs"

# 2. Two rendezvous nodes; node 1 is killed while its workers run.
port=$(free_port)
for i in 0 1; do
  start_dl "node$i" 60 --events "$TMP/node$i.jsonl" --nnodes 2 --node-rank "$i" --nproc-per-node 2 \
    --rdzv-endpoint "127.0.0.1:$port" --rdzv-id ev --local-addr "127.0.0.$((i + 1))" \
    --rdzv-conf "is_host=$((i == 0))" -- sleep 30
done
wait_for 20 file_has "$TMP/node1.jsonl" '"worker_started".*"local_rank":1' || { show_run; fail "node 1's workers did not start"; }
kill -KILL "$(dl_pid node1)"
wait_dl node0
[[ $RC != 0 ]] || fail "node 0 exited 0 after node 1 was killed"
check "$TMP/node0.jsonl" "the hosting node" rendezvous=1 rendezvous.world_size:4=1 rendezvous.node_rank:0=1 \
  node_lost=1 node_lost.node:1=1 worker_started=2 worker_exited=2 job_finished=1
check "$TMP/node1.jsonl" "the killed node, up to its death" rendezvous=1 rendezvous.node_rank:1=1 job_finished=0
wait_dl node1
wait_for 10 no_marked_processes
assert_no_leftovers "after the killed node"

# 3. A head launch over two loopback hosts.
run_dl 60 --events "$TMP/head.jsonl" -H 127.0.0.1:1,127.0.0.2:1 -- /bin/true
expect_rc 0 "a head launch"
check "$TMP/head.jsonl" "the head" job_started=1 job_started.mode:head=1 job_started.nodes:2=1 job_finished.exit_code:0=1
# The head hosts the coordinator, so it writes the job's recovery events: a
# failure with a backoff stands the nodes by once, then the job finishes.
run_dl 60 --events "$TMP/head_restart.jsonl" -H 127.0.0.1:1,127.0.0.2:1 --max-restarts 1 \
  --restart-backoff 0.1:0.1 -- sh -c '[ "$TORCHELASTIC_RESTART_COUNT" = 1 ] || [ "$RANK" = 0 ] || exit 3'
expect_rc 0 "a head launch whose restart backs off"
check "$TMP/head_restart.jsonl" "the head, restarted" standby=1 standby.restart:1=1 job_finished.exit_code:0=1

# 4. Files that cannot take events.
for bad in "$TMP/no/such/dir/ev.jsonl" "$TMP"; do
  run_dl 5 --events "$bad" -- /bin/true
  expect_rc 2 "--events $bad"
  assert_file_matches "$ERR" "^dlaunch: --events $bad: " "--events $bad names the flag and the path"
done
mkfifo "$TMP/fifo"
run_dl 5 --events "$TMP/fifo" -- /bin/true
expect_rc 2 "--events FIFO without a reader"
assert_file_matches "$ERR" "^dlaunch: --events $TMP/fifo: cannot open \(a FIFO with no reader\)$" "the FIFO refused"
wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
