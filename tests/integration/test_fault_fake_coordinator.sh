#!/usr/bin/env bash
# Finding 3 of issue 9: an agent with a token authenticates the coordinator.
# tools/fake_coordinator.py takes the endpoint without knowing the token and
# tries to hand the agent an Assignment whose MASTER_ADDR is 10.66.66.66 (no
# traffic goes there: the worker only prints its environment).
#   a. the fake answers the Hello with an empty Challenge (what a coordinator
#      without a token sends);
#   b. the fake answers with a random nonce and a random proof.
# In both, the agent (is_host=0, DLAUNCH_RDZV_TOKEN set) must:
#   - exit non-zero of its own, at once: its join_timeout (600 s) is far
#     beyond the run's guard (20 s), so an agent that waits it out hangs;
#   - start no worker (nothing on stdout, no MASTER_ADDR=10.66.66.66);
#   - say "rendezvous 127.0.0.1:PORT: the coordinator did not prove it holds
#     the token (...)" (the shared decision's text);
#   - send no Join to the fake (it refuses before it reveals its addresses).
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

export DLAUNCH_RDZV_TOKEN=fake-secret-$$-$RANDOM
cat >"$TMP/worker.sh" <<EOF
#!/bin/sh
echo "worker started: MASTER_ADDR=\$MASTER_ADDR"
EOF
chmod +x "$TMP/worker.sh"

run_case() {
  local c=$1 mode=$2 port endpoint
  port=$(free_port)
  endpoint=127.0.0.1:$port
  timeout -k 5 30 "$PY" "$SRC/tests/integration/tools/fake_coordinator.py" --port "$port" --mode "$mode" \
    --src "$SRC" --seconds 20 "$MARK" >"$TMP/fake$c.out" 2>&1 &
  local fake=$!
  track_pid "$fake"
  wait_for 10 port_listening "$port" || { cat "$TMP/fake$c.out" >&2; fail "case $c: the fake coordinator did not listen"; }
  run_dl 20 --nnodes 2 --rdzv-endpoint "$endpoint" --rdzv-id "fake-$c-$$" \
    --rdzv-conf is_host=0,join_timeout=600 -- "$TMP/worker.sh"
  kill "$fake" 2>/dev/null
  wait "$fake" 2>/dev/null
  log "case $c ($mode challenge): agent exited $RC after ${ELAPSED}s; the fake saw: $(grep -E 'got|sent|closed' "$TMP/fake$c.out" | sed 's/^fake: //' | tr '\n' ',' | cut -c1-200)"
  local problems=""
  exited_badly "$RC" || problems+=" the agent exited $RC (expected a non-zero exit of its own);"
  [[ -s $OUT ]] && problems+=" it started a worker ($(head -n 1 "$OUT"));"
  grep -q '^fake: got join' "$TMP/fake$c.out" && problems+=" it sent its Join to the fake;"
  grep -Eq "rendezvous 127\.0\.0\.1:$port: the coordinator did not prove it holds the token" "$ERR" ||
    problems+=" no line 'rendezvous $endpoint: the coordinator did not prove it holds the token (...)';"
  if [[ -n $problems ]]; then
    cat "$TMP/fake$c.out" >&2
    show_run
    printf 'FAIL: %s: case %s: a coordinator without the token (%s challenge) was trusted:%s\n' "$TEST_NAME" "$c" "$mode" "$problems" >&2
    FAILED+=" $c"
  fi
}

FAILED=""
run_case a empty
run_case b bogus
[[ -z $FAILED ]] || fail "cases$FAILED failed (above)"
wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
