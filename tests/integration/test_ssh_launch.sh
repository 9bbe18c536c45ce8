#!/usr/bin/env bash
# ctest: PROCESSORS=2
# Head-node launch over ssh (--hostfile / -H without --rdzv-endpoint), end to
# end, against real sshd daemons. Four network namespaces joined by a bridge
# (in a fifth) on a private random 10.x.y.0/24: HEAD (.1) runs the head
# dlaunch, A (.2) and B (.3) each run an sshd (key-only, per-test host and
# client keys, everything under $TMP) through which the head starts one
# dlaunch agent per host:
#   1. --hostfile (Open MPI form, with a comment) running the real DDP example
#      on 2 x 2 ranks: exit 0, parameters in sync, ranks 0,1 on A (node 0) and
#      2,3 on B (node 1), MASTER_ADDR = A's address everywhere, `-x` variables
#      (NAME=VALUE with a space and a quote; bare NAME from the head's
#      environment) reach the workers, every output line is tagged with node
#      and rank, and no worker sees the rendezvous token;
#   2. -H, sleeping workers, `kill -9` of B's agent: the head exits non-zero
#      of its own (not at its guard) with a `dlaunch: job: ` line naming the
#      lost node, and no worker is left anywhere;
#   3. SIGINT to the head: exit 130 within seconds, every node torn down;
#   4. an unreachable host (a black hole: .9 with a fake neighbour entry, so
#      only ssh's ConnectTimeout ends the connect) and a refused one: the
#      launch fails (the unreachable one within ConnectTimeout + 5 s) naming
#      the host and ssh's own error, and the agents already started are torn
#      down;
#   5. a bad hostfile line: exit 2, the error names FILE:LINE;
#   6. --remote pdsh: ranks on A and B, a rank's exit code comes back.
#
# Output tag assumed: `[NODE_RANK,RANK]: ` at the start of every line a worker
# prints (e.g. `[1,3]: rank 3: params in sync, ...`); see tag() below, the one
# place to change if the format differs.
#
# Needs root, `ip netns`, sshd, ssh and ssh-keygen; skipped otherwise.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for and at_exit
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch

# The tag dlaunch puts before each line of a worker's output, as an ERE.
tag() { printf '\\[%s,%s\\]: ' "$1" "$2"; }
TAG_ANY='^\[[0-9]+,[0-9]+\]: '

# ---------------------------------------------------------------------------
# Network and sshd (lib.sh): HEAD (.1) runs the head dlaunch, A (.2) and B (.3)
# each run an sshd; skips without root, `ip netns`, sshd or ssh.
ssh_hosts "dlssh$$-" 3
NS_HEAD=${NS_HOSTS[0]} NS_A=${NS_HOSTS[1]} NS_B=${NS_HOSTS[2]}
ADDR_HEAD=$NET.1 ADDR_A=$NET.2 ADDR_B=$NET.3
ADDR_DEAD=$NET.9  # nobody: a black hole (see case 4)
IP_BIN=$(command -v ip)

# ---------------------------------------------------------------------------
# Helpers.

# ns_procs NS: the pids of every process in namespace NS except sshd's own
# (the daemon and its per-connection children, comm "sshd"/"sshd-session").
# In HEAD that is the head dlaunch and its ssh clients; in A and B the agents,
# their watchdogs, the remote shells and the workers.
ns_procs() {
  local pid comm
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    [[ $comm == sshd || $comm == sshd-session || $comm == sshd-auth ]] && continue
    echo "$pid"
  done
}
nothing_in() {
  local ns
  for ns in "$@"; do [[ -z $(ns_procs "$ns") ]] || return 1; done
  return 0
}
# assert_nothing_left SECONDS WHAT [NS...]: every namespace (default all three)
# is empty of launcher processes and workers within SECONDS.
assert_nothing_left() {
  local secs=$1 what=$2
  shift 2
  local nss=("$@")
  ((${#nss[@]})) || nss=("$NS_HEAD" "$NS_A" "$NS_B")
  wait_for "$secs" nothing_in "${nss[@]}" && return 0
  fail "$what: processes left in the namespaces ${secs}s later:$(ns_leftovers ns_procs "${nss[@]}")"
}

# The agent dlaunch in NS: comm "dlaunch" with a parent that is not dlaunch.
agent_pid_in() {
  local pid ppid
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == dlaunch ]] || continue
    ppid=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null)
    [[ $(cat "/proc/$ppid/comm" 2>/dev/null) == dlaunch ]] && continue
    echo "$pid"
    return 0
  done
  return 1
}

