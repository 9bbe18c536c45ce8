#!/usr/bin/env bash
# ctest: LABELS=quick
# Bad usage: exit 2 and exactly one stderr line, `dlaunch: ...`, naming the flag
# and the value. A command that does not exist: exit 127, naming it.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

# usage_error WHAT NEEDLE... -- DLAUNCH-ARGS...
#   expects exit 2, one stderr line starting "dlaunch: " containing every
#   NEEDLE, nothing on stdout and no worker started. DL_ENV (NAME=VALUE words)
#   is added to dlaunch's environment. A hang, a wrapped loop or an allocation
#   of everything shows as the guard's expiry (run_cmd's 15 s).
DL_ENV=()
usage_error() {
  local what=$1
  shift
  local needles=()
  while (($#)) && [[ $1 != "--" ]]; do needles+=("$1"); shift; done
  shift
  run_cmd 15 env "${DL_ENV[@]}" "$DLAUNCH" "$@"
  expect_rc 2 "$what"
  local n line
  n=$(wc -l <"$ERR")
  line=$(head -n 1 "$ERR")
  [[ $n == 1 ]] || fail_run "$what: expected exactly one line on stderr, got $n"
  [[ $line == "dlaunch: "* ]] || fail_run "$what: stderr should start with 'dlaunch: ', got '$line'"
  local needle
  for needle in "${needles[@]}"; do
    assert_contains "$line" "$needle" "$what: the message"
  done
  [[ ! -s $OUT ]] || fail_run "$what: expected nothing on stdout"
  [[ ! -e $TMP/worker-ran ]] || fail "$what: a worker ran although the command line is invalid"
}

# A worker command that would leave a trace if it ever ran.
W=(-- bash -c "touch $TMP/worker-ran")

usage_error "--nproc-per-node 0" --nproc-per-node 0 -- --nproc-per-node 0 "${W[@]}"
usage_error "--nproc-per-node -3" --nproc-per-node -3 -- --nproc-per-node -3 "${W[@]}"
usage_error "--nproc-per-node abc" --nproc-per-node abc -- --nproc-per-node abc "${W[@]}"
usage_error "--nproc_per_node=abc" nproc abc -- --nproc_per_node=abc "${W[@]}"
usage_error "misspelt --nproc-per-nodes" "--nproc-per-nodes" "did you mean '--nproc-per-node'" -- \
  --nproc-per-nodes 2 "${W[@]}"
usage_error "no command" -- --nproc-per-node 2
usage_error "no command after --" -- --nproc-per-node 2 --
usage_error "unwritable --log-dir" --log-dir /proc/nonexistent/x -- \
  --nproc-per-node 2 --log-dir /proc/nonexistent/x "${W[@]}"
usage_error "--local-ranks-filter 5 with 2 processes" --local-ranks-filter 5 -- \
  --nproc-per-node 2 --local-ranks-filter 5 "${W[@]}"

# torchrun's command lines that dlaunch cannot run as torchrun would: refused in
# one line before anything starts (an etcd endpoint was once dialled as a
# dlaunch coordinator, or hosted).
usage_error "--rdzv-backend etcd" "--rdzv-backend: 'etcd' is not supported" "--rdzv-backend c10d" -- \
  --rdzv-backend etcd --rdzv-endpoint 127.0.0.1:2379 --nnodes 2 "${W[@]}"
usage_error "--rdzv_backend=etcd-v2" "'etcd-v2' is not supported: dlaunch speaks its own rendezvous" -- \
  --rdzv_backend=etcd-v2 --rdzv-endpoint 127.0.0.1:2379 --nnodes 2 "${W[@]}"
usage_error "--logs-specs" "--logs-specs: 'x' names a Python LogsSpecs plug-in" "use --log-dir" -- \
  --logs_specs x "${W[@]}"
usage_error "an ambiguous prefix" "ambiguous flag '--node' (could be --node-rank, --nodes)" -- --node 1 "${W[@]}"
usage_error "a near miss in --rdzv-conf" "--rdzv-conf: unknown key 'is_hots' (did you mean 'is_host'?)" -- \
  --rdzv-conf is_hots=1 "${W[@]}"

# Unbounded inputs: each ends at once, naming the input, with exit 2 (issue 9).
usage_error "--nproc-per-node 2147483647" "--nproc-per-node: 2147483647 is over the limit of 65536 workers per node" -- \
  --nproc-per-node 2147483647 "${W[@]}"
usage_error "--roles that overflow an int" "--roles: 2147483648 workers in all is over the limit of 65536 workers per node" -- \
  --roles worker:1073741824,ps:1073741824 "${W[@]}"
# Node lists with --explain: should a check be lost, nothing is sent to a host.
usage_error "-H with 2e9 slots" "-H: 'n1:2000000000' is over the limit of 65536 workers per node" -- \
  --explain -H n1:2000000000 --exclude n1:0 "${W[@]}"
usage_error "--nnodes 2000000000" "--nnodes: 2000000000 is over the limit of 1048576 nodes" -- \
  --nnodes 2000000000 "${W[@]}"
for t in inf nan 1e300; do
  usage_error "--shutdown-timeout $t" "--shutdown-timeout: expected seconds from 0 to 2592000, got '$t'" -- \
    --nproc-per-node 1 --shutdown-timeout "$t" "${W[@]}"
done
usage_error "join_timeout=inf" "--rdzv-conf: expected join_timeout=SECONDS (positive, at most 2592000), got 'join_timeout=inf'" -- \
  --nnodes 2 --rdzv-endpoint 127.0.0.1:1 --rdzv-conf join_timeout=inf "${W[@]}"
usage_error "misspelt --rdzv-conf key" "--rdzv-conf: unknown key 'join_timout' (did you mean 'join_timeout'?)" -- \
  --nnodes 2 --rdzv-endpoint 127.0.0.1:1 --rdzv-conf join_timout=5 "${W[@]}"
usage_error "empty --rdzv-token" "--rdzv-token: empty token" -- \
  --nnodes 2 --rdzv-endpoint 127.0.0.1:1 --rdzv-token '' "${W[@]}"
usage_error "--rdzv-id over 1024 bytes" "--rdzv-id: 5000 bytes is over the limit of 1024" -- \
  --nnodes 2 --rdzv-endpoint 127.0.0.1:1 --rdzv-id "$(printf 'x%.0s' {1..5000})" "${W[@]}"
usage_error "--explain checks --roles" "--roles: counts add up to 2 but --nproc-per-node is 3" -- \
  --explain --nproc-per-node 3 --roles chief:1,worker:1
usage_error "--nodes n1,n1" "--nodes: host 'n1' is listed twice (node ranks 0 and 1)" -- --explain --nodes n1,n1 "${W[@]}"
# --explain refuses what a run would (it once returned before these checks).
usage_error "--explain checks --local-ranks-filter" "--local-ranks-filter: local rank 5 is outside this node (0-1)" -- \
  --explain --local-ranks-filter 5 --nproc-per-node 2 -- true
usage_error "--explain reads --rdzv-token-file" "token file $TMP/no-such-token: No such file or directory" -- \
  --explain --nnodes 2 --rdzv-endpoint 127.0.0.1:1 --rdzv-token-file "$TMP/no-such-token" "${W[@]}"
usage_error "a bare IPv6 literal with :N in -H" \
  "-H: ambiguous host '2001:db8::1:8' (write an IPv6 address in brackets: [ADDRESS] or [ADDRESS]:SLOTS)" -- \
  --explain -H 2001:db8::1:8 "${W[@]}"
DL_ENV=(SLURM_JOB_ID=7 SLURM_NODEID=0 SLURM_NNODES=1 "SLURM_JOB_NODELIST=a[4294967296]")
usage_error "a Slurm nodelist past 2^32" \
  "SLURM_JOB_NODELIST: bad range '4294967296' in 'a[4294967296]' (a number over 4294967295)" -- "${W[@]}"
DL_ENV=(SLURM_JOB_ID=7 SLURM_NODEID=0 SLURM_NNODES=1 "SLURM_JOB_NODELIST=a[0-99999]b[0-99999]")
usage_error "a Slurm nodelist of 10^10 hosts" \
  "SLURM_JOB_NODELIST: 'a[0-99999]b[0-99999]' expands to 10000000000 hosts, over the limit of 1048576" -- "${W[@]}"
DL_ENV=()
# The top of the 32-bit range used to wrap the counter and loop for ever.
run_cmd 15 env SLURM_JOB_ID=7 SLURM_NODEID=0 SLURM_NNODES=1 "SLURM_JOB_NODELIST=a[4294967295-4294967295]" \
  "$DLAUNCH" --explain
expect_rc 0 "--explain under a[4294967295-4294967295]"
assert_contains "$(cat "$OUT")" "master a4294967295" "--explain under a[4294967295-4294967295]"
# A FIFO or a device as the hostfile: refused, not read for ever.
mkfifo "$TMP/fifo"
usage_error "a FIFO as the hostfile" "--hostfile $TMP/fifo: not a regular file" -- --explain --hostfile "$TMP/fifo" "${W[@]}"
usage_error "/dev/zero as the hostfile" "--hostfile /dev/zero: not a regular file" -- --explain --hostfile /dev/zero "${W[@]}"
# A binary hostfile: its bytes are escaped, never sent to the terminal.
printf '\x7fELF\x02\x01\x01\x1b[31m slots=1\n' >"$TMP/binary-hosts"
usage_error "a binary hostfile" "hostfile $TMP/binary-hosts:1: expected a host name, got '\\x7fELF\\x02\\x01\\x01\\x1b[31m'" -- \
  --explain --hostfile "$TMP/binary-hosts" "${W[@]}"
if LC_ALL=C grep -q $'[\x01-\x08\x1b\x7f]' "$ERR"; then fail_run "a binary hostfile: raw control bytes on stderr"; fi

# --master-port that something else already listens on.
"$PY" -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
time.sleep(60)
' "$MARK" >"$TMP/port" &
LISTENER=$!
track_pid "$LISTENER"
# shellcheck disable=SC2317  # called through wait_for
port_ready() { [[ -s $TMP/port ]]; }
wait_for 10 port_ready || fail "the port-holding listener did not start"
port=$(cat "$TMP/port")
usage_error "--master-port $port (in use)" --master-port "$port" -- \
  --nproc-per-node 2 --master-port "$port" "${W[@]}"

kill -KILL "$LISTENER" 2>/dev/null
wait "$LISTENER" 2>/dev/null

# Command not found: 127, naming the command.
missing=no-such-command-$RANDOM$RANDOM
for cmd in "$missing" "$TMP/$missing"; do
  run_dl 15 --nproc-per-node 2 -- "$cmd" arg
  expect_rc 127 "command '$cmd' not found"
  grep -q "^dlaunch: .*$cmd" "$ERR" || fail_run "command '$cmd' not found: no 'dlaunch: ' line naming it on stderr"
done

# dlaunch job: a YAML alias bomb (about 400 bytes standing for 9^9 nodes) in a
# --set and in the spec file, a 20,000-deep --set, a cycle, and a NUL in the
# command: one short line, exit 2, fast, and within 1 GB of address space (an
# unbounded expansion aborts with bad_alloc there instead).
printf 'command: bash -c "touch %s/worker-ran"\ndistribution: {type: mpi}\n' "$TMP" >"$TMP/job.yml"
bomb="{a: &a [x, x, x, x, x, x, x, x, x]"
prev=a
for k in b c d e f g h i; do
  bomb+=", $k: &$k [*$prev, *$prev, *$prev, *$prev, *$prev, *$prev, *$prev, *$prev, *$prev]"
  prev=$k
done
bomb+="}"
{ cat "$TMP/job.yml"; printf 'tags: %s\n' "$bomb"; } >"$TMP/bomb.yml"
printf 'command: "echo \\"a\\0b\\""\ndistribution: {type: mpi}\n' >"$TMP/nul.yml"
deep="tags=$(printf '%*s' 20000 '' | tr ' ' '[')$(printf '%*s' 20000 '' | tr ' ' ']')"
(
  # A bound on memory, so a bomb that expands fails here instead of swapping.
  # Not under ASan, which reserves terabytes of address space for its shadow.
  [[ -n ${DLAUNCH_SANITIZED:-} ]] || ulimit -v 1000000
  usage_error "job --set ALIAS-BOMB" "expands to more than 100000 YAML nodes" "(392 bytes)" -- job "$TMP/job.yml" --set "tags=$bomb"
  usage_error "job with an alias bomb in the file" "bomb.yml: expands to more than 100000 YAML nodes" -- job "$TMP/bomb.yml"
  usage_error "job --set with a cycle" "nested deeper than 64 levels" -- job "$TMP/job.yml" --set 'tags=&a [*a]'
  usage_error "job --set 20,000 deep" "(40005 bytes): nested deeper than 64 levels" -- job "$TMP/job.yml" --set "$deep"
  ((${#ERR} < 300)) && (($(wc -c <"$ERR") < 300)) || fail_run "job --set 20,000 deep: the message should quote a short prefix only"
  usage_error "job with a NUL in the command" "nul.yml:1: command: contains a NUL byte" -- job "$TMP/nul.yml"
) || exit 1

# A known-good control, so the cases above fail for the reason they claim.
run_dl 15 --nproc-per-node 2 -- bash -c "touch $TMP/worker-ran"
expect_rc 0 "the control run"
[[ -e $TMP/worker-ran ]] || fail_run "the control run did not run its worker"

wait_for 5 no_marked_processes
assert_no_leftovers "after the usage errors"
pass
