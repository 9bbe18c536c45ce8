#!/usr/bin/env bash
# Another local user (`nobody`) against root's jobs through shared directories
# (issue 18, items 1, 3 and 10). Each attack must be refused with one line
# naming the path and a non-zero exit, or must not reach root's files:
#   1. a shared --log-dir (mode 1777): a planted RUN_ID/py/sitecustomize
#      package must not run as root, a planted attempt_0/0/stdout.log symlink
#      must not be written through, a planted RUN_ID symlink is refused, a
#      log dir anyone may write without the sticky bit is refused, and root's
#      own run directory is 0700 and reused by root's next run;
#   2. what dlaunch reads back (the stack hook's dumps, the error files) is
#      in a 0700 directory of its own, outside the log dir, gone when the job
#      ends: normally, after a failure, and after dlaunch is killed; the hook
#      itself is kept in the user's own 0700 directory (issue 21), and one that
#      nobody planted there is refused: the hook then goes in the private one;
#   3. `dlaunch job`'s hostfile (mpirun, here and on node 0 of a node list) is
#      a new 0600 file with an unpredictable name; symlinks planted at the old,
#      predictable name are never written through;
#   4. --events: a symlink another user planted is refused; every line is
#      valid UTF-8 whatever bytes the run id and the arguments hold.
# Parts 1, 3 and 4's attacks need root, `nobody` and setpriv; the rest runs as anyone.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

ME=$(id -u)
ATTACK=0
if [[ $ME == 0 ]] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
  ATTACK=1
  as_nobody=(setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups)
  chmod 711 "$TMP"  # nobody may pass through to the shared directories, and no further
else
  log "not root, or no 'nobody' or setpriv: the attacks of another user are not tried"
fi
SHARED=$TMP/shared
mkdir -m 1777 "$SHARED"
chmod 1777 "$SHARED"  # as /tmp, whatever the umask
SHARED=$(realpath "$SHARED")
printf 'precious\n' >"$TMP/secret"
chmod 600 "$TMP/secret"
secret_intact() { [[ $(cat "$TMP/secret") == precious ]] || fail "$1: root's 0600 file was overwritten: $(head -c 200 "$TMP/secret")"; }

# --- 1. a shared --log-dir ---------------------------------------------------
if ((ATTACK)); then
  # nobody's code, as Python would import it before dlaunch's sitecustomize.py.
  cat >"$TMP/evil.py" <<EOF
import os
try:
    open("$TMP/pwned", "w").write("uid %d\n" % os.getuid())
except OSError:
    pass
EOF
  chmod 644 "$TMP/evil.py"
  "${as_nobody[@]}" sh -c 'mkdir -p "$1/job42/py/sitecustomize" && cp "$2" "$1/job42/py/sitecustomize/__init__.py"' _ \
    "$SHARED" "$TMP/evil.py" || fail "nobody could not plant the package"
  run_dl 30 --log-dir "$SHARED" --rdzv-id job42 --nproc-per-node 1 -- "$PY" -c 'print("trained")'
  [[ -e $TMP/pwned ]] && fail_run "nobody's sitecustomize ran in root's worker: $(cat "$TMP/pwned")"
  expect_rc 2 "a run directory nobody made"
  assert_eq "$(cat "$ERR")" "dlaunch: --log-dir $SHARED/job42: refused (owned by uid $(id -u nobody), not 0)" "the refusal"

  # A planted symlink where a rank's log goes.
  "${as_nobody[@]}" sh -c 'mkdir -p "$1/job43/attempt_0/0" && ln -s "$2" "$1/job43/attempt_0/0/stdout.log"' _ \
    "$SHARED" "$TMP/secret" || fail "nobody could not plant the symlink"
  run_dl 30 --log-dir "$SHARED" --rdzv-id job43 --nproc-per-node 1 -- echo overwritten
  secret_intact "a planted stdout.log"
  expect_rc 2 "a planted attempt directory"
  assert_eq "$(cat "$ERR")" "dlaunch: --log-dir $SHARED/job43: refused (owned by uid $(id -u nobody), not 0)" "the refusal"

  # The run directory itself a symlink (to a directory of root's).
  mkdir -m 700 "$TMP/roots"
  "${as_nobody[@]}" ln -s "$TMP/roots" "$SHARED/job45" || fail "nobody could not plant the link"
  run_dl 30 --log-dir "$SHARED" --rdzv-id job45 --nproc-per-node 1 -- echo hi
  expect_rc 2 "a run directory that is a symlink"
  assert_eq "$(cat "$ERR")" "dlaunch: --log-dir $SHARED/job45: refused (a symbolic link)" "the refusal"
  [[ -z $(ls -A "$TMP/roots") ]] || fail "something was written through the link: $(ls -A "$TMP/roots")"
