#!/usr/bin/env bash
# Mutual authentication (protocol 3): an agent that holds a token believes no
# coordinator that has not proven it holds the token too. A fake coordinator
# (tests/integration/rdzv_fake_coordinator.py, on 127.0.0.1) answers the agent's
# Hello with an empty Challenge, with a wrong proof, or with no Challenge at all,
# then offers an Assignment with MASTER_ADDR 127.66.66.66. Each time the agent
# must exit non-zero at once (its join_timeout, 600 s by default, is far beyond
# the 20 s guard) with one exact line, and never start a
# worker against that master.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN

FAKE=$SRC/tests/integration/rdzv_fake_coordinator.py
cp "$FAKE" "$TMP/fake.py"  # under $TMP, so the exit trap finds it

for mode in empty wrongproof nochallenge; do
  rm -f "$TMP/port"
  "$PY" "$TMP/fake.py" "$TMP/port" "$mode" >"$TMP/fake-$mode.log" 2>&1 &
  fake=$!
  wait_for 10 test -s "$TMP/port" || fail "the fake coordinator did not start: $(cat "$TMP/fake-$mode.log")"
  port=$(cat "$TMP/port")
  # shellcheck disable=SC2016  # expanded by the worker's shell
  run_dl 20 --nnodes 2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id x --rdzv-conf is_host=0 \
    --rdzv-token T -- sh -c 'echo MASTER=$MASTER_ADDR'
  prefix="dlaunch: rendezvous 127.0.0.1:$port"
  case $mode in
    empty) want="$prefix: the coordinator did not prove it holds the token (it sent no challenge)" ;;
    wrongproof) want="$prefix: the coordinator did not prove it holds the token (its proof does not match this agent's token)" ;;
    # An assignment in the handshake is refused by the agent's states, token or not.
    nochallenge) want="$prefix: the peer at 127.0.0.1:$port is not a dlaunch coordinator (it sent assignment before a challenge)" ;;
  esac
  if grep -q "MASTER=127.66.66.66" "$OUT"; then
    fail_run "$mode: the agent ran a worker against the fake coordinator's master"
  fi
  [[ $RC != 0 && $RC != 124 && $RC != 137 ]] || fail_run "$mode: expected a non-zero exit of its own"
  grep -qxF -- "$want" "$ERR" || fail_run "$mode: expected the line '$want'"
  kill "$fake" 2>/dev/null
  wait "$fake" 2>/dev/null
done

wait_for 5 no_marked_processes
assert_no_leftovers "after the fake coordinators"
pass
