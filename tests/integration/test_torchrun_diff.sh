#!/usr/bin/env bash
# ctest: LABELS=slow PROCESSORS=2 RESOURCE_LOCK=port29400
# A differential test against the real torchrun (Debian's PyTorch 1.13): the
# same worker under torchrun and under dlaunch, over the command lines users
# write (both spellings, PET_* variables, -m, --no-python, --run-path,
# restarts, --log-dir with --redirects and --tee, --standalone, two static and
# two elastic nodes on this machine, python -m torch.distributed.launch). Every
# worker's environment, argv, interpreter and working directory, the files
# under --log-dir, the worker lines on the console and the exit status must be
# torchrun's, except for the differences tools/torchrun_diff.py names (each
# one is in docs/migration.md). Arguments after the binary pick cases by name.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch
"$PY" -c 'import torch.distributed.run, torch.distributed.launch' 2>/dev/null ||
  skip "$PY has no torch.distributed.run (torchrun)"

tools=$SRC/tests/integration/tools
# Under $TMP, so that every launcher's and worker's command line carries MARK.
cp "$tools/torchrun_diff.py" "$tools/torchrun_py311.py" "$TMP/" || fail "cannot copy the tools to $TMP"
mkdir -p "$TMP/work" "$TMP/runs" "$TMP/tmp"
chmod 700 "$TMP/tmp"
cp "$tools/diff_worker.py" "$TMP/work/" || fail "cannot copy diff_worker.py"
# For `--no-python sh run_worker.sh`: a shell script that runs the worker.
cat >"$TMP/work/run_worker.sh" <<'SHEOF'
exec /usr/bin/python3 "$(dirname "$0")/diff_worker.py" "$@"
SHEOF

# One Python program runs the cases in parallel (each its own ports, dump and
# log directories) and compares; it prints one line per case and one per
# difference. Its own guard per launcher run is 60 s; this one is for all.
shift
timeout -k 5 280 "$PY" "$TMP/torchrun_diff.py" "$DLAUNCH" "$TMP" "$@" >"$TMP/diff.out" 2>"$TMP/diff.err"
rc=$?
cat "$TMP/diff.out" >&2
[[ $rc == 0 ]] || {
  tail -n 20 "$TMP/diff.err" >&2
  fail "dlaunch differs from torchrun (exit code $rc; the differences are listed above)"
}
wait_for 5 no_marked_processes
assert_no_leftovers "after the torchrun/dlaunch runs"
pass
