#!/usr/bin/env bash
# per-test-reports.sh NAME COMMAND...: runs one test's COMMAND with the
# sanitizers' reports going to $DLAUNCH_SANITIZER_REPORTS/NAME/report.<pid>, so
# that tests running in parallel keep them apart (scripts/test.sh's asan stage).
# The sanitized build (DLAUNCH_SANITIZE) puts it in front of every test; without
# DLAUNCH_SANITIZER_REPORTS it runs COMMAND unchanged.
name=$1
shift
if [[ -n ${DLAUNCH_SANITIZER_REPORTS:-} ]]; then
  dir=$DLAUNCH_SANITIZER_REPORTS/$name
  mkdir -p "$dir"
  # A later log_path overrides an earlier one.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$dir/report"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$dir/report"
fi
exec "$@"
