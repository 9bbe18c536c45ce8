#!/usr/bin/env bash
# ctest: LABELS=quick
# torchrun's own command lines behave as under torchrun: --redirects with --tee
# shows the tee'd streams; flag prefixes; --nproc-per-node auto without a GPU is
# os.cpu_count(); unknown --rdzv-conf keys get one line and are ignored;
# TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE tags the lines; and an endpoint that
# answers like an HTTP server is named "not a dlaunch coordinator" at once.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE

cat >"$TMP/talk.sh" <<'EOF2'
echo "out of $LOCAL_RANK"
echo "err of $LOCAL_RANK" >&2
EOF2

# Redirected and tee'd: tee wins, per stream and per local rank; the files hold
# every redirected stream. Written with argparse's prefixes of torchrun's flags.
run_dl 30 --nproc_per 2 --rdzv-id tee1 --log-dir "$TMP/logs" --redirect 3 --tee 0:3,1:1 -- sh "$TMP/talk.sh"
expect_rc 0 "--redirects 3 --tee 0:3,1:1"
assert_file_matches "$OUT" '^\[0\]: out of 0$' "rank 0's stdout on the console (tee'd)"
assert_file_matches "$ERR" '^\[0\]: err of 0$' "rank 0's stderr on the console (tee'd)"
assert_file_matches "$OUT" '^\[1\]: out of 1$' "rank 1's stdout on the console (tee'd)"
if grep -q "err of 1" "$ERR"; then fail_run "rank 1's stderr is redirected, not tee'd: it belongs in the file only"; fi
for r in 0 1; do
  assert_eq "$(cat "$TMP/logs/tee1/attempt_0/$r/stdout.log")" "out of $r" "rank $r's stdout.log"
  assert_eq "$(cat "$TMP/logs/tee1/attempt_0/$r/stderr.log")" "err of $r" "rank $r's stderr.log"
done

# `auto` without a GPU: os.cpu_count(), the online CPUs, even under a narrower
# affinity mask (taskset), as torchrun.
cpus=$("$PY" -c 'import os; print(os.cpu_count())')
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
run_cmd 15 env CUDA_VISIBLE_DEVICES= "${pin[@]}" "$DLAUNCH" --nproc-per-node auto --explain -- true
expect_rc 0 "--nproc-per-node auto --explain"
assert_file_matches "$OUT" "^workers on this node: $cpus\$" "auto without a GPU is os.cpu_count() ($cpus)"
assert_file_matches "$OUT" "no GPU visible, so os.cpu_count\(\): $cpus online CPU" "--explain says why"

# An unknown --rdzv-conf key: one line, and the job runs.
run_dl 15 --rdzv-conf "'backend_opt=1,join_timeout=5'" -- sh -c 'echo ran'
expect_rc 0 "an unknown --rdzv-conf key"
assert_eq "$(cat "$ERR")" "dlaunch: --rdzv-conf: ignoring key 'backend_opt' (dlaunch reads is_host, join_timeout, last_call_timeout, heartbeat_timeout)" "stderr"
assert_eq "$(cat "$OUT")" "ran" "stdout"

# torch 2.x's line prefix template tags each line.
run_cmd 15 env 'TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=${role_name}/${rank}|' "$DLAUNCH" --nproc-per-node 2 \
  --role trainer -- sh "$TMP/talk.sh"
expect_rc 0 "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"
assert_file_matches "$OUT" '^trainer/1\|out of 1$' "rank 1's line, tagged by the template"
run_cmd 15 env 'TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=${host}' "$DLAUNCH" --nproc-per-node 2 -- sh "$TMP/talk.sh"
expect_rc 2 "an unknown field in the template"
assert_eq "$(cat "$ERR")" 'dlaunch: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: unknown field '"'"'${host}'"'"' in '"'"'${host}'"'"' (torch fills ${role_name}, ${rank} and ${local_rank})' "stderr"

# An endpoint that reads a request first, then answers as an HTTP server does
# (etcd's v2 API; any web server) and closes: one line naming it, long before
# the join timeout (600 s; the run's guard is 20 s).
port=$(free_port)
cat >"$TMP/http.py" <<'EOF2'
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16); s.settimeout(20)
while True:
    try:
        c, _ = s.accept()
    except socket.timeout:
        break
    c.settimeout(5)
    try:
        c.recv(4096)
    except OSError:
        pass
    c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n400 Bad Request")
    c.close()
EOF2
"$PY" "$TMP/http.py" "$port" &
track_pid "$!"
disown "$!"
wait_for 5 port_listening "$port" || fail "fixture: the HTTP listener on $port did not start"
run_dl 20 --nnodes 2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-conf is_host=0,join_timeout=600 -- "$TMP/bin/sleep" 0
exited_badly "$RC" || fail_run "expected a non-zero exit of dlaunch's own, got $RC"
assert_eq "$(grep -c . "$ERR")" 1 "lines on stderr"
assert_file_matches "$ERR" "^dlaunch: .*127.0.0.1:$port is not a dlaunch coordinator \(frame: bad magic 0x48545450" \
  "the line names the peer"

for pid in $(marked_pids); do kill "$pid" 2>/dev/null; done
wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
