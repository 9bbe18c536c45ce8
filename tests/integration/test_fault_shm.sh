#!/usr/bin/env bash
# dlaunch's own small files (the private directory, the live view's directory
# with the loopback token and the kept stack hook) go to /dev/shm when TMPDIR
# does not say. Another local user (`nobody`) and a full or odd /dev/shm
# against them, each case in a mount namespace of its own with its own /dev/shm
# (or none), so that the machine's is never touched:
#   1. nobody makes /dev/shm/dlaunch-0 before root's first job: a 0777
#      directory holding the kept hook's sitecustomize.py, a symlink to a
#      directory of root's, a FIFO. Each is refused in one line and the job
#      runs, its hook in its private directory: nobody's code never runs.
#      `dlaunch status` says so in one line, a loopback job without a token
#      exits 2 naming it.
#   2. /dev/shm full (nobody filled it): the private directory goes to /tmp
#      with one line, and a failing worker's error file still gives the root
#      cause; out of inodes, with TMPDIR refused too, the same. Filled while
#      the job runs: a hang's stacks file that cannot be written is said to be
#      so, and not pointed at. A loopback job without a token, whose token
#      cannot be written, exits 2 saying why.
#   3. /dev/shm not a usable tmpfs (a ramfs, 0777 without the sticky bit,
#      nobody's, writable by nobody's group without the sticky bit, missing,
#      a symlink nobody made): /tmp. root's own symlink to a tmpfs is followed.
#   4. A worker's progress file is made by the worker: nobody cannot put
#      anything at its path first.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
unset TMPDIR XDG_RUNTIME_DIR DLAUNCH_RDZV_TOKEN

[[ $(id -u) == 0 ]] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null ||
  skip "needs root, a 'nobody' user and setpriv"
unshare -m true 2>/dev/null || skip "'unshare -m' does not work here"
as_nobody=(setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups)
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)
chmod 711 "$TMP"  # nobody may reach what it is given below, and nothing else of ours
TMP=$(realpath "$TMP")
export TMP NOBODY NOGROUP

# ns.sh ROOT_SETUP NOBODY_SETUP CMD...: in a mount namespace of its own, ROOT_SETUP
# (it puts something at /dev/shm), then NOBODY_SETUP as nobody, then CMD as root.
cat >"$TMP/ns.sh" <<'EOF'
#!/bin/sh
root_setup=$1 nobody_setup=$2
shift 2
sh -ec "$root_setup" || exit 98
[ -z "$nobody_setup" ] || setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups sh -ec "$nobody_setup" || exit 97
exec "$@"
EOF
chmod 755 "$TMP/ns.sh"
# run_ns ROOT_SETUP NOBODY_SETUP ARGS...: dlaunch ARGS run so.
run_ns() {
  local root_setup=$1 nobody_setup=$2
  shift 2
  run_cmd 30 unshare -m --propagation private "$TMP/ns.sh" "$root_setup" "$nobody_setup" "$DLAUNCH" "$@"
  [[ $RC != 97 && $RC != 98 ]] || fail_run "the namespace's setup failed"
}
SHM='mount -t tmpfs -o mode=1777 tmpfs /dev/shm'
# A /dev of its own, holding what the workers open; then /dev/shm is up to the setup.
NEWDEV='d=$(mktemp -d "$TMP/dev.XXXXXX"); mount -t tmpfs -o mode=755 tmpfs "$d"; for f in null zero random urandom; do touch "$d/$f"; mount --bind "/dev/$f" "$d/$f"; done; mount --move "$d" /dev'
UDIR=/dev/shm/dlaunch-0

# The worker says where its hook and its private directory are.
# shellcheck disable=SC2016  # expanded by Python
where='import os
print("hook", os.environ["PYTHONPATH"].split(":")[0])
print("dumps", os.environ["DLAUNCH_STACKS_DIR"])
print("loaded", os.path.exists("%s/%d.stacks" % (os.environ["DLAUNCH_STACKS_DIR"], os.getpid())))'

