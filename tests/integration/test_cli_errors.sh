#!/usr/bin/env bash
# Bad usage: exit 2 and exactly one stderr line, `dlaunch: ...`, naming the flag
# and the value. A command that does not exist: exit 127, naming it.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

# usage_error WHAT NEEDLE... -- DLAUNCH-ARGS...
#   expects exit 2, one stderr line starting "dlaunch: " containing every NEEDLE,
#   nothing on stdout and no worker started.
usage_error() {
  local what=$1
  shift
  local needles=()
  while (($#)) && [[ $1 != "--" ]]; do needles+=("$1"); shift; done
  shift
  run_dl 15 "$@"
  expect_rc 2 "$what"
  local n line
  n=$(wc -l <"$ERR")
  line=$(head -n 1 "$ERR")
  [[ $n == 1 ]] || fail_run "$what: expected exactly one line on stderr, got $n"
  [[ $line == "dlaunch: "* ]] || fail_run "$what: stderr should start with 'dlaunch: ', got '$line'"
  local needle
  for needle in "${needles[@]}"; do
    assert_contains "$line" "$needle" "$what: the message"
  done
  [[ ! -s $OUT ]] || fail_run "$what: expected nothing on stdout"
  [[ ! -e $TMP/worker-ran ]] || fail "$what: a worker ran although the command line is invalid"
}

# A worker command that would leave a trace if it ever ran.
W=(-- bash -c "touch $TMP/worker-ran")

usage_error "--nproc-per-node 0" --nproc-per-node 0 -- --nproc-per-node 0 "${W[@]}"
usage_error "--nproc-per-node -3" --nproc-per-node -3 -- --nproc-per-node -3 "${W[@]}"
usage_error "--nproc-per-node abc" --nproc-per-node abc -- --nproc-per-node abc "${W[@]}"
usage_error "--nproc_per_node=abc" nproc abc -- --nproc_per_node=abc "${W[@]}"
usage_error "misspelt --nproc-per-nod" "--nproc-per-nod" "did you mean '--nproc-per-node'" -- \
  --nproc-per-nod 2 "${W[@]}"
usage_error "no command" -- --nproc-per-node 2
usage_error "no command after --" -- --nproc-per-node 2 --
usage_error "unwritable --log-dir" --log-dir /proc/nonexistent/x -- \
  --nproc-per-node 2 --log-dir /proc/nonexistent/x "${W[@]}"
usage_error "--local-ranks-filter 5 with 2 processes" --local-ranks-filter 5 -- \
  --nproc-per-node 2 --local-ranks-filter 5 "${W[@]}"

# --master-port that something else already listens on.
"$PY" -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
time.sleep(60)
' "$MARK" >"$TMP/port" &
LISTENER=$!
track_pid "$LISTENER"
# shellcheck disable=SC2317  # called through wait_for
port_ready() { [[ -s $TMP/port ]]; }
wait_for 10 port_ready || fail "the port-holding listener did not start"
port=$(cat "$TMP/port")
usage_error "--master-port $port (in use)" --master-port "$port" -- \
  --nproc-per-node 2 --master-port "$port" "${W[@]}"

kill -KILL "$LISTENER" 2>/dev/null
wait "$LISTENER" 2>/dev/null

# Command not found: 127, naming the command.
missing=no-such-command-$RANDOM$RANDOM
for cmd in "$missing" "$TMP/$missing"; do
  run_dl 15 --nproc-per-node 2 -- "$cmd" arg
  expect_rc 127 "command '$cmd' not found"
  grep -q "^dlaunch: .*$cmd" "$ERR" || fail_run "command '$cmd' not found: no 'dlaunch: ' line naming it on stderr"
done

# A known-good control, so the cases above fail for the reason they claim.
run_dl 15 --nproc-per-node 2 -- bash -c "touch $TMP/worker-ran"
expect_rc 0 "the control run"
[[ -e $TMP/worker-ran ]] || fail_run "the control run did not run its worker"

wait_for 5 no_marked_processes
assert_no_leftovers "after the usage errors"
pass
