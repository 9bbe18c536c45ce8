#!/usr/bin/env bash
# ctest: LABELS=slow
# dlaunch status / dlaunch stacks for a whole multi-node job, from the machine
# that hosts its coordinator: the host asks every node through the coordinator.
#   1. 2 rendezvous nodes x 2 ranks on 127.0.0.1 and 127.0.0.2, node 1 with its
#      own XDG_RUNTIME_DIR (its socket unseen): `status RUN_ID` shows ranks 0-3
#      with live pids on node ranks 0 and 1, each once; `stacks RUN_ID` shows
#      every rank's stack; both nodes then exit 0;
#   2. node 1's dlaunch SIGSTOPped: `status RUN_ID` answers with node 0's
#      ranks and names node 1 as not answering within 2 s; after SIGCONT the
#      job ends 0 and nothing is left running;
#   3. a head launch over -H 127.0.0.1:2,127.0.0.2:2 (its agents' own sockets in
#      the same directory): `status` lists the job once with 4 ranks, and
#      `status RUN_ID` shows each of the 4 ranks once.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
export TMPDIR=$TMP  # run directories kept for their stacks (hang reports) go with the test
require_python
unset DLAUNCH_RDZV_TOKEN

export XDG_RUNTIME_DIR=$TMP/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR" "$TMP/xdg1"

cp "$SRC/tests/integration/tools/status_worker.py" "$TMP/work.py"
line=$(grep -n WAIT_LINE "$TMP/work.py" | cut -d: -f1)

# start_node NAME I ID: rendezvous node I (of 2) on 127.0.0.(I+1); node 0 hosts
# the coordinator, node 1 keeps its socket in $TMP/xdg1.
start_node() {
  local name=$1 i=$2 id=$3 wrap=""
  [[ $i == 1 ]] && wrap="env XDG_RUNTIME_DIR=$TMP/xdg1"
  start_dl_wrapped "$name" 120 "$wrap" --nnodes 2 --node-rank "$i" --nproc-per-node 2 \
    --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "$id" --local-addr "127.0.0.$((i + 1))" \
    --rdzv-conf "is_host=$((1 - i))" -- "$PY" "$TMP/work.py"
}

# check_rows FILE RANKS...: one row for each rank, a live worker's pid, node rank = rank / 2.
check_rows() {
  local file=$1 r row pid
  shift
  for r in "$@"; do
    [[ $(awk -v r="$r" '$1 ~ /^[0-9]+$/ && $3 == r' "$file" | wc -l) == 1 ]] || fail_run "status: expected one row for rank $r"
    row=$(awk -v r="$r" '$1 ~ /^[0-9]+$/ && $3 == r' "$file")
    [[ $(awk '{print $1}' <<<"$row") == $((r / 2)) ]] || fail_run "status: rank $r is not on node $((r / 2)): '$row'"
    pid=$(awk '{print $5}' <<<"$row")
    kill -0 "$pid" 2>/dev/null || fail_run "status: rank $r's pid '$pid' is not alive"
    [[ $(tr '\0' ' ' <"/proc/$pid/cmdline") == *work.py* ]] || fail_run "status: pid $pid of rank $r is not the worker"
    [[ $row == *"rank $r tick "* ]] || fail_run "status: rank $r's last line is not its own ('$row')"
  done
}

both_ticking() { file_has "$TMP/$1.out" "rank 1 tick 1" && file_has "$TMP/$2.out" "rank 3 tick 1"; }