show_head() {
  local n=$1
  {
    echo "--- head ($n): stdout (last 20 lines)"
    tail -n 20 "$TMP/$n.out" | cut -c1-300
    echo "--- head ($n): stderr (last 20 lines)"
    tail -n 20 "$TMP/$n.err" | cut -c1-300
  } >&2
}
fail_head() {
  show_head "$1"
  shift
  fail "$*"
}
# failed_alone RC: dlaunch exited non-zero on its own (not killed by `timeout`).
failed_alone() { [[ $1 != 0 && $1 != 124 && $1 != 137 ]]; }

# Flags every head run shares. GLOO_SOCKET_IFNAME reaches the remote workers
# only through -x (sshd gives the remote agents a fresh environment), so DDP
# across namespaces works only when -x does.
# (SSH_FLAGS: lib.sh's ssh_hosts.)
unset GLOO_SOCKET_IFNAME DLAUNCH_RDZV_TOKEN SSH_AUTH_SOCK 2>/dev/null
export DLTEST_FROM_HEAD=from-head-$$
XVAL="x y'z"

# start_head NAME SECONDS ARGS...: the head dlaunch in HEAD's namespace.
start_head() {
  local name=$1 secs=$2
  shift 2
  start_dl_wrapped "$name" "$secs" "ip netns exec $NS_HEAD" "$@"
}

# ---------------------------------------------------------------------------
# 1. --hostfile, the real DDP example on 2 hosts x 2 ranks.
cp "$SRC/examples/ddp_train.py" "$TMP/ddp_train.py"
cat >"$TMP/ddp_wrap.sh" <<EOF
#!/bin/sh
addr=\$("$IP_BIN" -4 -o addr show dev eth0 2>/dev/null | awk '{print \$4}' | cut -d/ -f1)
echo "env: RANK=\$RANK LOCAL_RANK=\$LOCAL_RANK GROUP_RANK=\$GROUP_RANK WORLD_SIZE=\$WORLD_SIZE MASTER_ADDR=\$MASTER_ADDR HOST=\$addr"
echo "x: GLOO=\$GLOO_SOCKET_IFNAME X=[\$DLTEST_X] H=[\$DLTEST_FROM_HEAD]"
echo "token: \${DLAUNCH_RDZV_TOKEN-unset}"
exec "$PY" -u "$TMP/ddp_train.py" --epochs 1 --steps 5
EOF
chmod +x "$TMP/ddp_wrap.sh"
cat >"$TMP/hosts" <<EOF
# the job's hosts, Open MPI form; node rank = position
$ADDR_A slots=2
$ADDR_B slots=2
EOF

start_head ddp 120 --hostfile "$TMP/hosts" --nproc-per-node 2 "${SSH_FLAGS[@]}" \
  -x GLOO_SOCKET_IFNAME=eth0 -x "DLTEST_X=$XVAL" -x DLTEST_FROM_HEAD -- "$TMP/ddp_wrap.sh"
wait_dl ddp
log "case 1 (DDP over ssh): head exited $RC after ${ELAPSED}s"
[[ $RC == 0 ]] || fail_run "case 1: dlaunch --hostfile (2 hosts x 2 ranks, DDP): expected exit 0, got $RC"

for r in 0 1 2 3; do
  n=$((r / 2))
  assert_file_matches "$OUT" "^$(tag "$n" "$r")rank $r: params in sync, checksum " \
    "case 1: rank $r (node $n) reports params in sync, tagged [$n,$r]"
  host=$ADDR_A
  [[ $n == 1 ]] && host=$ADDR_B
  assert_file_matches "$OUT" \
    "^$(tag "$n" "$r")env: RANK=$r LOCAL_RANK=$((r % 2)) GROUP_RANK=$n WORLD_SIZE=4 MASTER_ADDR=$ADDR_A HOST=$host\$" \
    "case 1: rank $r runs on node $n ($host) with MASTER_ADDR=$ADDR_A"