# --- 1. /dev/shm/dlaunch-0 made by nobody -----------------------------------------
# Without nobody: the hook is kept in root's own directory there.
run_ns "$SHM" "" --nproc-per-node 1 -- "$PY" -c "$where"
expect_rc 0 "a job on a fresh /dev/shm"
assert_file_matches "$OUT" "^hook $UDIR/hook-[0-9a-f]{16}$" "the hook kept in $UDIR"
hook_name=$(sed -n 's|^hook .*/||p' "$OUT")
cat >"$TMP/evil.py" <<EOF
import os
open("$TMP/pwned", "w").write("uid %d\n" % os.getuid())
EOF
chmod 644 "$TMP/evil.py"
plant_hook="mkdir -m 777 $UDIR $UDIR/$hook_name; cp $TMP/evil.py $UDIR/$hook_name/sitecustomize.py"
mkdir -m 700 "$TMP/roots"
for plant in "$plant_hook" "ln -s $TMP/roots $UDIR" "mkfifo $UDIR"; do
  case $plant in
  ln*) why="a symlink" ;;
  mkfifo*) why="not a directory" ;;
  *) why="owned by uid $NOBODY, not 0" ;;
  esac
  run_ns "$SHM" "$plant" --nproc-per-node 1 -- "$PY" -c "$where"
  [[ -e $TMP/pwned ]] && fail_run "nobody's code ran in root's worker: $(cat "$TMP/pwned")"
  expect_rc 0 "a job after nobody made $UDIR ($why)"
  assert_eq "$(cat "$ERR")" "dlaunch: $UDIR: refused ($why); the job runs without 'dlaunch status'" "the one line ($why)"
  dumps=$(sed -n 's/^dumps //p' "$OUT")
  assert_file_matches "$OUT" "^hook $dumps/py$" "the hook in the private directory ($why)"
  assert_file_matches "$OUT" "^loaded True$" "the hook ran ($why)"
  [[ -z $(ls -A "$TMP/roots") ]] || fail "something was made through nobody's link: $(ls -A "$TMP/roots")"
done
run_ns "$SHM" "mkdir -m 700 $UDIR" status
expect_rc 1 "dlaunch status after nobody made $UDIR"
assert_eq "$(cat "$ERR")" "dlaunch status: $UDIR: refused (owned by uid $NOBODY, not 0)" "dlaunch status's one line"
port=$(free_port)
run_ns "$SHM" "mkdir -m 700 $UDIR" --nnodes 2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" -- echo RAN
expect_rc 2 "a loopback job without a token after nobody made $UDIR"
assert_eq "$(tail -n 1 "$ERR")" "dlaunch: rendezvous 127.0.0.1:$port: no token given, and this user's loopback token cannot be used ($UDIR: refused (owned by uid $NOBODY, not 0)); set DLAUNCH_RDZV_TOKEN or --rdzv-token-file" \
  "the token's one line"

# --- 2. /dev/shm full ------------------------------------------------------------
# The worker's error file, written by name as torch's @record writes it.
# shellcheck disable=SC2016  # expanded by the worker's shell
fails='echo "error $TORCHELASTIC_ERROR_FILE"; echo "{\"message\": \"the worker said why\"}" >"$TORCHELASTIC_ERROR_FILE"; exit 3'
fill='dd if=/dev/zero of=/dev/shm/fill bs=64k 2>/dev/null || true'
run_ns "mount -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm" "$fill" --nproc-per-node 1 -- sh -c "$fails"
expect_rc 3 "a failing worker with /dev/shm full"
assert_file_matches "$ERR" "^dlaunch: /dev/shm: not used \(only [0-9]+ KiB free; 16 MiB wanted\); using /tmp$" \
  "the one line about /dev/shm"
assert_file_matches "$OUT" "^error /tmp/dlaunch-[A-Za-z0-9]{6}/error-0-0\.json$" "the error file under /tmp"
assert_file_matches "$ERR" "^dlaunch:   \| the worker said why$" "the root cause from the error file"
# Out of inodes, and TMPDIR refused as well: /tmp still, and the job runs.
TMPDIR=relative run_ns "mount -t tmpfs -o nr_inodes=64,mode=1777 tmpfs /dev/shm" \
  'i=0; while touch /dev/shm/f$i 2>/dev/null; do i=$((i + 1)); done' --nproc-per-node 1 -- sh -c "$fails"
expect_rc 3 "a failing worker with /dev/shm out of inodes and TMPDIR refused"
grep -Fxq "dlaunch: TMPDIR relative: not used (not an absolute path); /dev/shm: not used (only 0 inodes free; 1024 wanted); using /tmp" "$ERR" ||
  fail_run "the one line about TMPDIR and /dev/shm"
assert_file_matches "$ERR" "^dlaunch:   \| the worker said why$" "the root cause, out of inodes"
# Room at the start, filled while the job runs (a worker's shared memory):
# a hang's stacks-1.txt cannot be written, said in one line, and no empty one
# is left for dlaunch to point at.
run_ns "mount -t tmpfs -o size=20m,mode=1777 tmpfs /dev/shm" "" --hang-timeout 1 --hang-action stop \
  --nproc-per-node 1 -- "$PY" -c '
