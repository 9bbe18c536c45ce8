#!/usr/bin/env bash
# ctest: LABELS=quick
# One rank fails: the others are torn down, dlaunch exits with that rank's code
# (128+N for a signal) and names it in a root-cause line.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"

# Rank $FAIL_RANK records its pid and fails as $FAIL_HOW says; the others sleep.
cat >"$TMP/worker.sh" <<EOF2
echo "\$\$" >"$TMP/pid.\$RANK"
if [ "\$RANK" = "\$FAIL_RANK" ]; then
  "$TMP/bin/sleep" 0.5
  case "\$FAIL_HOW" in
    exit3) exit 3 ;;
    kill9) kill -9 \$\$ ;;
  esac
fi
"$TMP/bin/sleep" 60
EOF2

# check_failure RANK CODE VERDICT-REGEX
check_failure() {
  local rank=$1 code=$2 verdict=$3
  expect_rc "$code" "rank $rank failing ($FAIL_HOW)"
  [[ $(awk -v e="$ELAPSED" 'BEGIN{print (e < 8)}') == 1 ]] ||
    fail_run "rank $rank failing: dlaunch took ${ELAPSED}s to exit; the other ranks should get SIGTERM at once"
  local pid
  pid=$(cat "$TMP/pid.$rank" 2>/dev/null) || fail_run "rank $rank never started"
  local re="^dlaunch: root cause: rank $rank \(local_rank $rank, pid $pid\) $verdict after [0-9]+\.[0-9]{2}s\$"
  grep -Eq -- "$re" "$ERR" || fail_run "stderr has no root-cause line matching /$re/"
  local n
  n=$(grep -c '^dlaunch: root cause: ' "$ERR")
  [[ $n == 1 ]] || fail_run "expected exactly one root-cause line, got $n"
  wait_for 3 no_marked_processes
  assert_no_leftovers "after rank $rank failed ($FAIL_HOW)"
}

export FAIL_RANK=1 FAIL_HOW=exit3
run_dl 60 --nproc-per-node 4 -- bash "$TMP/worker.sh"
check_failure 1 3 "exited with code 3"

rm -f "$TMP"/pid.*
export FAIL_RANK=2 FAIL_HOW=kill9
run_dl 60 --nproc-per-node 4 -- bash "$TMP/worker.sh"
check_failure 2 137 "was killed by SIGKILL"

pass
