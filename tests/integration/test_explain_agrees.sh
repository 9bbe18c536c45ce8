#!/usr/bin/env bash
# ctest: LABELS=quick
# `dlaunch --explain ARGS` refuses exactly what `dlaunch ARGS` refuses: the same
# exit code and the same line, since both go through Decide and the command's
# lookup. A run that is refused before any worker starts gives the
# explain its code (2, 126 or 127) and its line; a run that succeeds gives 0.
# Each row once failed: the explain returned before the run's last checks, or
# the run checked the endpoint, the run id and the command only after Decide.
# --explain makes no directory and opens no file, yet refuses a --log-dir or
# an --events path that the run could not make (under /proc, below a file),
# with the run's line: both ask the same checks before making anything.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

PORT=$(free_port)
printf 'x\n' >"$TMP/not-executable"
chmod 0644 "$TMP/not-executable"
ROWS=(
  "0|--nproc-per-node 2 -- true"
  "0|--log-dir $TMP/logs --rdzv-id run1 -- true"
  "0|--nnodes 1 --rdzv-endpoint 127.0.0.1:$PORT -- true"
  "0|--nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port $PORT -- true"
  "2|--local-ranks-filter 5 --nproc-per-node 2 -- true"
  "2|--nnodes 2 --rdzv-endpoint 127.0.0.1:1 --rdzv-token-file $TMP/no-such-token -- true"
  "2|--nnodes 2 --rdzv-endpoint foo:99999 -- true"
  "2|--nnodes 2 --rdzv-endpoint :x -- true"
  "2|--rdzv-id a/b --log-dir $TMP/logs -- true"
  "2|--nnodes 2 --rdzv-endpoint 127.0.0.1:1 --rdzv-id .. --log-dir $TMP/logs -- true"
  "2|--nproc-per-node gpu -- true"
  "2|--nproc-per-node 3 --roles chief:1,worker:1 -- true"
  "2|--nnodes 2 --rdzv-endpoint 127.0.0.1:1 --rdzv-conf join_timeout=0 -- true"
  "2|--nproc-per-node 2 --tag-output={no_such_field} -- true"
  "2|--log-dir /proc/dlaunch-it-$$/logs -- true"
  "2|--log-dir $TMP/not-executable -- true"
  "2|--log-dir $TMP/not-executable/below -- true"
  "2|--events /proc/dlaunch-it-$$.jsonl -- true"
  "2|--events $TMP/no-such-dir/events.jsonl -- true"
  "2|--events $TMP -- true"
  "127|-- $TMP/no-such-program"
  "126|-- $TMP/not-executable"
)
for row in "${ROWS[@]}"; do
  want=${row%%|*}
  read -r -a args <<<"${row#*|}"
  run_cmd 20 env CUDA_VISIBLE_DEVICES= "$DLAUNCH" "${args[@]}"
  expect_rc "$want" "dlaunch ${args[*]}"
  run_line=$(grep -m1 '^dlaunch: ' "$ERR" || true)
  run_cmd 20 env CUDA_VISIBLE_DEVICES= "$DLAUNCH" --explain "${args[@]}"
  expect_rc "$want" "dlaunch --explain ${args[*]}"
  if [[ $want != 0 ]]; then
    assert_eq "$(head -n 1 "$ERR")" "$run_line" "dlaunch --explain ${args[*]}: the refusal"
    [[ ! -s $OUT ]] || fail_run "dlaunch --explain ${args[*]}: printed a plan although it refuses"
  else
    assert_contains "$(cat "$OUT")" "mode: " "dlaunch --explain ${args[*]}: the plan"
  fi
done

# What the run would make, --explain leaves unmade.
run_cmd 20 env CUDA_VISIBLE_DEVICES= "$DLAUNCH" --explain --log-dir "$TMP/unmade/logs" --events "$TMP/unmade.jsonl" -- true
expect_rc 0 "dlaunch --explain with a new --log-dir and --events"
[[ -e $TMP/unmade || -e $TMP/unmade.jsonl ]] && fail "--explain made the --log-dir or the --events file"
pass
