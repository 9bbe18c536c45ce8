#!/usr/bin/env bash
# ctest: LABELS=quick
# A worker inherits stdin, stdout and stderr from dlaunch and nothing else: not
# the live view's socket, not a hosted coordinator's listener, not MASTER_PORT's
# hold. Asio opens sockets without CLOEXEC, and a worker that held the live
# socket kept a killed dlaunch's `dlaunch status` socket answering (and reset).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

# The worker's descriptors, less the one os.listdir opens to read them. Without
# the stack hook, which opens its own dump file in the worker. Those dlaunch
# itself inherited stay behind too, as torchrun's (Popen's close_fds) do.
FDS='import os; fds = sorted(int(f) for f in os.listdir("/proc/self/fd")); print(" ".join(map(str, fds[:-1])))'
PORT=$(free_port)
for mode in "--nproc-per-node 1" "--nproc-per-node 2 --no-tag" "--nnodes 1 --rdzv-endpoint 127.0.0.1:$PORT --no-tag"; do
  read -r -a flags <<<"$mode"
  run_dl 30 "${flags[@]}" --no-python-hook -- "$PY" -c "$FDS" 7</dev/null
  expect_rc 0 "dlaunch $mode"
  while read -r line; do
    assert_eq "$line" "0 1 2" "dlaunch $mode: a worker's descriptors"
  done < <(grep -v '^dlaunch: ' "$OUT")
  [[ -s $OUT ]] || fail_run "dlaunch $mode: the worker printed nothing"
done
pass