done
n_sums=$(sed -nE "s/${TAG_ANY}rank [0-9]+: params in sync, checksum (.*)\$/\\1/p" "$OUT" | sort -u | wc -l)
[[ $n_sums == 1 ]] || fail_run "case 1: the ranks disagree on the parameters ($n_sums distinct checksums)"
grep -q 'OUT OF SYNC' "$OUT" && fail_run "case 1: a rank reported parameters out of sync"
assert_file_matches "$OUT" "^$(tag 0 0)summary: world_size 4, .*all ranks in sync" "case 1: rank 0's summary"
n_env=$(grep -cE "${TAG_ANY}env: " "$OUT")
assert_eq "$n_env" 4 "case 1: workers that printed their environment"
bad_master=$(grep -E "${TAG_ANY}env: " "$OUT" | grep -v "MASTER_ADDR=$ADDR_A " || true)
[[ -z $bad_master ]] || fail "case 1: MASTER_ADDR should be A's address $ADDR_A on every worker, got: $bad_master"
# -x NAME=VALUE (quoted through the remote shell intact) and -x NAME (the head's value).
n_x=$(grep -cFx -e "[0,0]: x: GLOO=eth0 X=[$XVAL] H=[$DLTEST_FROM_HEAD]" -e "[0,1]: x: GLOO=eth0 X=[$XVAL] H=[$DLTEST_FROM_HEAD]" \
  -e "[1,2]: x: GLOO=eth0 X=[$XVAL] H=[$DLTEST_FROM_HEAD]" -e "[1,3]: x: GLOO=eth0 X=[$XVAL] H=[$DLTEST_FROM_HEAD]" "$OUT")
[[ $n_x == 4 ]] || {
  grep -E "${TAG_ANY}x: " "$OUT" >&2
  fail "case 1: expected 4 workers with GLOO_SOCKET_IFNAME=eth0, DLTEST_X=[$XVAL] and DLTEST_FROM_HEAD=[$DLTEST_FROM_HEAD] (from -x), got $n_x"
}
# The head's fresh token reached every agent (they joined) but no worker.
n_tok=$(grep -cE "${TAG_ANY}token: unset\$" "$OUT")
assert_eq "$n_tok" 4 "case 1: workers that do not see the rendezvous token"
untagged=$(grep -cvE "$TAG_ANY" "$OUT")
[[ $untagged == 0 ]] || {
  grep -vE "$TAG_ANY" "$OUT" | head -n 5 >&2
  fail "case 1: $untagged line(s) of the head's stdout lack the [NODE,RANK]: tag (first ones above)"
}
assert_nothing_left 5 "case 1: after the DDP job"

# ---------------------------------------------------------------------------
# 2. -H, sleeping workers, kill -9 of B's agent.
HB=2
cat >"$TMP/sleeper.sh" <<EOF
#!/bin/sh
echo "started rank \$RANK"
exec "$TMP/bin/sleep" 60
EOF
chmod +x "$TMP/sleeper.sh"
four_started() { [[ $(grep -c 'started rank' "$TMP/$1.out" 2>/dev/null) == 4 ]]; }

start_head kill 45 -H "$ADDR_A:2,$ADDR_B:2" --nproc-per-node 2 "${SSH_FLAGS[@]}" --local-addr "$ADDR_HEAD" \
  --rdzv-conf "heartbeat_timeout=$HB" -x GLOO_SOCKET_IFNAME=eth0 -- "$TMP/sleeper.sh"
