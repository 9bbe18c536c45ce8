#!/usr/bin/env bash
# ctest: LABELS=quick
# Hot spares and a lost node that is not the end, with real agents on loopback:
#   1. --nnodes 4 --spares 1: a fifth agent waits as a spare instead of being
#      refused. `kill -9` of one node's dlaunch mid-run: the next generation
#      takes the spare at once; the survivors keep their RANKs and the spare takes
#      the lost node's. The lost node's agent comes back while the spare runs: it
#      waits as a spare (exactly one of the two runs), and the job finishes 0.
#      The host's --events file holds the recovery events, every line valid
#      against docs/events.schema.json (checked as test_events.sh checks).
#   2. A script that crashes at step 0 on 2 nodes with --max-restarts 10
#      --max-no-progress-restarts 2 runs exactly 3 times and every dlaunch exits
#      123, dlaunch's "do not requeue" code.
#   3. A script that gets further each run (its step in DLAUNCH_PROGRESS_FILE)
#      and then crashes keeps restarting to --max-restarts and exits with the
#      worker's code: the host judged progress from both nodes' heartbeats.
#      With --restart-backoff each restart stands by first (a standby event).
#   4. --restart-backoff 1:1: a failure stands both nodes by (their workers
#      stopped, the agents still joined), and the next generation runs after
#      the wait and finishes 0.
#   5. A restart starts no worker anywhere while an old one still runs: rank 0
#      takes a second to exit on SIGTERM (a checkpoint), and rank 1's next
#      worker, on the other node, finds rank 0's old one gone when it starts.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"

"$PY" -c 'import jsonschema' 2>/dev/null || fail "$PY cannot import jsonschema (scripts/install-deps.sh installs python3-jsonschema)"
# check_events FILE WHAT KEY=COUNT...: every line of an --events file holds to
# docs/events.schema.json, which allows no field beyond the documented ones in
# a recovery event (a field renamed or added in the code fails here until
# docs/events.md follows), and the counts hold (tools/check_events.py).
check_events() {
  local file=$1 what=$2 out
  shift 2
  out=$("$PY" "$SRC/tests/integration/tools/check_events.py" "$SRC/docs/events.schema.json" "$file" "$@" 2>&1) ||
    { cut -c1-300 "$file" >&2; fail "$what: $(echo "$out" | head -n 8)"; }
}

