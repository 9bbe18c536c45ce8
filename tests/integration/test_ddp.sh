#!/usr/bin/env bash
# ctest: PROCESSORS=2
# Four ranks of examples/ddp_train.py (real PyTorch DDP over gloo on CPU) under
# dlaunch: the job exits 0 and every rank reports identical parameters.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch

script=$SRC/examples/ddp_train.py
[[ -f $script ]] || fail "missing $script"
# The copy under $TMP carries the marker into every worker's command line.
cp "$script" "$TMP/ddp_train.py"

run_dl 100 --nproc-per-node 4 -- "$PY" -u "$TMP/ddp_train.py" --epochs 2 --steps 10
expect_rc 0 "4-rank DDP job"

for r in 0 1 2 3; do
  assert_file_matches "$OUT" "^\[$r\]: rank $r: params in sync, checksum -?[0-9]+\.[0-9]+$" \
    "rank $r's verdict (tagged '[$r]: ')"
done
n_sums=$(sed -nE 's/^\[[0-9]+\]: rank [0-9]+: params in sync, checksum (.*)$/\1/p' "$OUT" | sort -u | wc -l)
[[ $n_sums == 1 ]] || fail_run "ranks disagree on the parameter checksum ($n_sums distinct values)"
assert_file_matches "$OUT" '^\[0\]: summary: world_size 4, .*all ranks in sync' "rank 0's summary"
if grep -q 'OUT OF SYNC' "$OUT"; then fail_run "a rank reported parameters out of sync"; fi

wait_for 5 no_marked_processes
assert_no_leftovers "after the DDP job"
pass
