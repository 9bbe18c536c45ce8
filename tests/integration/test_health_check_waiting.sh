#!/usr/bin/env bash
# ctest: LABELS=quick
# --health-check on a node that waits joined, with real agents on loopback:
# --nnodes 2 --spares 1 --health-check-interval 1, the check failing on a node
# once a file of its name exists. Two nodes run the job; a third waits as a
# spare and checks again every interval while it waits (its events hold more
# checks than the one before it joined). Its file appears: it says it leaves,
# leaves (the host logs that it left, and writes `spare_left` with the reason
# "left"), and is held out; its file goes: it rejoins as a spare (a second
# `spare_waiting`). The job finishes 0 on every node and the spare ran no
# worker. Every wait is a bounded loop on what the nodes write; no wall time is
# asserted.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"

cat >"$TMP/worker.sh" <<EOF
#!/bin/sh
echo "worker ran on \$HC_NODE" >"$TMP/ran.\$HC_NODE"
i=0
while [ ! -e "$TMP/release" ] && [ \$i -lt 600 ]; do "$TMP/bin/sleep" 0.1; i=\$((i + 1)); done
EOF
chmod +x "$TMP/worker.sh"

port=$(free_port)
common=(--nnodes 2 --spares 1 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "hcw-$$"
  --health-check "test ! -e $TMP/bad.\$HC_NODE || { echo \"bad disk on \$HC_NODE\"; exit 4; }"
  --health-check-interval 1)
start_dl_wrapped host 60 "env HC_NODE=host" "${common[@]}" --rdzv-conf "is_host=1,join_timeout=30" \
  --events "$TMP/host.jsonl" -- "$TMP/worker.sh"
start_dl_wrapped peer 60 "env HC_NODE=peer" "${common[@]}" --rdzv-conf "is_host=0,join_timeout=30" \
  -- "$TMP/worker.sh"
both_ran() { [[ -e $TMP/ran.host && -e $TMP/ran.peer ]]; }
wait_for 20 both_ran || { show_nodes host peer; fail "the job did not start on its two nodes"; }

start_dl_wrapped spare 60 "env HC_NODE=spare" "${common[@]}" --rdzv-conf "is_host=0,join_timeout=30" \
  --events "$TMP/spare.jsonl" -- "$TMP/worker.sh"
count() { grep -c -- "$2" "$1" 2>/dev/null || true; }
at_least() { [[ $(count "$1" "$2") -ge $3 ]]; }
wait_for 20 at_least "$TMP/host.jsonl" '"event":"spare_waiting"' 1 ||
  { show_nodes host spare; fail "the third node should wait as a spare"; }
# Its check before it joined, then at least one while it waits.
wait_for 10 at_least "$TMP/spare.jsonl" '"event":"health_check".*"ok":true' 2 ||
  { show_nodes spare; fail "the waiting spare did not check again within 10 s (interval 1 s)"; }
grep -q '"event":"health_check".*"ok":false' "$TMP/spare.jsonl" && fail "a check of the spare failed early"

touch "$TMP/bad.spare"
leaving='^dlaunch: health check .*: exited with code 4: bad disk on spare \(while this node waited; it leaves the job and is held out\)$'
wait_for 10 file_has "$TMP/spare.err" "$leaving" || { show_nodes spare; fail "the spare did not say it leaves"; }
wait_for 10 file_has "$TMP/host.jsonl" '"event":"spare_left".*"reason":"left"' ||
  { show_nodes host spare; fail "no spare_left event (reason left) on the host"; }
assert_file_matches "$TMP/host.err" 'closed [^ ]+: left$' "the host's line that the spare left"
grep -q 'lost (connection closed)' "$TMP/host.err" && { show_nodes host; fail "the host counted the spare lost"; }
assert_file_matches "$TMP/spare.jsonl" '"event":"health_check".*"ok":false,"how":"exited with code 4","last_line":"bad disk on spare"' \
  "the spare's failed health_check event"
bg_running spare || { show_nodes spare; fail "the held-out spare should wait for its check to pass"; }

rm -f "$TMP/bad.spare"
wait_for 10 file_has "$TMP/spare.err" 'passed; this node joins the job$' ||
  { show_nodes spare; fail "the spare did not say it rejoins"; }
wait_for 10 at_least "$TMP/host.jsonl" '"event":"spare_waiting"' 2 ||
  { show_nodes host spare; fail "the spare should wait as a spare again"; }

touch "$TMP/release"
for n in host peer spare; do
  wait_dl "$n"
  [[ $RC == 0 ]] || { show_nodes host peer spare; fail "$n exited $RC; the job should finish 0"; }
done
[[ ! -e $TMP/ran.spare ]] || fail "the spare ran a worker"
assert_no_leftovers "after the job with a waiting spare"
pass