# ---------------------------------------------------------------------------
# 1. The whole job from the host's socket.
port=$(free_port)
id="sm1-$$"
export RUN_S=60 STOP_FILE=$TMP/stop-sm1  # tools/status_worker.py: runs until the test is done with it
start_node h1 0 "$id"
start_node p1 1 "$id"
unset RUN_S STOP_FILE
wait_for 20 both_ticking h1 p1 || { show_nodes h1; show_nodes p1; fail "sm1: no output from both nodes"; }
compgen -G "$TMP/xdg1/dlaunch/$id.*.sock" >/dev/null || fail "sm1: node 1 has no socket of its own in $TMP/xdg1"
run_dl 30 status "$id"
expect_rc 0 "status $id"
assert_file_matches "$OUT" "^run $id \(dlaunch pid [0-9]+\), started 20[0-9-]+T[0-9:]+Z: $PY $TMP/work.py$" "status: the job's line"
[[ $(grep -c ' tick ' "$OUT") == 4 ]] || fail_run "status: expected 4 rows"
check_rows "$OUT" 0 1 2 3
grep -q '^missing:' "$OUT" && fail_run "status: a node is named missing"
run_dl 40 stacks "$id"
expect_rc 0 "stacks $id"
assert_file_matches "$OUT" "^stacks: ranks 0-3 \(4\) wait in wait_here \(work.py:$line\) <- main \(work.py:[0-9]+\)" \
  "stacks: the grouped summary over both nodes"
for r in 0 1 2 3; do assert_file_matches "$OUT" "^=== rank $r \(pid [0-9]+\), by python$" "stacks: rank $r's stack"; done
grep -q '^missing:' "$OUT" && fail_run "stacks: a node is named missing"
touch "$TMP/stop-sm1"
for n in h1 p1; do
  wait_dl "$n"
  expect_rc 0 "$n after status and stacks"
done
for r in 0 1; do assert_file_matches "$TMP/h1.out" "^\[$r\]: rank $r done$" "rank $r finished"; done
for r in 2 3; do assert_file_matches "$TMP/p1.out" "^\[$r\]: rank $r done$" "rank $r finished"; done
wait_for 10 no_marked_processes
assert_no_leftovers "after case 1"

# ---------------------------------------------------------------------------
# 2. A node that does not answer is named.
port=$(free_port)
id="sm2-$$"
export RUN_S=60 STOP_FILE=$TMP/stop-sm2
start_node h2 0 "$id"
start_node p2 1 "$id"
unset RUN_S STOP_FILE
wait_for 20 both_ticking h2 p2 || { show_nodes h2; show_nodes p2; fail "sm2: no output from both nodes"; }
peer=$(dl_pid p2)
[[ -n $peer ]] || fail "sm2: no dlaunch pid for node 1"
kill -STOP "$peer"
run_dl 30 status "$id"
kill -CONT "$peer"
expect_rc 0 "status $id with node 1 stopped"
[[ $(grep -c ' tick ' "$OUT") == 2 ]] || fail_run "status: expected node 0's 2 rows"
check_rows "$OUT" 0 1
assert_file_matches "$OUT" "^missing: node 1 \([^)]+\), ranks 2-3: no answer within 2s$" "status: node 1 named"
touch "$TMP/stop-sm2"
for n in h2 p2; do
  wait_dl "$n"
  expect_rc 0 "$n after node 1 was stopped and continued"
done
wait_for 10 no_marked_processes
assert_no_leftovers "after case 2"

# ---------------------------------------------------------------------------
# 3. A head launch serves the whole job too.
id="sm3-$$"
export RUN_S=60 STOP_FILE=$TMP/stop-sm3
start_dl head 120 -H 127.0.0.1:2,127.0.0.2:2 --rdzv-id "$id" -- "$PY" "$TMP/work.py"
unset RUN_S STOP_FILE
four_ticking() { for r in 0 1 2 3; do file_has "$TMP/head.out" "rank $r tick 1" || return 1; done; }
wait_for 30 four_ticking || { show_nodes head; fail "sm3: no output from 4 ranks"; }
run_dl 5 status
expect_rc 0 "status (the list) of a head launch"
[[ $(grep -c "^$id " "$OUT") == 1 ]] || fail_run "status: expected the head's job listed once"
assert_file_matches "$OUT" "^$id +[0-9]+ +4 " "status: the head's job with 4 ranks"
run_dl 5 status "$id"
expect_rc 0 "status $id of a head launch"
[[ $(grep -c ' tick ' "$OUT") == 4 ]] || fail_run "status: expected 4 rows from the head"
check_rows "$OUT" 0 1 2 3
touch "$TMP/stop-sm3"
wait_dl head
expect_rc 0 "the head launch"
wait_for 10 no_marked_processes
assert_no_leftovers "at the end"
pass
