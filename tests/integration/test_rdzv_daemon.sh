#!/usr/bin/env bash
# ctest: LABELS=quick
# `dlaunch coordinator --listen`: one stand-alone coordinator serving two jobs at
# once, keyed by --rdzv-id. Each job gets its own ranks and world size, the
# daemon stops cleanly on SIGTERM, and a bad daemon flag is one line and exit 2.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"

port=$(free_port)
start_dl daemon 60 coordinator --listen "127.0.0.1:$port" --rdzv-conf heartbeat_timeout=3
# shellcheck disable=SC2317  # called through wait_for
listening() { grep -q "listening on 127.0.0.1:$port" "$TMP/daemon.err"; }
wait_for 10 listening || fail "the coordinator did not start: $(cat "$TMP/daemon.err")"

cat >"$TMP/who.sh" <<'EOF2'
echo "job=$TORCHELASTIC_RUN_ID rank=$RANK world=$WORLD_SIZE node=$GROUP_RANK"
EOF2
for job in alpha beta; do
  for node in 0 1; do
    start_dl "$job$node" 30 --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "127.0.0.1:$port" \
      --rdzv-id "$job" --rdzv-conf is_host=0 -- sh "$TMP/who.sh"
  done
done
for job in alpha beta; do
  ranks=""
  for node in 0 1; do
    wait_dl "$job$node"
    expect_rc 0 "job $job, node $node"
    ranks+=$(sed -nE "s/.*job=$job rank=([0-9]) world=4 node=[01]$/\1/p" "$OUT")
  done
  assert_eq "$(echo "$ranks" | grep -o . | sort | tr -d '\n')" "0123" "the ranks of job $job"
done
assert_file_matches "$TMP/daemon.err" "job 'alpha' finished on 2 nodes" "the daemon's log of alpha"
assert_file_matches "$TMP/daemon.err" "job 'beta' finished on 2 nodes" "the daemon's log of beta"

kill -TERM "$(dl_pid daemon)"
wait_dl daemon
expect_rc 0 "the coordinator after SIGTERM"

run_dl 10 coordinator --listen "127.0.0.1:$port" --nproc-per-node 2
expect_rc 2 "a launcher flag given to the coordinator"
assert_eq "$(wc -l <"$ERR")" "1" "lines on stderr for a bad coordinator flag"
assert_file_matches "$ERR" "^dlaunch coordinator: '--nproc-per-node' is not a coordinator flag" "the message"
run_dl 10 coordinator
expect_rc 2 "the coordinator without --listen"
assert_file_matches "$ERR" "^dlaunch coordinator: --listen: required" "the message"

wait_for 5 no_marked_processes
assert_no_leftovers "after the coordinator jobs"
pass
