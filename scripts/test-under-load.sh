#!/usr/bin/env bash
# Runs the suite (scripts/test.sh, with any arguments) beside LOAD_PROCS
# (default 2) CPU-bound processes, as on a shared, noisy CI machine. They run at
# the suite's own priority, are bounded (LOAD_MAX_S, default 3600 s) and are
# stopped when the suite ends, however it ends. Exits with the suite's status.
#
#   bash scripts/test-under-load.sh             the whole suite under load
#   bash scripts/test-under-load.sh --quick     the quick tier
set -euo pipefail
cd "$(dirname "$0")/.."
n=${LOAD_PROCS:-2}
max_s=${LOAD_MAX_S:-3600}
pids=()
stop_load() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_load EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for ((i = 0; i < n; i++)); do
  # A busy loop in its own bash (no fork per iteration), killed by timeout at the bound.
  timeout "$max_s" bash -c 'while :; do :; done' &
  pids+=("$!")
done
echo "test-under-load: $n CPU-bound processes (${pids[*]}) beside the suite, at most ${max_s}s" >&2
start=$SECONDS
rc=0
bash scripts/test.sh "$@" || rc=$?
echo "test-under-load: the suite $( ((rc == 0)) && echo passed || echo FAILED) in $((SECONDS - start))s under load" >&2
exit "$rc"
