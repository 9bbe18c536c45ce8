#!/usr/bin/env bash
# --max-restarts restarts the whole local group with TORCHELASTIC_RESTART_COUNT
# incremented; --log-dir writes per-rank files; -r/--redirects keeps a stream off
# the console; --local-ranks-filter shows only some ranks; SIGUSR1 is forwarded.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"

# Rank 1 fails in the first generation only.
cat >"$TMP/flaky.sh" <<'EOF2'
echo "rank $RANK generation $TORCHELASTIC_RESTART_COUNT of max $TORCHELASTIC_MAX_RESTARTS"
if [ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exit 5; fi
exit 0
EOF2
run_dl 30 --nproc-per-node 2 --max-restarts 1 -- sh "$TMP/flaky.sh"
expect_rc 0 "a job whose only failure is retried"
assert_file_matches "$OUT" '^\[1\]: rank 1 generation 0 of max 1$' "first generation"
assert_file_matches "$OUT" '^\[0\]: rank 0 generation 1 of max 1$' "rank 0 restarted"
assert_file_matches "$OUT" '^\[1\]: rank 1 generation 1 of max 1$' "rank 1 restarted"

# With no restart left, the failure's code comes back.
run_dl 30 --nproc-per-node 2 --max-restarts 0 -- sh "$TMP/flaky.sh"
expect_rc 5 "the same job without restarts"

# Logs: per-rank files under DIR/RUN_ID/attempt_N/LOCAL_RANK/, stdout redirected
# away from the console for every rank, stderr still shown.
cat >"$TMP/talk.sh" <<'EOF2'
echo "out of $RANK"
echo "err of $RANK" >&2
EOF2
run_dl 30 --nproc-per-node 2 --rdzv-id job7 --log-dir "$TMP/logs" -r 1 -- sh "$TMP/talk.sh"
expect_rc 0 "a job with --log-dir"
for r in 0 1; do
  assert_eq "$(cat "$TMP/logs/job7/attempt_0/$r/stdout.log")" "out of $r" "rank $r's stdout.log"
  assert_eq "$(cat "$TMP/logs/job7/attempt_0/$r/stderr.log")" "err of $r" "rank $r's stderr.log"
  assert_file_matches "$ERR" "^\[$r\]: err of $r$" "rank $r's stderr on the console"
done
if grep -q "out of" "$OUT"; then fail_run "-r 1 should keep stdout off the console"; fi

# Only local rank 1 on the console.
run_dl 30 --nproc-per-node 3 --local-ranks-filter 1 -- sh "$TMP/talk.sh"
expect_rc 0 "a job with --local-ranks-filter"
assert_eq "$(cat "$OUT")" "[1]: out of 1" "the console with --local-ranks-filter 1"

# SIGUSR1 reaches every worker, and the job carries on to a clean exit.
cat >"$TMP/usr1.sh" <<EOF2
trap 'echo "usr1 at \$RANK"; exit 0' USR1
echo ready > "$TMP/ready.\$RANK"
i=0; while [ \$i -lt 200 ]; do "$TMP/bin/sleep" 0.05; i=\$((i+1)); done
exit 9
EOF2
timeout -k 5 30 "$DLAUNCH" --nproc-per-node 2 -- sh "$TMP/usr1.sh" >"$TMP/usr1.out" 2>&1 </dev/null &
pid=$!
track_pid "$pid"
# shellcheck disable=SC2317  # called through wait_for
both_ready() { [[ -f $TMP/ready.0 && -f $TMP/ready.1 ]]; }
wait_for 10 both_ready || fail "the SIGUSR1 workers never started"
dl=$(pgrep -P "$pid" | head -n 1)
kill -USR1 "$dl"
wait "$pid"
rc=$?
[[ $rc == 0 ]] || { cat "$TMP/usr1.out" >&2; fail "SIGUSR1 job: expected exit 0, got $rc"; }
assert_file_matches "$TMP/usr1.out" '^\[0\]: usr1 at 0$' "rank 0 got SIGUSR1"
assert_file_matches "$TMP/usr1.out" '^\[1\]: usr1 at 1$' "rank 1 got SIGUSR1"

wait_for 5 no_marked_processes
assert_no_leftovers "after the restart and log jobs"
pass
