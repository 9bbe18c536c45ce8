#!/usr/bin/env bash
# A coordinator's descriptor limit (issue 21): `dlaunch coordinator` raises its
# soft RLIMIT_NOFILE to the hard limit at start, and says once, naming the job,
# when a job's --nnodes maximum needs more agents than that allows. A hosting
# dlaunch raises it only for a job that needs it, so that its workers keep the
# limit they were given otherwise.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
command -v prlimit >/dev/null || skip "prlimit is not installed"
unset DLAUNCH_RDZV_TOKEN

port=$(free_port)
start_dl_wrapped daemon 120 "prlimit --nofile=64:4096" coordinator --listen "127.0.0.1:$port" --rdzv-token T
# shellcheck disable=SC2317  # called through wait_for
listening() { grep -q "listening on 127.0.0.1:$port" "$TMP/daemon.err"; }
wait_for 10 listening || fail "the coordinator did not start: $(cat "$TMP/daemon.err")"
daemon=$(dl_pid daemon)
assert_eq "$(awk '/^Max open files/{print $4, $5}' "/proc/$daemon/limits")" "4096 4096" \
  "the coordinator's soft and hard fd limits"

# Two jobs of up to 5,000 agents (more than 4,096 descriptors allow) and a small one.
for job in big other small; do
  nnodes=1:5000
  [[ $job == small ]] && nnodes=1
  start_dl "$job" 60 --nnodes "$nnodes" --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "$job" \
    --rdzv-conf is_host=0,last_call_timeout=1 --rdzv-token T -- true
  wait_dl "$job"
  expect_rc 0 "an agent of job $job"
done
line="dlaunch coordinator: rendezvous 127.0.0.1:$port: job 'big' may have up to 5000 agents, but the descriptor limit allows about 4064 (RLIMIT_NOFILE 4096, its hard limit); raise the hard limit (ulimit -Hn, systemd's LimitNOFILE=) for more"
assert_eq "$(grep -c "descriptor limit" "$TMP/daemon.err")" "1" "lines about the descriptor limit"
assert_eq "$(grep "descriptor limit" "$TMP/daemon.err")" "$line" "the line about the descriptor limit"
kill -TERM "$daemon"
wait_dl daemon
expect_rc 0 "the coordinator after SIGTERM"

# A hosting dlaunch: a job of up to 100 agents needs more than 64 descriptors, so
# it raises its limit (and its worker inherits it); a job of 2 leaves it at 64.
for max in 100 2; do
  port=$(free_port)
  start_dl_wrapped "host$max" 60 "prlimit --nofile=64:4096" --nnodes "1:$max" --rdzv-endpoint "127.0.0.1:$port" \
    --rdzv-id "host$max" --rdzv-conf is_host=1,last_call_timeout=1 --rdzv-token T -- sh -c 'echo "soft=$(ulimit -Sn)"'
  wait_dl "host$max"
  expect_rc 0 "a hosting agent of up to $max nodes"
  want=64
  ((max == 100)) && want=4096
  assert_file_matches "$OUT" "soft=$want$" "the worker's soft fd limit under a host of up to $max nodes"
  if grep -q "descriptor limit" "$ERR"; then fail "the host of up to $max nodes spoke of its descriptor limit: $(cat "$ERR")"; fi
done
wait_for 5 no_marked_processes
assert_no_leftovers "after the jobs"
pass
