#!/usr/bin/env bash
# ctest: LABELS=quick
# dlaunch-watch's two stages when dlaunch is SIGKILLed (launcher/watchdog/main.cpp):
#   1. the first stage hands the job to the second, dlaunch's own binary as it
#      was when the job started, even after an upgrade replaced that file with
#      another program: the worker's child dies, the run directory is removed
#      (only the second stage does that), and what now lies at dlaunch's path
#      never runs;
#   2. the same for another user (nobody);
#   3. dlaunch-watch links no library: no program interpreter, nothing needed;
#   4. an order to watch group 1 or 0 is never one to kill them, in either stage;
#   5. a dlaunch that is not dumpable (file capabilities, run by nobody), whose
#      /proc/PID/exe no other process may open, still gets the two stages, and
#      says nothing of a fork.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
build=$(dirname "$DLAUNCH")
[[ -x $build/dlaunch-watch ]] || fail "no dlaunch-watch beside $DLAUNCH"

# A worker whose child only a watchdog can end (PDEATHSIG takes the worker itself).
cat >"$TMP/worker.sh" <<WORKER
#!/bin/sh
"$TMP/bin/sleep" 300 &
echo \$! >"\$OUT_DIR/child.tmp" && mv "\$OUT_DIR/child.tmp" "\$OUT_DIR/child"
wait
WORKER
chmod 755 "$TMP/worker.sh"
chmod 755 "$TMP"  # nobody runs it

# killed_job NAME DIR [WRAPPER]: runs the copy of dlaunch in DIR (WRAPPER
# before it) with the worker above, writing into DIR; once its child runs,
# runs $BEFORE_KILL if set and SIGKILLs dlaunch. The worker's child must then
# be gone within 10 s, and the run directory the watchdog was told of too.
killed_job() {
  local name=$1 dir=$2 wrapper=${3:-} dl watch child run_dir
  DLAUNCH=$dir/dlaunch start_dl_wrapped "$name" 60 "$wrapper env OUT_DIR=$dir" --nproc-per-node 1 -- "$TMP/worker.sh"
  wait_for 20 test -s "$dir/child" || { show_nodes "$name"; fail "$name: the worker's child did not start within 20s"; }
  child=$(cat "$dir/child")
  dl=$(dl_pid "$name") || fail "$name: cannot find its dlaunch"
  watch=$(pgrep -P "$dl" -x dlaunch-watch) || fail "$name: dlaunch $dl has no dlaunch-watch child"
  # The first stage, not a fork of dlaunch that took the name.
  if [[ $(basename "$(readlink "/proc/$watch/exe")") != dlaunch-watch ]]; then
    show_nodes "$name"
    fail "$name: dlaunch $dl's watchdog runs $(readlink "/proc/$watch/exe"), not dlaunch-watch's first stage"
  fi
  # dlaunch-watch GROUP DIR FILE PROGRAM
  run_dir=$(tr '\0' '\n' <"/proc/$watch/cmdline" | sed -n 3p)
  [[ -d $run_dir ]] || fail "$name: the watchdog's run directory '$run_dir' is not there"
  if [[ -n ${BEFORE_KILL:-} ]]; then $BEFORE_KILL; fi
  kill -KILL "$dl"
  child_gone() { ! kill -0 "$child" 2>/dev/null; }
  wait_for 10 child_gone || fail "$name: the worker's child ($child) outlived a SIGKILLed dlaunch by 10s"
  wait_dl "$name"
  run_dir_gone() { [[ ! -e $run_dir ]]; }
  wait_for 10 run_dir_gone || fail "$name: the run directory $run_dir is still there 10s after the kill"
  wait_for 5 no_marked_processes || assert_no_leftovers "$name"
}

# 1. An upgrade replaces dlaunch while the job runs.
mkdir -m 755 "$TMP/up"
cp "$DLAUNCH" "$build/dlaunch-watch" "$TMP/up/"
upgrade() {
  rm "$TMP/up/dlaunch"
  printf '#!/bin/sh\n: >"%s/ran"\nexit 0\n' "$TMP/up" >"$TMP/up/dlaunch"
  chmod 755 "$TMP/up/dlaunch"
}
BEFORE_KILL=upgrade killed_job upgraded "$TMP/up"
[[ ! -e $TMP/up/ran ]] || fail "1: the program put at dlaunch's path ran as the watchdog's second stage"
log "1: after an upgrade, the second stage was the dlaunch the job started with"

