#!/usr/bin/env bash
# Finding 2 of issue 9: an agent started before its host must wait, not spin.
#   `dlaunch --nnodes 2 --rdzv-endpoint 127.0.0.1:PORT --rdzv-conf is_host=0,join_timeout=5`
#   with nothing listening on PORT:
#   - uses under 0.3 s of CPU (user + system, measured by wait4 on its exit)
#     over its ~5 s life: retries back off instead of reconnecting ~1,750
#     times a second;
#   - exits non-zero (not a signal death) when join_timeout ends the wait
#     (before the run's 20 s guard), with one line on stderr, naming the
#     endpoint;
#   - under an ASan build, prints no "AddressSanitizer" report (the stale
#     retry timer used to write to a dead stack variable).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN

JOIN_TIMEOUT=5
CPU_LIMIT=0.3
# Under ASan (scripts/test.sh sets DLAUNCH_SANITIZED) start-up alone takes about
# 0.4 s of CPU; a spinning agent still takes several seconds, so 1.5 s catches it.
[[ -n ${DLAUNCH_SANITIZED:-} ]] && CPU_LIMIT=1.5

# cpu_run SECS CMD...: run_cmd CMD under a python wrapper that waits for it
# with wait4 and writes its user+system CPU seconds to $TMP/cpu.
cpu_run() {
  local secs=$1
  shift
  run_cmd "$secs" "$PY" -c '
import os, subprocess, sys
p = subprocess.Popen(sys.argv[2:])
_, status, ru = os.wait4(p.pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{ru.ru_utime + ru.ru_stime:.3f} {ru.ru_utime:.3f} {ru.ru_stime:.3f}\n")
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
' "$TMP/cpu" "$@"
}

check_waiting_agent() {
  local what=$1 endpoint=$2
  local cpu user sys
  read -r cpu user sys <"$TMP/cpu" || fail_run "$what: the CPU time of dlaunch was not recorded"
  log "$what: exit $RC after ${ELAPSED}s, CPU ${cpu}s (user $user, system $sys)"
  if grep -q AddressSanitizer "$ERR"; then
    grep -m1 -A12 AddressSanitizer "$ERR" | cut -c1-200 >&2
    fail "$what: AddressSanitizer reported an error (above); finding 2's stale retry timer?"
  fi
  exited_badly "$RC" || fail_run "$what: expected dlaunch to give up with a non-zero exit of its own (not 0, not a signal or the test's timeout), got $RC"
  le "$cpu" "$CPU_LIMIT" ||
    fail_run "$what: a waiting agent used ${cpu}s of CPU (user $user, system $sys) in ${ELAPSED}s; expected under ${CPU_LIMIT}s (it spins instead of backing off: finding 2)"
  local lines
  lines=$(grep -c . "$ERR")
  [[ $lines == 1 ]] || fail_run "$what: expected exactly one line on stderr, got $lines"
  assert_file_matches "$ERR" "^dlaunch: .*$endpoint" "$what: the line names the endpoint"
  [[ -s $OUT ]] && fail_run "$what: no worker should have started"
  return 0
}

port=$(free_port)
endpoint=127.0.0.1:$port
cpu_run 20 "$DLAUNCH" --nnodes 2 --rdzv-endpoint "$endpoint" --rdzv-id "wait-$$" \
  --rdzv-conf "is_host=0,join_timeout=$JOIN_TIMEOUT" -- "$TMP/bin/sleep" 0
check_waiting_agent "nothing listening" "$endpoint"
log "nothing listening: stderr: $(head -c 300 "$ERR")"

wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
