# shellcheck shell=bash
# Shared helpers for the integration tests. Source it, then call `lib_init "$@"`.
#
# Contract of every test_*.sh: $1 is the dlaunch binary; DLAUNCH_SRC is the repo
# root (default: the script's ../..). Exit 0 on pass, 77 to skip, anything else
# on failure with a `FAIL:` line on stderr saying what was expected and got.
#
# lib_init sets:
#   DLAUNCH  absolute path of the binary under test
#   SRC      repository root
#   TMP      a fresh directory (mktemp -d), removed at exit
#   MARK     a unique string (the TMP path). Every process a test starts has it
#            in its command line (scripts live under $TMP, `sleep` is run
#            through the symlink $TMP/bin/sleep), so `pgrep -f "$MARK"` finds
#            leftovers and the exit trap kills them.
#   PY       /usr/bin/python3 (the interpreter that has torch)

set -u

TEST_NAME=$(basename "${0%.sh}")
PY=/usr/bin/python3

log() { printf '%s: %s\n' "$TEST_NAME" "$*" >&2; }

fail() {
  printf 'FAIL: %s: %s\n' "$TEST_NAME" "$*" >&2
  exit 1
}

skip() {
  printf 'SKIP: %s: %s\n' "$TEST_NAME" "$*" >&2
  exit 77
}

pass() {
  printf 'PASS: %s\n' "$TEST_NAME" >&2
  exit 0
}

# Prints the pids (one per line) of processes whose command line contains
# $MARK, leaving out this shell and its command substitutions.
marked_pids() {
  local pid
  for pid in $(pgrep -f -- "$MARK" 2>/dev/null); do
    [[ $pid == "$$" || $pid == "${BASHPID:-}" ]] && continue
    # Our own subshells share our command line, which has no MARK; but be safe.
    [[ -r /proc/$pid/cmdline ]] || continue
    echo "$pid"
  done
}

# One line per marked process: pid, parent pid, state, command line.
describe_pids() {
  local pid
  for pid in "$@"; do
    [[ -r /proc/$pid/stat ]] || continue
    printf '  pid %s ppid %s state %s: %s\n' "$pid" \
      "$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null)" \
      "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" \
      "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
  done
}

lib_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n ${MARK:-} ]]; then
    local pids
    pids=$(marked_pids)
    if [[ -n $pids ]]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null
    fi
  fi
  if [[ -n ${LIB_EXTRA_PIDS:-} ]]; then
    # Their children first: a `timeout` killed with SIGKILL leaves its child (a
    # dlaunch coordinator daemon, whose command line has no $MARK) running.
    local pid
    for pid in $LIB_EXTRA_PIDS; do
      # shellcheck disable=SC2046
      kill -KILL $(pgrep -P "$pid" 2>/dev/null) 2>/dev/null
    done
    # shellcheck disable=SC2086
    kill -KILL $LIB_EXTRA_PIDS 2>/dev/null
  fi
  local cmd
  for cmd in "${LIB_AT_EXIT[@]}"; do
    eval "$cmd"
  done
  if [[ -n ${TMP:-} && -d $TMP && -z ${KEEP_TMP:-} ]]; then
    rm -rf -- "$TMP"
  fi
  exit "$rc"
}

# Remember a pid (a helper we started without MARK) for the exit trap.
track_pid() { LIB_EXTRA_PIDS="${LIB_EXTRA_PIDS:-} $1"; }