fi

# Anyone may rename what is made in a directory every user can write, unless it is sticky.
mkdir "$TMP/open"
chmod 777 "$TMP/open"
run_dl 30 --log-dir "$TMP/open" --rdzv-id job46 --nproc-per-node 1 -- echo hi
expect_rc 2 "a log dir anyone may write, not sticky"
assert_eq "$(cat "$ERR")" \
  "dlaunch: --log-dir $(realpath "$TMP/open"): refused (mode 0777 lets every user replace what is made in it; chmod +t, as /tmp has)" \
  "the refusal"
[[ -e $TMP/open/job46 ]] && fail "the run directory was made in a directory anyone may write"
run_dl 30 --log-dir "$SHARED" --rdzv-id 'a/../../b' --nproc-per-node 1 -- echo hi
expect_rc 2 "a run id with a slash"
assert_eq "$(cat "$ERR")" "dlaunch: --log-dir $SHARED: run id 'a/../../b' cannot name a directory in it" "the refusal"

# Root's own run directory: 0700, nobody can put anything in it, and root's next
# run with the same id reuses it.
run_dl 30 --log-dir "$SHARED" --rdzv-id job44 --nproc-per-node 2 -- sh -c 'echo "first $RANK"'
expect_rc 0 "a job in the shared log dir"
assert_eq "$(stat -c '%a %u' "$SHARED/job44" "$SHARED/job44/attempt_0" "$SHARED/job44/attempt_0/1" | sort -u)" "700 $ME" \
  "the run directory's mode and owner, at each level"
if ((ATTACK)); then
  "${as_nobody[@]}" mkdir "$SHARED/job44/x" 2>/dev/null && fail "nobody could write into root's run directory"
  "${as_nobody[@]}" mv "$SHARED/job44" "$SHARED/moved" 2>/dev/null && fail "nobody could move root's run directory"
fi
run_dl 30 --log-dir "$SHARED" --rdzv-id job44 --nproc-per-node 2 -- sh -c 'echo "second $RANK"'
expect_rc 0 "the same id again"
assert_eq "$(cat "$SHARED/job44/attempt_0/1/stdout.log")" "second 1" "rank 1's log of the second run"
assert_eq "$(ls -A "$SHARED/job44")" "attempt_0" "the run directory holds the logs alone"
assert_eq "$(ls -A "$SHARED/job44/attempt_0/0")" "$(printf 'stderr.log\nstdout.log')" "an attempt directory holds the logs alone"

# --- 2. the private directory --------------------------------------------------
# The user's own directory, where the hook is kept across jobs (as the live
# view's sockets are): under an XDG_RUNTIME_DIR of this test's.
export XDG_RUNTIME_DIR=$TMP/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR"
USER_DIR=$XDG_RUNTIME_DIR/dlaunch
# The worker says where the hook, its dumps and its error file are (the dumps
# go into the private directory itself).
cat >"$TMP/where.py" <<'EOF'
import os, sys
hook = os.environ["PYTHONPATH"].split(":")[0]
print("hook", hook, "dumps", os.environ["DLAUNCH_STACKS_DIR"], "error", os.environ["TORCHELASTIC_ERROR_FILE"], flush=True)
print("loaded", os.path.exists(os.path.join(os.environ["DLAUNCH_STACKS_DIR"], "%d.stacks" % os.getpid())), flush=True)
if len(sys.argv) > 1:
    sys.exit(int(sys.argv[1]))