wait_for 30 four_started kill || { wait_dl kill; fail_run "case 2: the 4 workers did not start within 30s"; }
sleep 0.5
victim=$(agent_pid_in "$NS_B") || {
  # shellcheck disable=SC2046
  describe_pids $(ip netns pids "$NS_B") >&2
  fail_head kill "case 2: cannot find B's dlaunch agent in $NS_B (comm 'dlaunch' whose parent is not dlaunch)"
}
t_kill=$EPOCHREALTIME
kill -KILL "$victim"
wait_dl kill
took=$(since "$t_kill")
log "case 2 (kill -9 of B's agent, pid $victim): head exited $RC ${took}s after the kill"
failed_alone "$RC" || fail_run "case 2: after B's agent died the head should exit non-zero on its own, got $RC"
assert_file_matches "$ERR" "^dlaunch: job: .*(node 1\\b|$ADDR_B)" "case 2: the head's job summary (stderr) names the lost node (node 1 or $ADDR_B)"
assert_nothing_left 5 "case 2: after the kill -9 of B's agent"

# ---------------------------------------------------------------------------
# 3. SIGINT to the head tears down every node.
start_head int 45 -H "$ADDR_A:2,$ADDR_B:2" --nproc-per-node 2 "${SSH_FLAGS[@]}" \
  --rdzv-conf "heartbeat_timeout=$HB" -x GLOO_SOCKET_IFNAME=eth0 -- "$TMP/sleeper.sh"
wait_for 30 four_started int || { wait_dl int; fail_run "case 3: the 4 workers did not start within 30s"; }
sleep 0.5
head_pid=$(dl_pid int) || fail_head int "case 3: cannot find the head dlaunch"
t_int=$EPOCHREALTIME
kill -INT "$head_pid"
wait_dl int
took=$(since "$t_int")
log "case 3 (SIGINT to the head): exited $RC ${took}s after the signal"
expect_rc 130 "case 3: SIGINT to the head (128 + SIGINT)"
# A real-process bound: SIGINT travels to the workers on A and B through ssh
# and their agents; only the wall time tells a prompt teardown from one that
# waits out a timeout (the default shutdown timeout's SIGKILL at 30 s, or a
# lost heartbeat) and still exits 130 before the 45 s guard.
in_time "$took" 10 || fail_run "case 3: the head took ${took}s to exit after SIGINT; expected within 10s"
assert_nothing_left 10 "case 3: after SIGINT to the head"

# ---------------------------------------------------------------------------
# 4. Unreachable hosts fail the launch, naming the host and ssh's error.
# 4a. A black hole: HEAD has a permanent neighbour entry for .9 with a MAC
#     nobody owns, so SYNs leave and nothing answers; only ConnectTimeout ends it.
ip -n "$NS_HEAD" neigh replace "$ADDR_DEAD" lladdr 02:00:00:de:ad:09 dev eth0 nud permanent ||
  fail "cannot add the black-hole neighbour entry for $ADDR_DEAD"
CT=2
cat >"$TMP/hosts3" <<EOF
$ADDR_A slots=2
$ADDR_B slots=2
$ADDR_DEAD slots=2
EOF
start_head dead 25 --hostfile "$TMP/hosts3" --nproc-per-node 2 "${SSH_FLAGS[@]}" --ssh-option "ConnectTimeout=$CT" \
  --rdzv-conf "heartbeat_timeout=$HB" -x GLOO_SOCKET_IFNAME=eth0 -- "$TMP/sleeper.sh"
wait_dl dead
log "case 4a (black-hole host $ADDR_DEAD): head exited $RC after ${ELAPSED}s"
failed_alone "$RC" || fail_run "case 4a: a host that does not answer should fail the launch on its own, got exit $RC"
limit=$((CT + 5))
# A real-process bound: ssh's own connect timeout. Its error reads the same
# after ConnectTimeout=2 or dlaunch's default 10, so only the wall time shows
# that --ssh-option overrides the default.
in_time "$ELAPSED" "$limit" || fail_run "case 4a: the launch took ${ELAPSED}s to fail; expected within ${limit}s (ConnectTimeout=$CT + 5s; --ssh-option must override dlaunch's default)"
grep -qF -- "$ADDR_DEAD" "$ERR" || fail_run "case 4a: stderr should name the unreachable host $ADDR_DEAD"
assert_file_matches "$ERR" "connect to host $ADDR_DEAD port $SSH_PORT: " "case 4a: ssh's own error reaches the head's stderr"
grep -q 'started rank' "$OUT" && fail_run "case 4a: workers started although a host never joined"
assert_nothing_left 5 "case 4a: after the failed launch"