lib_init() {
  local bin=${1:-}
  # shellcheck disable=SC2034  # used by the tests
  SRC=${DLAUNCH_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
  [[ -n $bin ]] || { printf 'usage: %s PATH/TO/dlaunch\n' "$0" >&2; exit 2; }
  [[ -x $bin ]] || fail "dlaunch binary '$bin' does not exist or is not executable"
  DLAUNCH=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
  for tool in timeout pgrep awk; do
    command -v "$tool" >/dev/null || skip "'$tool' is not installed"
  done
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-it-${TEST_NAME}-XXXXXX") || fail "mktemp -d failed"
  MARK=$TMP
  trap lib_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -p "$TMP/bin"
  ln -s "$(command -v sleep)" "$TMP/bin/sleep"
  # Never let the tests' own environment leak dialect variables into workers.
  unset MAGIC TF_CONFIG AZUREML_MPI_HOSTFILE 2>/dev/null || true
}

require_torch() {
  [[ -x $PY ]] || skip "$PY is missing"
  "$PY" -c 'import torch, torch.distributed' 2>/dev/null || skip "$PY cannot import torch"
}

require_python() {
  [[ -x $PY ]] || skip "$PY is missing"
}

# run_cmd SECONDS CMD ARGS... : runs CMD ARGS under a timeout, stdin closed.
# Sets RC, OUT and ERR (paths of captured stdout/stderr), ELAPSED (seconds, float)
# and HUNG (see guard_expired).
#
# SECONDS is a hang guard, not a promise of speed: make it generous (several
# times what a loaded, sanitized run takes). Tests assert what a run did (its
# exit code, its lines, what it left behind), not how long it took; a bound on
# a latency belongs in a unit test with a fake clock, or in bench/.
RUN_SEQ=0
run_cmd() {
  local secs=$1
  shift
  RUN_SEQ=$((RUN_SEQ + 1))
  OUT=$TMP/run$RUN_SEQ.out
  ERR=$TMP/run$RUN_SEQ.err
  local t0=$EPOCHREALTIME
  timeout -k 5 "$secs" "$@" >"$OUT" 2>"$ERR" </dev/null
  RC=$?
  ELAPSED=$(since "$t0")
  guard_expired "$secs"
}

# guard_expired SECONDS: sets HUNG=1 when the last run (RC, ELAPSED) was ended
# by its `timeout` guard of SECONDS (124 or 137 at the guard), else HUNG=.
# dlaunch's own exit code 124 (a hang it stopped) comes earlier.
guard_expired() {
  HUNG=
  if [[ $RC == 124 || $RC == 137 ]] && le "$(awk -v s="$1" 'BEGIN{print s - 0.5}')" "$ELAPSED"; then
    HUNG=1
  fi
  return 0
}

# run_dl SECONDS ARGS... : run_cmd of dlaunch ARGS.
run_dl() {
  local secs=$1
  shift
  run_cmd "$secs" "$DLAUNCH" "$@"
  [[ -z $HUNG ]] || log "dlaunch $* hung: still running at its ${secs}s guard"
  return 0
}

# Shows the tail of the last run's output, for failure messages.
show_run() {
  {
    echo "--- exit code: $RC, ${ELAPSED}s"
    echo "--- stdout (last 20 lines):"
    tail -n 20 "$OUT" | cut -c1-300
    echo "--- stderr (last 20 lines):"
    tail -n 20 "$ERR" | cut -c1-300
  } >&2
}

# ns_leftovers LISTER NS...: for each network namespace in which `LISTER NS`
# prints pids, describes them on stderr; prints " NS:pid,pid..." for a message.
ns_leftovers() {
  local lister=$1 ns pids left=""
  shift
  for ns in "$@"; do
    pids=$("$lister" "$ns")
    if [[ -n $pids ]]; then
      left+=" $ns:${pids//$'\n'/,}"
      # shellcheck disable=SC2086
      describe_pids $pids >&2
    fi
  done
  printf '%s' "$left"
}

fail_run() {
  show_run
  fail "$*"
}

expect_rc() {
  local want=$1 what=$2
  # HUNG: the guard's 124 or 137, which are no answer from dlaunch.
  [[ -z ${HUNG:-} ]] ||
    fail_run "$what: hung (expected exit code $want; still running at the test's guard, after ${ELAPSED}s)"
  [[ $RC == "$want" ]] || fail_run "$what: expected exit code $want, got $RC"
}

assert_eq() {
  local got=$1 want=$2 what=$3
  [[ $got == "$want" ]] || fail "$what: expected '$want', got '$got'"
}

# assert_contains HAYSTACK NEEDLE WHAT (fixed-string match)
assert_contains() {
  local hay=$1 needle=$2 what=$3
  [[ $hay == *"$needle"* ]] || fail "$what: expected it to contain '$needle', got '$hay'"
}

# assert_file_matches FILE ERE WHAT: some line of FILE matches the extended regex.
assert_file_matches() {
  local file=$1 re=$2 what=$3
  grep -Eq -- "$re" "$file" || {
    echo "--- $file:" >&2
    tail -n 20 "$file" | cut -c1-300 >&2
    fail "$what: no line matches /$re/"
  }
}

# wait_for SECONDS COMMAND...: polls COMMAND every 50 ms until it succeeds.
wait_for() {
  local secs=$1
  shift
  local deadline
  deadline=$(awk -v n="$EPOCHREALTIME" -v s="$secs" 'BEGIN{printf "%.3f", n+s}')
  while ! "$@"; do
    if [[ $(awk -v n="$EPOCHREALTIME" -v d="$deadline" 'BEGIN{print (n > d)}') == 1 ]]; then
      return 1
    fi
    sleep 0.05
  done
  return 0
}

no_marked_processes() { [[ -z $(marked_pids) ]]; }

# Fails when any process started by this test is still alive, listing them
# (and saying which ones were reparented to PID 1).
assert_no_leftovers() {
  local what=$1 pids
  pids=$(marked_pids)
  [[ -z $pids ]] && return 0
  # shellcheck disable=SC2086
  describe_pids $pids >&2
  local orphans=""
  local pid
  for pid in $pids; do
    [[ $(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null) == 1 ]] && orphans+=" $pid"
  done
  [[ -n $orphans ]] && log "reparented to PID 1:$orphans"
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null
  fail "$what: $(echo "$pids" | wc -w) process(es) from this test survived"
}

# count_marked PATTERN: number of live processes whose command line matches
# "$MARK.*PATTERN" (pgrep -f ERE).
count_marked() { pgrep -fc -- "$MARK$1" 2>/dev/null || true; }

# --- Background dlaunch runs (multi-node tests) -------------------------------

# free_port: prints a TCP port that is free on 127.0.0.1 right now. It is
# drawn below the kernel's ephemeral range, so that no program of a test
# running beside this one is given it by bind(0) or connect() before the test
# binds it (dlaunch holds the ports its workers bind from bind(0)); ports
# 20000 up to that range, else bind(0). Each script of this directory draws
# first from a slice of 128 ports of its own (its place among test_*.sh): a
# port is free when it is drawn, not when the test binds it, and a script
# beside this one that drew the same port and held it without listening (a
# dlaunch holding MASTER_PORT) left every agent of a rendezvous unable to host
# it, each waiting for the others. Then the whole range at random.
free_port() {
  "$PY" - "$0" <<'PORTEOF'
import glob, os, random, socket, sys
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    lo = 0
script = os.path.abspath(sys.argv[1])
scripts = sorted(os.path.basename(p) for p in glob.glob(os.path.join(os.path.dirname(script), "test_*.sh")))
mine = []
if os.path.basename(script) in scripts:
    start = 20000 + 128 * scripts.index(os.path.basename(script))
    end = min(start + 128, lo)
    mine = random.sample(range(start, end), max(end - start, 0))
rest = random.sample(range(20000, lo), min(64, max(lo - 20000, 0)))
for port in mine + rest + [0]:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    print(s.getsockname()[1])
    break
PORTEOF
}

# loads_libraries BIN: true when BIN is linked dynamically (has a program
# interpreter): the default dlaunch and dlaunch-watch are static-pies, the
# latter with no library at all (launcher/CMakeLists.txt).
loads_libraries() { readelf -l "$1" 2>/dev/null | grep -q 'Requesting program interpreter'; }

# hardened_problems BIN: prints what BIN lacks of Debian's hardening, "; "
# between them, nothing when it has it all: position-independent (type DYN,
# FLAGS_1 PIE), full RELRO (GNU_RELRO and BIND_NOW), the stack protector's and
# FORTIFY's checks called (__stack_chk_fail, __*_chk; FORTIFY only where the C
# library is linked): from the dynamic symbols
# of a dynamic program, from the symbol table of a static one, and not at all
# for a stripped static one, which keeps no record of them.
hardened_problems() {
  local bin=$1 lacking=() syms
  readelf -hW "$bin" | grep -qE '^ *Type: +DYN' || lacking+=("not position-independent (ELF type $(readelf -hW "$bin" | awk '/Type:/ {print $2}'))")
  readelf -lW "$bin" | grep -q GNU_RELRO || lacking+=("no GNU_RELRO segment")
  readelf -dW "$bin" | grep -qE '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).* NOW' || lacking+=("no BIND_NOW")
  readelf -dW "$bin" | grep -qE '\(FLAGS_1\).* PIE' || lacking+=("no PIE flag in FLAGS_1")
  if loads_libraries "$bin"; then
    syms=$(readelf --dyn-syms -W "$bin")
  else
    syms=$(readelf --syms -W "$bin")
    readelf -SW "$bin" | grep -q ' .symtab ' || syms=skip
  fi
  if [[ $syms != skip ]]; then
    grep -q ' __stack_chk_fail' <<<"$syms" || lacking+=("no stack protector (__stack_chk_fail)")
    # FORTIFY checks C library calls: a program that links no C library
    # (dlaunch-watch) makes none. Such a program must then link nothing at all.
    if grep -qE ' __libc_start_main(@|$)' <<<"$syms"; then
      grep -qE ' __[a-z_]+_chk(@|$)' <<<"$syms" || lacking+=("no FORTIFY (__*_chk)")
    elif [[ -n $(readelf --syms -W "$bin" | awk '$7 == "UND" && $8 != ""') ]]; then
      lacking+=("undefined symbols without a C library")
    fi
  fi
  local IFS=';'
  [[ ${#lacking[@]} == 0 ]] || printf '%s\n' "${lacking[*]}"
}

# Commands run by lib_cleanup after the marked processes are killed (e.g.
# removing network namespaces), in the order given.
LIB_AT_EXIT=()
# Where dlaunch keeps its own small files when TMPDIR does not say (its
# DefaultTempParent): /dev/shm when it is a tmpfs that root owns (or we do) with
# the sticky bit if its group or everyone may write it, else /tmp. (A private
# directory also wants room there: MakePrivateDir.)
default_temp_parent() {
  local mode
  mode=$(stat -L -c %a /dev/shm 2>/dev/null)
  if [[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs && $(stat -L -c %u /dev/shm) =~ ^(0|$(id -u))$ ]] &&
    { (((8#$mode & 8#022) == 0)) || ((8#$mode & 8#1000)); }; then
    echo /dev/shm
  else
    echo /tmp
  fi
}
at_exit() { LIB_AT_EXIT+=("$1"); }

declare -A BG_PID=() BG_T0=() BG_SECS=()
# start_dl NAME SECONDS ARGS...: runs dlaunch ARGS in the background under
# `timeout`, stdout/stderr to $TMP/NAME.out and $TMP/NAME.err. The environment
# of the call reaches dlaunch (VAR=x start_dl ... does not work for functions;
# export it or use `env` through start_dl_wrapped).
start_dl() {
  local name=$1 secs=$2
  shift 2
  start_dl_wrapped "$name" "$secs" "" "$@"
}

# start_dl_wrapped NAME SECONDS WRAPPER ARGS...: like start_dl with dlaunch run
# as `WRAPPER timeout ... dlaunch ARGS` (WRAPPER is word-split; e.g.
# "ip netns exec NS" or "env DLAUNCH_RDZV_TOKEN=x"). BG_PID[NAME] is the pid of
# the wrapper-or-timeout process; `dl_pid NAME` finds dlaunch itself.
start_dl_wrapped() {
  local name=$1 secs=$2 wrapper=$3
  shift 3
  BG_T0[$name]=$EPOCHREALTIME
  BG_SECS[$name]=$secs
  # shellcheck disable=SC2086
  $wrapper timeout -k 5 "$secs" "$DLAUNCH" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null &
  BG_PID[$name]=$!
  track_pid "$!"
}

# dl_pid NAME: the pid of the dlaunch process started as NAME (the child of
# `timeout`, found through any exec-ing wrapper such as `ip netns exec` or `env`).
dl_pid() {
  local top=${BG_PID[$1]} pid comm
  for pid in $top $(pgrep -P "$top" 2>/dev/null); do
    comm=$(cat "/proc/$pid/comm" 2>/dev/null)
    if [[ $comm == dlaunch ]]; then echo "$pid"; return 0; fi
    if [[ $comm == timeout ]]; then
      pgrep -P "$pid" -x dlaunch 2>/dev/null | head -n 1
      return 0
    fi
  done
  return 1
}

# wait_dl NAME: waits for it; sets RC, ELAPSED (since its start), OUT and ERR
# (so that show_run and fail_run describe it), and HUNG (guard_expired).
wait_dl() {
  local name=$1
  wait "${BG_PID[$name]}"
  RC=$?
  ELAPSED=$(awk -v a="${BG_T0[$name]}" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.2f", b-a}')
  OUT=$TMP/$name.out
  ERR=$TMP/$name.err
  guard_expired "${BG_SECS[$name]}"
}

# bg_running NAME: true while the background run NAME has not exited.
bg_running() { kill -0 "${BG_PID[$1]}" 2>/dev/null && [[ $(awk '{print $3}' "/proc/${BG_PID[$1]}/stat" 2>/dev/null) != Z ]]; }

# since T0: seconds (float) from the $EPOCHREALTIME value T0 to now.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.2f", b-a}'; }

# le A B: true when the number A <= B.
le() { [[ $(awk -v a="$1" -v b="$2" 'BEGIN{print (a <= b)}') == 1 ]]; }

# in_time SECONDS BOUND: true when a measured wall time is within BOUND seconds,
# times TIME_SCALE. Only for a latency that no fake clock can show, because a
# real process makes it (the SIGKILL of a worker that ignores SIGTERM, a pipe
# whose reader stalls, a signal travelling through ssh); say at the use which.
# Everything else asserts what happened, under a generous guard (run_cmd), and
# leaves "how soon" to a unit test with a fake clock or to bench/. The
# sanitized build runs several times slower, and scripts/test.sh's asan stage
# shares the two cores with the fuzzers' build: there (DLAUNCH_SANITIZER_REPORTS
# is set) a bound counts ten times. DLAUNCH_TIME_SCALE overrides the factor.
TIME_SCALE=${DLAUNCH_TIME_SCALE:-$([[ -n ${DLAUNCH_SANITIZER_REPORTS:-} ]] && echo 10 || echo 1)}
in_time() { le "$1" "$(awk -v b="$2" -v s="$TIME_SCALE" 'BEGIN{print b * s}')"; }

# file_has FILE ERE: for wait_for.
file_has() { grep -Eq -- "$2" "$1" 2>/dev/null; }

# --- Fault-suite helpers ---------------------------------------------------------

# port_listening PORT: true when a socket listens on TCP PORT in this network
# namespace. Reads /proc/net/tcp{,6} and makes no connection, so a coordinator
# logs nothing. For wait_for.
port_listening() {
  local hex
  hex=$(printf ':%04X' "$1")
  awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p {f = 1} END {exit !f}' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# connections_to PORT: the number of established TCP connections whose remote
# end is PORT (the client side of connections to a local server on PORT).
connections_to() {
  local hex
  hex=$(printf ':%04X' "$1")
  awk -v p="$hex" '$4 == "01" && substr($3, length($3) - 4) == p {n++} END {print n + 0}' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# netns_hosts PREFIX N: N network namespaces ("hosts") PREFIX1..PREFIXN, each
# with an eth0 (veth) on a bridge in a namespace PREFIXbr, on a private /24
# picked at random that exists only inside them. Host i has address $NET.i.
# Sets NET and NS_HOSTS (the N names, host 1 first); every namespace is removed
# at exit, anything still inside killed first. Skips (77) without root or a
# working `ip netns`; fails when hosts 2..N cannot reach host 1 over TCP.
NS_ALL=()
netns_remove_all() {
  local ns pids
  for ns in "${NS_ALL[@]}"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  return 0
}
netns_hosts() {
  local prefix=$1 n=$2 br=${1}br i ns
  [[ $(id -u) == 0 ]] || skip "needs root to create network namespaces"
  command -v ip >/dev/null || skip "'ip' (iproute2) is not installed"
  [[ ${#NS_ALL[@]} == 0 ]] && at_exit netns_remove_all
  ip netns add "$br" 2>"$TMP/netns.err" || skip "'ip netns add' does not work here: $(cat "$TMP/netns.err")"
  NS_ALL+=("$br")
  NET=10.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1))
  NS_HOSTS=()
  {
    ip -n "$br" link set lo up &&
      ip -n "$br" link add br0 type bridge &&
      ip -n "$br" link set br0 up
  } 2>"$TMP/netns.err" || skip "cannot build a bridge in a namespace: $(cat "$TMP/netns.err")"
  for ((i = 1; i <= n; i++)); do
    ns=$prefix$i
    ip netns add "$ns" 2>"$TMP/netns.err" || skip "'ip netns add $ns' failed: $(cat "$TMP/netns.err")"
    NS_ALL+=("$ns")
    NS_HOSTS+=("$ns")
    {
      ip -n "$br" link add "port$i" type veth peer name eth0 netns "$ns" &&
        ip -n "$br" link set "port$i" master br0 &&
        ip -n "$br" link set "port$i" up &&
        ip -n "$ns" link set lo up &&
        ip -n "$ns" addr add "$NET.$i/24" dev eth0 &&
        ip -n "$ns" link set eth0 up
    } 2>"$TMP/netns.err" || skip "cannot build the veth/bridge network: $(cat "$TMP/netns.err")"
  done
  # TCP from every other host to host 1 (a listener there, its command line
  # marked so the exit trap finds it).
  local port
  port=$(ip netns exec "${NS_HOSTS[0]}" "$PY" -c 'import socket; s=socket.socket(); s.bind(("0.0.0.0", 0)); print(s.getsockname()[1])')
  ip netns exec "${NS_HOSTS[0]}" timeout 20 "$PY" -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(64); s.settimeout(15)
for _ in range(int(sys.argv[3])): s.accept()[0].close()
' "$NET.1" "$port" "$((n - 1))" "$MARK" &
  track_pid "$!"
  for ((i = 2; i <= n; i++)); do
    ip netns exec "${NS_HOSTS[i - 1]}" "$PY" -c '
import socket, sys, time
deadline = time.monotonic() + 10
while True:
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close(); break
    except OSError as e:
        if time.monotonic() > deadline: sys.exit(f"cannot reach {sys.argv[1]}: {e}")
        time.sleep(0.1)
' "$NET.1" "$port" 2>"$TMP/reach.err" ||
      fail "fixture: namespace ${NS_HOSTS[i - 1]} cannot reach $NET.1 over the bridge: $(cat "$TMP/reach.err")"
  done
  log "namespaces ${NS_HOSTS[*]} on $NET.0/24 (bridge in $br)"
}

# ns_marked NS: pids of the processes in namespace NS that carry $MARK.
ns_marked() {
  local pid
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    grep -qF -- "$MARK" "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
  done
}

# show_nodes NAME...: the tails of background runs' stdout and stderr, on stderr.
show_nodes() {
  local n
  for n in "$@"; do
    echo "--- $n: stdout (last 15 lines)"
    tail -n 15 "$TMP/$n.out" | cut -c1-300
    echo "--- $n: stderr (last 15 lines)"
    tail -n 15 "$TMP/$n.err" | cut -c1-300
  done >&2
}

# exited_badly RC: true when RC is a non-zero exit of dlaunch's own choosing
# (not 0, not the 124/137 of `timeout`, not a signal death).
exited_badly() { [[ $1 != 0 && $1 -lt 124 ]]; }

# --- Hosts with sshd (head launches) --------------------------------------------

# ssh_hosts PREFIX N: netns_hosts PREFIX N (N >= 2), then an sshd in hosts
# 2..N (host 1 is the head and has none): key-only, a host key and a client key
# made for this test under $TMP, `StrictModes no`, `UsePAM no`, listening on
# $NET.i:$SSH_PORT, its command line marked (the config under $TMP) so the exit
# trap kills it. Fails unless a key login from host 1 lands on every one of
# them. Sets SSH_PORT, SSH_KEY, SSHD_PIDS (host 2's first), SSH_CLIENT_ARGS
# (the options host 1's ssh needs: -i, -p, known hosts, BatchMode) and
# SSH_FLAGS (the same as dlaunch's --ssh-* flags). Skips (77) without root,
# `ip netns`, sshd, ssh or ssh-keygen.
ssh_hosts() {
  local prefix=$1 n=$2 sshd i ns addr
  [[ $(id -u) == 0 ]] || skip "needs root to create network namespaces and run sshd"
  sshd=$(command -v sshd 2>/dev/null || true)
  [[ -z $sshd && -x /usr/sbin/sshd ]] && sshd=/usr/sbin/sshd
  [[ -n $sshd ]] || skip "sshd (openssh-server) is not installed"
  command -v ssh >/dev/null || skip "ssh (openssh-client) is not installed"
  command -v ssh-keygen >/dev/null || skip "ssh-keygen (openssh-client) is not installed"
  netns_hosts "$prefix" "$n"
  SSH_PORT=$((20000 + RANDOM % 20000))
  SSH_KEY=$TMP/id_ed25519
  ssh-keygen -q -t ed25519 -N '' -C "dlaunch-test-host" -f "$TMP/ssh_host_ed25519_key" </dev/null >/dev/null \
    2>"$TMP/keygen.err" || fail "ssh-keygen (host key) failed: $(cat "$TMP/keygen.err")"
  ssh-keygen -q -t ed25519 -N '' -C "dlaunch-test-client" -f "$SSH_KEY" </dev/null >/dev/null \
    2>"$TMP/keygen.err" || fail "ssh-keygen (client key) failed: $(cat "$TMP/keygen.err")"
  cp "$SSH_KEY.pub" "$TMP/authorized_keys"
  : >"$TMP/known_hosts"
  # sshd's privilege-separation directory (normally made by its service unit).
  mkdir -p /run/sshd || fail "cannot create /run/sshd"
  chmod 755 /run/sshd 2>/dev/null
  SSHD_PIDS=()
  for ((i = 2; i <= n; i++)); do
    ns=${NS_HOSTS[i - 1]} addr=$NET.$i
    cat >"$TMP/sshd_config_$i" <<SSHEOF
Port $SSH_PORT
ListenAddress $addr:$SSH_PORT
HostKey $TMP/ssh_host_ed25519_key
PidFile $TMP/sshd_$i.pid
AuthorizedKeysFile $TMP/authorized_keys
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
X11Forwarding no
LogLevel VERBOSE
SSHEOF
    ip netns exec "$ns" "$sshd" -D -e -f "$TMP/sshd_config_$i" 2>"$TMP/sshd_$i.log" </dev/null &
    SSHD_PIDS+=("$!")
    track_pid "$!"
  done
  for ((i = 2; i <= n; i++)); do
    wait_for 10 file_has "$TMP/sshd_$i.log" "Server listening on" || {
      tail -n 20 "$TMP/sshd_$i.log" >&2
      fail "fixture: sshd in ${NS_HOSTS[i - 1]} did not start listening within 10s (log above)"
    }
  done
  SSH_CLIENT_ARGS=(-i "$SSH_KEY" -p "$SSH_PORT" -o BatchMode=yes -o ConnectTimeout=5
    -o "UserKnownHostsFile=$TMP/known_hosts" -o StrictHostKeyChecking=no)
  # shellcheck disable=SC2034  # used by the tests
  SSH_FLAGS=(--ssh-identity "$SSH_KEY" --ssh-port "$SSH_PORT"
    --ssh-option "UserKnownHostsFile=$TMP/known_hosts" --ssh-option StrictHostKeyChecking=no)
  local got
  for ((i = 2; i <= n; i++)); do
    addr=$NET.$i
    # shellcheck disable=SC2016  # expanded remotely
    got=$(ip netns exec "${NS_HOSTS[0]}" timeout -k 2 15 ssh "${SSH_CLIENT_ARGS[@]}" "root@$addr" \
      'echo "ok $(id -u)"; ip -4 -o addr show dev eth0' </dev/null 2>"$TMP/ssh_check.err") || {
      tail -n 20 "$TMP/sshd_$i.log" >&2
      fail "fixture: 'ssh -i KEY -p $SSH_PORT root@$addr' from ${NS_HOSTS[0]} does not work: $(tail -n 5 "$TMP/ssh_check.err")"
    }
    [[ $got == "ok 0"*"inet $addr/24"* ]] || fail "fixture: ssh to $addr landed somewhere unexpected: $got"
  done
  log "sshd in ${NS_HOSTS[*]:1} on port $SSH_PORT; key login from ${NS_HOSTS[0]} works"
}

# stop_sshds: SIGTERM to every sshd of ssh_hosts, and waits for them.
stop_sshds() {
  local pid
  for pid in "${SSHD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${SSHD_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  return 0
}