mkdir -p "$TMP/rec"
# One record per (node, generation): which RANK this node's worker had. A
# generation-0 worker sleeps until torn down; a later one waits for `go`.
cat >"$TMP/worker.sh" <<EOF
#!/bin/sh
echo "\$RANK" >"$TMP/rec/\$NODE_NAME.g\$TORCHELASTIC_RESTART_COUNT"
if [ "\$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exec "$TMP/bin/sleep" 60; fi
i=0
while [ ! -e "$TMP/go" ] && [ \$i -lt 600 ]; do "$TMP/bin/sleep" 0.1; i=\$((i + 1)); done
EOF
chmod +x "$TMP/worker.sh"

port=$(free_port)
common=(--nnodes 4 --spares 1 --max-restarts 2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "spares-$$")
conf=last_call_timeout=1,heartbeat_timeout=3
start_dl_wrapped host 90 "env NODE_NAME=host" "${common[@]}" --rdzv-conf "is_host=1,$conf" \
  --events "$TMP/events.jsonl" -- "$TMP/worker.sh"
for n in a b c; do
  start_dl_wrapped "$n" 90 "env NODE_NAME=$n" "${common[@]}" --rdzv-conf "is_host=0,$conf" -- "$TMP/worker.sh"
done
gen_count() { find "$TMP/rec" -name "*.g$1" | wc -l; }
gen_on_four() { [[ $(gen_count "$1") == 4 ]]; }
spares_seen() { [[ $(grep -c '"event":"spare_waiting"' "$TMP/events.jsonl" 2>/dev/null) -ge $1 ]]; }
wait_for 30 gen_on_four 0 || { show_nodes host a b c; fail "generation 0 did not start on 4 nodes"; }
start_dl_wrapped spare 90 "env NODE_NAME=spare" "${common[@]}" --rdzv-conf "is_host=0,$conf" -- "$TMP/worker.sh"
wait_for 20 spares_seen 1 ||
  { show_nodes host spare; fail "the fifth agent should wait as a spare"; }
bg_running spare || { show_nodes spare; fail "the spare agent should be waiting, not gone"; }
# `dlaunch status` of the job says a spare waits.
run_dl 30 status "spares-$$"
expect_rc 0 "dlaunch status of the job"
assert_contains "$(cat "$OUT")" "spares: 1 waiting to replace a lost node" "dlaunch status of the job"

victim_rank=$(cat "$TMP/rec/b.g0")
kill -KILL "$(dl_pid b)"
wait_dl b 2>/dev/null  # bash reports the kill
wait_for 30 gen_on_four 1 ||
  { show_nodes host a c spare; fail "generation 1 did not start on 4 nodes (3 survivors and the spare)"; }
for n in host a c; do
  assert_eq "$(cat "$TMP/rec/$n.g1")" "$(cat "$TMP/rec/$n.g0")" "node $n's RANK after the spare replaced b"
done
assert_eq "$(cat "$TMP/rec/spare.g1")" "$victim_rank" "the spare's RANK (the lost node b's)"
file_has "$TMP/events.jsonl" '"event":"spare_promoted"' || fail "no spare_promoted event"

# b comes back while the spare runs: it waits as a spare, and never runs a worker.
start_dl_wrapped b2 90 "env NODE_NAME=b2" "${common[@]}" --rdzv-conf "is_host=0,$conf" -- "$TMP/worker.sh"
wait_for 20 spares_seen 2 ||
  { show_nodes host b2; fail "the returning node should wait as a spare"; }
touch "$TMP/go"
for n in host a c spare b2; do
  wait_dl "$n"
  [[ $RC == 0 ]] || { show_nodes host a c spare b2; fail "$n exited $RC; the job should finish 0"; }
done
[[ ! -e $TMP/rec/b2.g1 ]] || fail "the returning node ran a worker while the spare held its place"
assert_eq "$(gen_count 2)" 0 "workers of a third generation"
check_events "$TMP/events.jsonl" "the host's events" spare_waiting=2 spare_waiting.spares:1=2 node_lost=1 \
  spare_promoted=1 "spare_promoted.first_rank:$victim_rank=1" spare_promoted.generation:2=1 \
  spare_promoted.spares:0=1 standby=0 ranks_renumbered=0 spare_left=0 rendezvous=2 rendezvous.restart:1=1 \
  worker_started.restart:1=1 job_finished.exit_code:0=1
assert_no_leftovers "after the spare's job finished"

# 2. A crash at step 0 on two nodes: 3 runs, then 123 everywhere.
# meet NAME: each rank waits (up to 10 s) until the other has recorded this run
# too, so that one rank's quick crash cannot tear the other down before it
# counts its run.
cat >"$TMP/meet.sh" <<EOF
want=\$((TORCHELASTIC_RESTART_COUNT + 1))
i=0
while [ "\$(cat "$TMP/rec/\$1.\$((1 - RANK))" 2>/dev/null | wc -l)" -lt \$want ] && [ \$i -lt 100 ]; do
  "$TMP/bin/sleep" 0.1
  i=\$((i + 1))
done
EOF
cat >"$TMP/crash.sh" <<EOF
#!/bin/sh
echo "\$TORCHELASTIC_RESTART_COUNT" >>"$TMP/rec/crash.\$RANK"
sh "$TMP/meet.sh" crash
echo "Traceback (most recent call last): ImportError at step 0" >&2
exit 1
EOF
chmod +x "$TMP/crash.sh"
port=$(free_port)
common=(--nnodes 2 --max-restarts 10 --max-no-progress-restarts 2 --rdzv-endpoint "127.0.0.1:$port"
  --rdzv-id "crash-$$")
start_dl crash_host 60 "${common[@]}" --rdzv-conf "is_host=1,$conf" -- "$TMP/crash.sh"
start_dl crash_peer 60 "${common[@]}" --rdzv-conf "is_host=0,$conf" -- "$TMP/crash.sh"
for n in crash_host crash_peer; do
  wait_dl "$n"
  [[ $RC == 123 ]] || { show_nodes crash_host crash_peer; fail "$n exited $RC; a job whose restarts make no progress exits 123"; }
done
# The generations that ran, as any rank saw them: a restart may stop one node's
# worker before it wrote, never the one whose failure caused it.
generations() { sort -nu "$TMP"/rec/"$1".* | paste -sd' '; }
assert_eq "$(generations crash)" "0 1 2" "generations run (the first and 2 restarts)"
grep -q "2 restarts in a row made no progress" "$TMP/crash_host.err" ||
  { show_nodes crash_host; fail "the host should say why it stopped"; }
assert_no_leftovers "after the crash loop stopped"

# 3. Progress each run, then a crash: 4 runs (the first and 3 restarts), exit 3.
cat >"$TMP/progress.sh" <<EOF
#!/bin/sh
echo "\$TORCHELASTIC_RESTART_COUNT" >>"$TMP/rec/progress.\$RANK"
echo \$((TORCHELASTIC_RESTART_COUNT * 100 + 50)) >"\$DLAUNCH_PROGRESS_FILE"
sh "$TMP/meet.sh" progress
exit 3
EOF
chmod +x "$TMP/progress.sh"
port=$(free_port)
common=(--nnodes 2 --max-restarts 3 --max-no-progress-restarts 1 --restart-backoff 0.1:0.2
  --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "progress-$$")
start_dl progress_host 60 "${common[@]}" --rdzv-conf "is_host=1,$conf" --events "$TMP/progress.jsonl" \
  -- "$TMP/progress.sh"
start_dl progress_peer 60 "${common[@]}" --rdzv-conf "is_host=0,$conf" -- "$TMP/progress.sh"
for n in progress_host progress_peer; do
  wait_dl "$n"
  [[ $RC == 3 ]] || { show_nodes progress_host progress_peer; fail "$n exited $RC; restarts that make progress end with the worker's code"; }
done
assert_eq "$(generations progress)" "0 1 2 3" "generations run (the first and 3 restarts)"
# Each restart waited out its backoff standing by: one standby event each.
check_events "$TMP/progress.jsonl" "the progress host's events" standby=3 standby.restart:1=1 standby.restart:3=1 \
  standby.wait_ms:100=1 standby.wait_ms:200=2 rendezvous=4 job_finished.exit_code:3=1
assert_no_leftovers "after the restarts ran out"

# 4. A failure, a backoff, then a generation that finishes.
cat >"$TMP/once.sh" <<EOF
#!/bin/sh
[ "\$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "\$RANK" = 1 ] && exit 5
exit 0
EOF
chmod +x "$TMP/once.sh"
port=$(free_port)
common=(--nnodes 2 --max-restarts 1 --restart-backoff 1:1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "backoff-$$")
start_dl backoff_host 60 "${common[@]}" --rdzv-conf "is_host=1,$conf" --events "$TMP/backoff.jsonl" -- "$TMP/once.sh"
start_dl backoff_peer 60 "${common[@]}" --rdzv-conf "is_host=0,$conf" -- "$TMP/once.sh"
for n in backoff_host backoff_peer; do
  wait_dl "$n"
  [[ $RC == 0 ]] || { show_nodes backoff_host backoff_peer; fail "$n exited $RC; the restart after the backoff should finish 0"; }
done
grep -q "restarting (1 of 1) in 1s (--restart-backoff)" "$TMP/backoff_peer.err" ||
  { show_nodes backoff_peer; fail "the peer should say it waits for the backoff"; }
file_has "$TMP/backoff.jsonl" '"event":"standby"' || fail "no standby event on the host"
assert_no_leftovers "after the backoff's generation finished"

# 5. The next generation waits for every old worker to be gone.
cat >"$TMP/slow_stop.sh" <<EOF
#!/bin/sh
if [ "\$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  [ "\$RANK" = 1 ] && { "$TMP/bin/sleep" 0.5; exit 1; }
  trap '"$TMP/bin/sleep" 1; touch "$TMP/rec/old0.gone"; exit 143' TERM
  "$TMP/bin/sleep" 60 &
  wait
  exit 0
fi
[ -e "$TMP/rec/old0.gone" ] || echo "rank \$RANK started while rank 0 of generation 0 still ran" >>"$TMP/rec/early"
EOF
chmod +x "$TMP/slow_stop.sh"
port=$(free_port)
common=(--nnodes 2 --max-restarts 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "barrier-$$")
start_dl barrier_host 60 "${common[@]}" --rdzv-conf "is_host=1,$conf" -- "$TMP/slow_stop.sh"
start_dl barrier_peer 60 "${common[@]}" --rdzv-conf "is_host=0,$conf" -- "$TMP/slow_stop.sh"
for n in barrier_host barrier_peer; do
  wait_dl "$n"
  [[ $RC == 0 ]] || { show_nodes barrier_host barrier_peer; fail "$n exited $RC; the restarted job should finish 0"; }
done
[[ -e $TMP/rec/old0.gone ]] || fail "rank 0 of generation 0 never ran its SIGTERM handler"
[[ ! -e $TMP/rec/early ]] || fail "a new worker started before an old one was gone: $(cat "$TMP/rec/early")"
assert_no_leftovers "after the restart that waited for the old workers"
pass