# 4b. Refused: HEAD's own address has no sshd (fails at once).
start_head refused 25 -H "$ADDR_A:2,$ADDR_HEAD:2" --nproc-per-node 2 "${SSH_FLAGS[@]}" --ssh-option "ConnectTimeout=$CT" \
  --rdzv-conf "heartbeat_timeout=$HB" -x GLOO_SOCKET_IFNAME=eth0 -- "$TMP/sleeper.sh"
wait_dl refused
log "case 4b (refused host $ADDR_HEAD): head exited $RC after ${ELAPSED}s"
failed_alone "$RC" || fail_run "case 4b: a host refusing ssh should fail the launch on its own, got exit $RC"
assert_file_matches "$ERR" "connect to host $ADDR_HEAD port $SSH_PORT: Connection refused" "case 4b: ssh's own error (with the host) reaches the head's stderr"
assert_nothing_left 5 "case 4b: after the failed launch"

# ---------------------------------------------------------------------------
# 5. A bad hostfile line: usage error naming FILE:LINE, nothing started.
cat >"$TMP/bad_hosts" <<EOF
n0 slots=2
n1 slots=abc
EOF
start_head bad 15 --hostfile "$TMP/bad_hosts" --nproc-per-node 2 "${SSH_FLAGS[@]}" -- "$TMP/sleeper.sh"
wait_dl bad
expect_rc 2 "case 5: --hostfile with 'n1 slots=abc' on line 2"
assert_file_matches "$ERR" "bad_hosts:2:" "case 5: the parse error names the file and line"
assert_nothing_left 2 "case 5: after the bad hostfile"

# ---------------------------------------------------------------------------
# 6. --remote pdsh (over pdsh's ssh module): the token goes inline, the ssh
#    flags through PDSH_SSH_ARGS_APPEND; rank 1 exits 3, and so does the head.
if command -v pdsh >/dev/null; then
  cat >"$TMP/pdsh_rank.sh" <<EOF
#!/bin/sh
echo "pdsh: rank \$RANK of \$WORLD_SIZE on \$(hostname -I 2>/dev/null | cut -d' ' -f1)"
[ "\$RANK" = 0 ] && exec touch "$TMP/pdsh.rank0"
# Rank 1 fails only once rank 0 has spoken (at most 10 s), or the abort could
# stop rank 0 before its line.
i=0
while [ ! -e "$TMP/pdsh.rank0" ] && [ \$i -lt 100 ]; do "$TMP/bin/sleep" 0.1; i=\$((i + 1)); done
exit 3
EOF
  chmod +x "$TMP/pdsh_rank.sh"
  start_head pdsh 45 -H "$ADDR_A:1,$ADDR_B:1" --remote pdsh "${SSH_FLAGS[@]}" --rdzv-conf "heartbeat_timeout=$HB" \
    -- "$TMP/pdsh_rank.sh"
  wait_dl pdsh
  log "case 6 (--remote pdsh): head exited $RC after ${ELAPSED}s"
  expect_rc 3 "case 6: --remote pdsh, rank 1 exits 3"
  assert_file_matches "$OUT" "^$(tag 0 0)pdsh: rank 0 of 2 on $ADDR_A\$" "case 6: rank 0 ran on A through pdsh"
  assert_file_matches "$OUT" "^$(tag 1 1)pdsh: rank 1 of 2 on $ADDR_B\$" "case 6: rank 1 ran on B through pdsh"
  assert_file_matches "$ERR" "^dlaunch: job: .*rank 1 exited with code 3" "case 6: the head's summary names rank 1 and code 3"
  assert_nothing_left 5 "case 6: after the pdsh job"
else
  log "case 6 skipped: pdsh is not installed"
fi

# ---------------------------------------------------------------------------
# The end: stop the sshds, then nothing of ours may be left.
stop_sshds
wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
