#!/usr/bin/env bash
# ctest: LABELS=quick
# Hot spares and a lost node that is not the end, with real agents on loopback:
#   1. --nnodes 4 --spares 1: a fifth agent waits as a spare instead of being
#      refused. `kill -9` of one node's dlaunch mid-run: the next generation
#      takes the spare at once; the survivors keep their RANKs and the spare takes
#      the lost node's. The lost node's agent comes back while the spare runs: it
#      waits as a spare (exactly one of the two runs), and the job finishes 0.
#   2. A script that crashes at step 0 on 2 nodes with --max-restarts 10
#      --max-no-progress-restarts 2 runs exactly 3 times and every dlaunch exits
#      123, dlaunch's "do not requeue" code.
#   3. A script that gets further each run (its step in DLAUNCH_PROGRESS_FILE)
#      and then crashes keeps restarting to --max-restarts and exits with the
#      worker's code: the host judged progress from both nodes' heartbeats.
#   4. --restart-backoff 1:1: a failure stands both nodes by (their workers
#      stopped, the agents still joined), and the next generation runs after
#      the wait and finishes 0.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"

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
assert_no_leftovers "after the spare's job finished"

# 2. A crash at step 0 on two nodes: 3 runs, then 123 everywhere.
cat >"$TMP/crash.sh" <<EOF
#!/bin/sh
echo "\$TORCHELASTIC_RESTART_COUNT" >>"$TMP/rec/crash.\$RANK"
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
exit 3
EOF
chmod +x "$TMP/progress.sh"
port=$(free_port)
common=(--nnodes 2 --max-restarts 3 --max-no-progress-restarts 1 --rdzv-endpoint "127.0.0.1:$port"
  --rdzv-id "progress-$$")
start_dl progress_host 60 "${common[@]}" --rdzv-conf "is_host=1,$conf" -- "$TMP/progress.sh"
start_dl progress_peer 60 "${common[@]}" --rdzv-conf "is_host=0,$conf" -- "$TMP/progress.sh"
for n in progress_host progress_peer; do
  wait_dl "$n"
  [[ $RC == 3 ]] || { show_nodes progress_host progress_peer; fail "$n exited $RC; restarts that make progress end with the worker's code"; }
done
assert_eq "$(generations progress)" "0 1 2 3" "generations run (the first and 3 restarts)"
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
pass