import os, subprocess, time
subprocess.call(["sh", "-c", "dd if=/dev/zero of=/dev/shm/fill bs=1M 2>/dev/null"])
print("filled", flush=True)
time.sleep(60)'
expect_rc 124 "a hang after /dev/shm filled"
assert_file_matches "$ERR" "^dlaunch: hang: /dev/shm/dlaunch-[A-Za-z0-9]{6}/stacks-1\.txt: cannot write \(No space left on device\)$" \
  "the one line about the stacks"
grep -q "stacks are in" "$ERR" && fail_run "dlaunch pointed at stacks it could not write"
port=$(free_port)
run_ns "mount -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm" "$fill" --nnodes 2 --nproc-per-node 1 \
  --rdzv-endpoint "127.0.0.1:$port" -- echo RAN
expect_rc 2 "a loopback job without a token, /dev/shm full"
tail -n 1 "$ERR" | grep -Eqx "dlaunch: rendezvous 127\.0\.0\.1:$port: no token given, and this user's loopback token cannot be used \($UDIR/\.rdzv-token\.[A-Za-z0-9]{6}: cannot write \(No space left on device\)\); set DLAUNCH_RDZV_TOKEN or --rdzv-token-file" ||
  fail_run "the token's one line, /dev/shm full"

# --- 3. /dev/shm not a usable tmpfs ---------------------------------------------
# shellcheck disable=SC2016  # expanded by the worker's shell
says='echo "error $TORCHELASTIC_ERROR_FILE"'
mkdir "$TMP/shm"
while IFS='|' read -r what setup nobody_setup want; do
  run_ns "$setup" "$nobody_setup" --nproc-per-node 1 -- sh -c "$says"
  expect_rc 0 "a job with /dev/shm $what"
  assert_file_matches "$OUT" "^error $want/dlaunch-[A-Za-z0-9]{6}/error-0-0\.json$" "the private directory with /dev/shm $what"
done <<EOF
a ramfs, not a tmpfs|mount -t ramfs -o mode=1777 ramfs /dev/shm||/tmp
open to every user, not sticky|mount -t tmpfs -o mode=0777 tmpfs /dev/shm||/tmp
owned by nobody|mount -t tmpfs -o mode=1777,uid=$NOBODY tmpfs /dev/shm||/tmp
writable by nobody's group, not sticky|mount -t tmpfs -o mode=0775,gid=$NOGROUP tmpfs /dev/shm||/tmp
only root's to write|mount -t tmpfs -o mode=0755 tmpfs /dev/shm||/dev/shm
missing|$NEWDEV||/tmp
root's symlink to a sticky tmpfs|$NEWDEV; mount -t tmpfs -o mode=1777 tmpfs $TMP/shm; ln -s $TMP/shm /dev/shm||$TMP/shm
nobody's symlink in a /dev anyone may write|$NEWDEV; mount -t tmpfs -o mode=1777 tmpfs $TMP/shm; chmod 1777 /dev|ln -s $TMP/shm /dev/shm|/tmp
EOF

# --- 4. the progress file ------------------------------------------------------
# The worker waits (at most 10 s) until nobody has tried, then writes its file.
# shellcheck disable=SC2016  # expanded by the worker's shell
start_dl progress 60 --nproc-per-node 1 -- sh -c 'echo "progress $DLAUNCH_PROGRESS_FILE"
i=0; while [ ! -e "$0/tried" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
echo 7 >"$DLAUNCH_PROGRESS_FILE" && echo "wrote $(stat -c "%F %u" "$DLAUNCH_PROGRESS_FILE")"' "$TMP"
wait_for 20 file_has "$TMP/progress.out" '^progress /' || fail "the worker did not say where its progress file is"
pf=$(sed -n 's/^progress //p' "$TMP/progress.out")
for try in "ln -s $TMP/roots/x $pf" "mkfifo $pf" "touch $pf"; do
  # shellcheck disable=SC2086  # one command's words
  "${as_nobody[@]}" $try 2>/dev/null && fail "nobody could '$try' before the worker wrote its progress file"
done
touch "$TMP/tried"
wait_dl progress
expect_rc 0 "the job whose progress file nobody tried to plant"
assert_file_matches "$OUT" "^wrote regular file 0$" "the worker's own progress file"
[[ -z $(ls -A "$TMP/roots") ]] || fail "something was made through nobody's link: $(ls -A "$TMP/roots")"

wait_for 10 no_marked_processes || assert_no_leftovers "at the end"
pass
