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
    # shellcheck disable=SC2086
    kill -KILL $LIB_EXTRA_PIDS 2>/dev/null
  fi
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

# run_dl SECONDS ARGS... : runs dlaunch ARGS under a timeout.
# Sets RC, OUT and ERR (paths of captured stdout/stderr), ELAPSED (seconds, float).
RUN_SEQ=0
run_dl() {
  local secs=$1
  shift
  RUN_SEQ=$((RUN_SEQ + 1))
  OUT=$TMP/run$RUN_SEQ.out
  ERR=$TMP/run$RUN_SEQ.err
  local t0=$EPOCHREALTIME
  timeout -k 5 "$secs" "$DLAUNCH" "$@" >"$OUT" 2>"$ERR" </dev/null
  RC=$?
  local t1=$EPOCHREALTIME
  ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
  if [[ $RC == 124 || $RC == 137 ]] && [[ $(awk -v e="$ELAPSED" -v s="$secs" 'BEGIN{print (e >= s-0.5)}') == 1 ]]; then
    log "dlaunch $* timed out after ${secs}s"
  fi
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

fail_run() {
  show_run
  fail "$*"
}

expect_rc() {
  local want=$1 what=$2
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
