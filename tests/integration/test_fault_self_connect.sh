#!/usr/bin/env bash
# ctest: LABELS=netns
# An agent whose host is not up yet, on a port of the ephemeral range (every
# port free_port gives is one): Linux may give the agent's connect that very
# port as its source, and TCP's simultaneous open then connects the socket to
# itself. The agent read its own Hello and gave up at once ("the peer ... is
# not a dlaunch coordinator (it sent hello before a challenge)"), and a closed
# self-connection left a TIME_WAIT that kept the host from binding the port.
#
# The test runs in a network namespace of its own (unshare -n: loopback only,
# gone with the test) where the ephemeral range is made two ports, 40000 and
# 40001, so that about every other attempt to reach 127.0.0.1:40000 connects
# to itself:
#   1. an agent with no host keeps trying until its join timeout, and says so;
#   2. an agent that met itself many times, then a host that binds the port
#      (the range widened first, so the host has ports for the rest): the job
#      runs and both nodes exit 0.
if [[ -z ${DLAUNCH_IN_OWN_NETNS:-} ]]; then
  if unshare -n true 2>/dev/null; then
    exec unshare -n env DLAUNCH_IN_OWN_NETNS=1 bash "$0" "$@"
  fi
fi
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
[[ -n ${DLAUNCH_IN_OWN_NETNS:-} ]] || skip "'unshare -n' does not work here (not root?)"
unset DLAUNCH_RDZV_TOKEN
ip link set lo up || fail "cannot bring up loopback in the test's network namespace"
range=/proc/sys/net/ipv4/ip_local_port_range
echo "40000 40001" >"$range" || fail "cannot narrow $range in the test's network namespace"
endpoint=127.0.0.1:40000
common=(--nnodes 2 --nproc-per-node 1 --rdzv-endpoint "$endpoint" --rdzv-id "self-$$")

# 1. No host: about 20 attempts in 3 s, half of them reaching themselves.
run_dl 20 "${common[@]}" --node-rank 1 --rdzv-conf is_host=0,join_timeout=3 -- true
expect_rc 1 "an agent with no host"
if grep -q "not a dlaunch coordinator" "$ERR"; then fail_run "the agent took its own connection for a coordinator"; fi
assert_eq "$(wc -l <"$ERR")" 1 "lines on stderr"
assert_file_matches "$ERR" "^dlaunch: rendezvous $endpoint: cannot connect within 3s \(.*\)$" "the agent's one line"

# 2. A late host after self-connections.
start_dl late 60 "${common[@]}" --node-rank 1 --rdzv-conf is_host=0,join_timeout=30 -- true
# The fault's precondition, not an event: 1.5 s of attempts (P(none reached
# itself) is about 2^-12).
sleep 1.5
echo "40000 40063" >"$range"
start_dl host 60 "${common[@]}" --node-rank 0 --rdzv-conf is_host=1,join_timeout=30 -- true
wait_dl host
expect_rc 0 "the host after the agent's self-connections"
wait_dl late
expect_rc 0 "the agent that met itself before its host came"
if grep -q "cannot listen" "$TMP/host.err"; then fail "the host could not bind $endpoint: $(cat "$TMP/host.err")"; fi
assert_file_matches "$TMP/host.err" "finished on 2 nodes" "the job of both nodes"
wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