# 2. Another user.
if [[ $(id -u) == 0 ]] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
  mkdir -m 755 "$TMP/nobody"
  cp "$DLAUNCH" "$build/dlaunch-watch" "$TMP/nobody/"
  chown nobody "$TMP/nobody"
  killed_job nobody "$TMP/nobody" "setpriv --reuid=nobody --regid=$(id -gn nobody) --clear-groups"
  log "2: nobody's job: the same"
else
  log "2: needs root, a 'nobody' user and setpriv: not tried"
fi

# 3. What it links.
if command -v readelf >/dev/null; then
  if readelf -lW "$build/dlaunch-watch" | grep -q 'program interpreter'; then
    fail "3: dlaunch-watch has a program interpreter"
  fi
  if readelf -dW "$build/dlaunch-watch" | grep -q NEEDED; then fail "3: dlaunch-watch needs a library"; fi
  log "3: dlaunch-watch links no library"
fi
# 4. An order to watch group 1 or 0 is not one to kill them: kill(-1) would
# be every process the user may signal. Each stage gets such orders and then
# EOF, in a PID namespace of its own beside a sentinel, so that a broken guard
# kills no more than the namespace.
if [[ $(id -u) == 0 ]] && command -v unshare >/dev/null && command -v python3 >/dev/null &&
  unshare --pid --fork --kill-child true 2>/dev/null; then
  # The record (a 4-byte length, a 32-byte challenge, no mark), then kAddGroup 1 and kAddGroup 0.
  python3 -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<I", 32) + b"c" * 32 + struct.pack("<iiQ", 1, 1, 0) + struct.pack("<iiQ", 1, 0, 0))' >"$TMP/orders"
  # guard_holds WHAT WANT_RC PROGRAM ARGS...: PROGRAM run as dlaunch-watch ARGS
  # with those orders, in the namespace; the namespace's shell reports its exit
  # code (the stage went as far as its kill) and whether the sentinel lives.
  guard_holds() {
    local what=$1 want=$2
    shift 2
    unshare --pid --fork --kill-child bash -c \
      '"$1" 300 & s=$!; shift; (exec -a dlaunch-watch "$@") <"$ORDERS" >/dev/null 2>&1; rc=$?; kill -0 "$s" && echo "alive $rc"' \
      bash "$TMP/bin/sleep" "$@" >"$TMP/guard.out" 2>&1 </dev/null
    [[ $(cat "$TMP/guard.out") == "alive $want" ]] ||
      fail "4: $what, told to watch groups 1 and 0: '$(cat "$TMP/guard.out")', expected 'alive $want' (the sentinel beside it alive, exit $want)"
  }
  export ORDERS=$TMP/orders
  # The first stage, whose second cannot run (/dev/null), kills the groups itself: exit 1.
  guard_holds "the first stage" 1 "$build/dlaunch-watch" 1 "" "" /dev/null
  # dlaunch as the second stage: RunWatch, exit 0.
  guard_holds "the second stage" 0 "$DLAUNCH" 1 "" ""
  log "4: groups 1 and 0 are never killed, by either stage"
else
  log "4: needs root and unshare --pid: not tried"
fi

# 5. Not dumpable: exec of a file with capabilities by a user without them.
if [[ $(id -u) == 0 ]] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null && command -v setcap >/dev/null; then
  mkdir -m 755 "$TMP/caps"
  cp "$DLAUNCH" "$build/dlaunch-watch" "$TMP/caps/"
  chown nobody "$TMP/caps"
  setcap cap_net_bind_service+ep "$TMP/caps/dlaunch" || fail "5: setcap on a copy of dlaunch failed"
  not_dumpable() {
    local dl
    dl=$(dl_pid caps) || fail "5: cannot find its dlaunch"
    # Another process of the same user cannot open its binary, as the helper once did.
    if setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups cat "/proc/$dl/exe" >/dev/null 2>&1; then
      fail "5: nobody could open /proc/$dl/exe: this dlaunch is dumpable, so the case tests nothing"
    fi
  }
  BEFORE_KILL=not_dumpable killed_job caps "$TMP/caps" "setpriv --reuid=nobody --regid=$(id -gn nobody) --clear-groups"
  if grep -q "fork of dlaunch" "$TMP/caps.err"; then
    show_nodes caps
    fail "5: a dlaunch that is not dumpable fell back to a fork for its watchdog"
  fi
  log "5: a dlaunch with file capabilities: the same two stages"
else
  log "5: needs root, a 'nobody' user, setpriv and setcap: not tried"
fi

pass