EOF
# private_dir_of FILE: the private directory a worker named in FILE.
private_dir_of() { sed -n 's/^\(\[[0-9]*\]: \)\{0,1\}hook .* dumps \(.*\) error .*/\2/p' "$1" | head -n 1; }
check_private() {
  local what=$1 dir=$2 parent_must=$3
  [[ -n $dir ]] || fail_run "$what: the worker did not say where the hook is"
  assert_file_matches "$OUT" "hook $USER_DIR/hook-[0-9a-f]{16} dumps $dir error $dir/error-0-0\.json$" \
    "$what: the hook in the user's directory, dumps and error file in the private one"
  [[ $dir == "$parent_must"/* ]] || fail "$what: the private directory $dir is not under $parent_must"
  [[ -e $dir ]] && fail "$what: the private directory $dir is still there after the job"
  return 0
}
run_dl 30 --log-dir "$SHARED" --rdzv-id job47 --nproc-per-node 1 -- "$PY" -u "$TMP/where.py"
expect_rc 0 "a job that reports its private directory"
assert_file_matches "$OUT" "^loaded True$" "the hook ran"
# dlaunch's own small files: under TMPDIR, else its default parent (/dev/shm).
RAM=${TMPDIR:-$(default_temp_parent)}
check_private "with --log-dir" "$(private_dir_of "$OUT")" "$RAM"
[[ -e $SHARED/job47/py || -n $(find "$SHARED/job47" -name "*.stacks") ]] && fail "the hook was written into the shared log dir"
# The modes while it lives: a worker that looks at them.
run_dl 30 --log-dir "$SHARED" --rdzv-id job48 --nproc-per-node 1 -- "$PY" -c '
import os
d = os.environ["DLAUNCH_STACKS_DIR"]
h = os.environ["PYTHONPATH"].split(":")[0]
for what, p in (("private", d), ("hookdir", h), ("hook", h + "/sitecustomize.py")):
    st = os.stat(p)
    print(what, "%o" % (st.st_mode & 0o777), st.st_uid)'
expect_rc 0 "a job that looks at its private directory"
assert_file_matches "$OUT" "^private 700 $ME$" "the private directory is 0700 and root's"
assert_file_matches "$OUT" "^hookdir 700 $ME$" "the hook's directory is 0700 and root's"
assert_file_matches "$OUT" "^hook 600 $ME$" "the hook is 0600 and root's"
# After a failure, and without --log-dir (then it is inside the run directory).
run_dl 30 --nproc-per-node 1 -- "$PY" -u "$TMP/where.py" 3
expect_rc 3 "a failing job"
dir=$(private_dir_of "$OUT")
check_private "after a failure" "$dir" "$RAM"
# Without logs the fresh run directory is the private one (and gone, above).
[[ $(basename "$dir") =~ ^dlaunch-[A-Za-z0-9]{6}$ ]] ||
  fail_run "after a failure: the private directory $dir is not the fresh run directory itself"
run_dl 30 --tee 3 --nproc-per-node 1 -- "$PY" -u "$TMP/where.py"
expect_rc 0 "a job with logs and no --log-dir"
dir=$(private_dir_of "$OUT")
check_private "with logs in a run directory of its own" "$dir" "$RAM"
# The logs may grow: on a disk, under TMPDIR or /tmp, apart from the private directory.
assert_file_matches "$ERR" "^dlaunch: logs are in ${TMPDIR:-/tmp}/dlaunch-[A-Za-z0-9]{6}$" "the run directory is named"
run=$(sed -n 's/^dlaunch: logs are in //p' "$ERR")
[[ -f $run/attempt_0/0/stdout.log ]] || fail "the logs are not in $run"
rm -rf -- "$run"
# dlaunch killed outright: the watchdog removes it.
start_dl killed 60 --log-dir "$SHARED" --rdzv-id job49 --nproc-per-node 1 -- "$PY" -c '
import os, time
print("dumps", os.environ["DLAUNCH_STACKS_DIR"], flush=True)
time.sleep(60)'
wait_for 20 file_has "$TMP/killed.out" '^dumps ' || fail "the killed job's worker did not start"
dir=$(sed -n 's/^dumps \(.*\)$/\1/p' "$TMP/killed.out")
[[ -d $dir ]] || fail "the private directory $dir of a running job does not exist"
kill -KILL "$(dl_pid killed)"
wait_for 10 test ! -e "$dir" || fail "the private directory $dir outlived a killed dlaunch"
wait_dl killed
wait_for 10 no_marked_processes || assert_no_leftovers "after killing dlaunch"
# The user's directory planted by nobody: refused, and the hook goes in the
# private directory, where nobody's code cannot be.
if ((ATTACK)); then
  # A root-owned directory everyone may write, as /dev/shm is for /dev/shm/dlaunch-UID.
  export XDG_RUNTIME_DIR=$TMP/xdg-planted
  mkdir "$XDG_RUNTIME_DIR"
  chmod 1777 "$XDG_RUNTIME_DIR"
  hook_name=$(basename "$(compgen -G "$USER_DIR/hook-*")")
  "${as_nobody[@]}" sh -c 'mkdir -m 777 "$1/dlaunch" "$1/dlaunch/$2" && cp "$3" "$1/dlaunch/$2/sitecustomize.py"' _ \
    "$XDG_RUNTIME_DIR" "$hook_name" "$TMP/evil.py" || fail "nobody could not plant the hook"
  run_dl 30 --nproc-per-node 1 -- "$PY" -u "$TMP/where.py"
  [[ -e $TMP/pwned ]] && fail_run "nobody's hook ran in root's worker: $(cat "$TMP/pwned")"
  expect_rc 0 "a job whose user directory nobody planted"
  assert_file_matches "$OUT" "^loaded True$" "the hook ran from the private directory"
  dir=$(private_dir_of "$OUT")
  assert_file_matches "$OUT" "hook $dir/py dumps $dir " "the hook in the private directory"
  export XDG_RUNTIME_DIR=$TMP/xdg
fi

# --- 3. dlaunch job's hostfile --------------------------------------------------
# A stand-in mpirun: says what AZUREML_MPI_HOSTFILE is (name, mode, owner, text).
mkdir -p "$TMP/job/bin"
cat >"$TMP/job/bin/mpirun" <<'EOF'
#!/bin/sh
f=$AZUREML_MPI_HOSTFILE
echo "hostfile $(basename "$f") $(stat -c '%a %u' "$f") $(tr '\n' ';' <"$f")"
echo "$f" >"$(dirname "$0")/last"
EOF
chmod 755 "$TMP/job/bin/mpirun"
cat >"$TMP/job/mpi.yml" <<EOF
command: $TMP/job/bin/mpirun -np 4 x
distributed:
  mpi:
    worker:
      count: 2
      slots_per: 2
EOF
# Here (no node list): the hostfile dlaunch writes itself.
TMPDIR=$SHARED run_dl 60 job "$TMP/job/mpi.yml"
expect_rc 0 "dlaunch job with an mpirun command"
assert_file_matches "$OUT" "^hostfile dlaunch-hosts-[A-Za-z0-9]{6} 600 $ME localhost slots=4;$" \
  "a new 0600 hostfile with an unpredictable name in TMPDIR"
[[ -e $(cat "$TMP/job/bin/last") ]] && fail "the hostfile $(cat "$TMP/job/bin/last") was left behind"
# On node 0 of a node list: a shell snippet writes it. Run the very command
# --explain shows, after nobody planted a symlink at every name it predicts.
run_dl 10 job "$TMP/job/mpi.yml" -H 127.0.0.1,127.0.0.2 --explain
expect_rc 0 "--explain of the node-list form"
line=$(grep '^job: ' "$OUT") || fail_run "--explain printed no flags"
words=()
eval "words=(${line#*, as: dlaunch })"
for ((i = 0; i < ${#words[@]}; ++i)); do [[ ${words[i]} == -- ]] && break; done
snippet=("${words[@]:i+1}")
[[ ${snippet[0]} == /bin/sh && ${snippet[1]} == -c ]] || fail "--explain's command is not /bin/sh -c: ${snippet[*]}"
if ((ATTACK)); then
  # shellcheck disable=SC2013  # the names are one word each
  for name in $(grep -o 'dlaunch-[a-z]*-[0-9a-f]\{8,\}\.hosts' <<<"${snippet[2]}"); do
    "${as_nobody[@]}" ln -s "$TMP/secret" "$SHARED/$name" || fail "nobody could not plant $name"
  done
fi
TMPDIR=$SHARED DLAUNCH_JOB_HOSTS="127.0.0.1 slots=2,127.0.0.2 slots=2" run_cmd 30 "${snippet[@]}"
secret_intact "the node-0 hostfile"
expect_rc 0 "the node-0 wrapper"
assert_file_matches "$OUT" "^hostfile dlaunch-hosts-[A-Za-z0-9]{6} 600 $ME 127.0.0.1 slots=2;127.0.0.2 slots=2;$" \
  "node 0's hostfile: new, 0600, unpredictable"
[[ -e $(cat "$TMP/job/bin/last") ]] && fail "node 0's hostfile was left behind"

# --- 4. --events ---------------------------------------------------------------
if ((ATTACK)); then
  "${as_nobody[@]}" ln -s "$TMP/secret" "$SHARED/events.jsonl" || fail "nobody could not plant the events link"
  run_dl 30 --events "$SHARED/events.jsonl" --nproc-per-node 1 -- true
  secret_intact "--events through nobody's symlink"
  expect_rc 2 "--events at nobody's symlink"
  assert_eq "$(cat "$ERR")" \
    "dlaunch: --events $SHARED/events.jsonl: refused (a symbolic link owned by uid $(id -u nobody); only yours or root's are followed)" \
    "the refusal"
fi
run_dl 30 --events "$TMP/events.jsonl" --rdzv-id $'job\xff' --nproc-per-node 1 -- sh -c 'exit 0' $'arg\xc0\xaf\x1b'
expect_rc 0 "a job whose run id and argument are not UTF-8"
run_cmd 10 "$PY" -c '
import json, sys
for n, raw in enumerate(open(sys.argv[1], "rb"), 1):
    e = json.loads(raw.decode("utf-8"))  # strict: invalid UTF-8 raises
    print(e["event"], ascii(e["run_id"]), ascii(e.get("command", [""])[-1]))
' "$TMP/events.jsonl"
expect_rc 0 "every --events line is valid UTF-8 JSON"
assert_file_matches "$OUT" "^job_started 'job\\\\ufffd' 'arg\\\\ufffd\\\\ufffd\\\\x1b'$" "the bad bytes are U+FFFD, the rest kept"

wait_for 10 no_marked_processes || assert_no_leftovers "at the end"
pass
