#!/usr/bin/env bash
# ctest: LABELS=quick
# Another local user (`nobody`) against root's private directory and --log-dir
# through directories that user controls:
#   1. TMPDIR is nobody's directory (as after `sudo -E`). nobody watches it,
#      renames root's fresh dlaunch-XXXXXX and puts its own 0777 directory in
#      its place, holding a symlink error-0-0.json to a 0600 file of root's;
#      the worker then writes TORCHELASTIC_ERROR_FILE, as torch's @record does.
#      dlaunch must not make its private directory there: it says so in one
#      line, uses /dev/shm (or /tmp), and the job runs; root's file is unchanged, and the
#      stack hook, its dumps and `dlaunch job`'s hostfile are not under
#      nobody's TMPDIR either.
#   2. nobody plants a symlink in /tmp to a directory of root's; root runs
#      `dlaunch --log-dir /tmp/LINK`. Refused in one line, exit 2, nothing
#      written there, whatever fs.protected_symlinks says (it may be 0); the
#      same link as TMPDIR is not used either.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

if ! [[ $(id -u) == 0 ]] || ! id nobody >/dev/null 2>&1 || ! command -v setpriv >/dev/null; then
  skip "needs root, a 'nobody' user and setpriv"
fi
as_nobody=(setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups)
NOBODY=$(id -u nobody)
chmod 711 "$TMP"  # nobody may pass through to its own directory, and no further
TMP=$(realpath "$TMP")
printf 'precious\n' >"$TMP/secret"
chmod 600 "$TMP/secret"
secret_intact() { [[ $(cat "$TMP/secret") == precious ]] || fail "$1: root's 0600 file was overwritten: $(head -c 200 "$TMP/secret")"; }

# --- 1. TMPDIR in nobody's directory -------------------------------------------
export THEIRS=$TMP/theirs  # the worker reads it
mkdir "$THEIRS"
chown nobody "$THEIRS"
chmod 755 "$THEIRS"
# The attacker: every root-owned dlaunch-* that shows up in its directory is
# replaced by its own, with the link in it; "swapped" says one was. It stops
# by itself after 60 s, or when "stop" appears.
cat >"$TMP/attack.sh" <<'EOF'
dir=$1 secret=$2
shopt -s nullglob
end=$((SECONDS + 60))
while ((SECONDS < end)) && [[ ! -e $dir/stop ]]; do
  for d in "$dir"/dlaunch-*; do
    [[ $(stat -c %u "$d" 2>/dev/null) == 0 ]] || continue
    mv "$d" "$dir/stolen-${d##*/}" 2>/dev/null || continue
    mkdir -m 777 "$d" && chmod 777 "$d" && ln -s "$secret" "$d/error-0-0.json" && touch "$dir/swapped"
  done
  sleep 0.01
done
EOF
chmod 644 "$TMP/attack.sh"
"${as_nobody[@]}" bash "$TMP/attack.sh" "$THEIRS" "$TMP/secret" &
ATTACKER=$!
track_pid "$ATTACKER"
stop_attacker() { "${as_nobody[@]}" touch "$THEIRS/stop" 2>/dev/null; wait "$ATTACKER" 2>/dev/null; }
at_exit stop_attacker

# The worker: where its private files are, then its error file, written by name
# once the attacker had its chance (at most 10 s, and only when the error file
# is under nobody's TMPDIR at all).
# shellcheck disable=SC2016  # expanded by the worker's shell
worker='echo "error $TORCHELASTIC_ERROR_FILE"
case $TORCHELASTIC_ERROR_FILE in
"$THEIRS"/*) i=0; while [ ! -e "$THEIRS/swapped" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done ;;
esac
echo "{\"message\": \"written by the worker\"}" >"$TORCHELASTIC_ERROR_FILE"'
# Without a usable TMPDIR, dlaunch's own files go to its default parent.
RAM=$(default_temp_parent)
note="dlaunch: TMPDIR $THEIRS: refused (owned by uid $NOBODY, not 0); using $RAM"
TMPDIR=$THEIRS run_dl 60 --nproc-per-node 1 -- sh -c "$worker"
secret_intact "TORCHELASTIC_ERROR_FILE under nobody's TMPDIR"
expect_rc 0 "a job whose TMPDIR is nobody's"
assert_eq "$(cat "$ERR")" "$note" "the one line about TMPDIR"
assert_file_matches "$OUT" "^error $RAM/dlaunch-[A-Za-z0-9]{6}/error-0-0\.json$" "the error file under $RAM"
[[ -e $THEIRS/swapped ]] && fail "nobody replaced a directory of root's in its TMPDIR"

# With --log-dir the private directory is made apart from it, by the same rule;
# the stack hook (its fallback directory too) and its dumps go in it.
TMPDIR=$THEIRS run_dl 60 --log-dir "$TMP/logs" --rdzv-id job1 --nproc-per-node 1 -- "$PY" -c '
import os
print("dumps", os.environ["DLAUNCH_STACKS_DIR"])
print("hook", os.environ["PYTHONPATH"].split(":")[0])
print("error", os.environ["TORCHELASTIC_ERROR_FILE"])'
expect_rc 0 "a job with --log-dir whose TMPDIR is nobody's"
assert_eq "$(cat "$ERR")" "$note" "the one line about TMPDIR, with --log-dir"
grep -q "$THEIRS" "$OUT" && fail_run "a private file under nobody's TMPDIR"
assert_file_matches "$OUT" "^dumps $RAM/dlaunch-[A-Za-z0-9]{6}$" "the dumps under $RAM"
# The user's own directory for the hook refused (nobody's, in a sticky
# XDG_RUNTIME_DIR): the hook goes in the private directory instead.
mkdir "$TMP/xdg"
chmod 1777 "$TMP/xdg"
"${as_nobody[@]}" mkdir -m 777 "$TMP/xdg/dlaunch" || fail "nobody could not plant the user directory"
XDG_RUNTIME_DIR=$TMP/xdg TMPDIR=$THEIRS run_dl 60 --nproc-per-node 1 -- "$PY" -c '
import os
print("hook", os.environ["PYTHONPATH"].split(":")[0])'
expect_rc 0 "a job whose hook goes in the private directory"
grep -Fxq "$note" "$ERR" || fail_run "the one line about TMPDIR, with the hook in the private directory"
assert_file_matches "$OUT" "^hook $RAM/dlaunch-[A-Za-z0-9]{6}/py$" "the hook's fallback directory under $RAM"
# `dlaunch job` with an mpirun command writes a hostfile that mpirun reads by
# name: not in nobody's TMPDIR either, and TMPDIR is named once.
mkdir -p "$TMP/job/bin"
cat >"$TMP/job/bin/mpirun" <<'EOF'
#!/bin/sh
echo "hostfile $AZUREML_MPI_HOSTFILE $(cat "$AZUREML_MPI_HOSTFILE")"
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
TMPDIR=$THEIRS run_dl 60 job "$TMP/job/mpi.yml"
expect_rc 0 "dlaunch job whose TMPDIR is nobody's"
# The hostfile comes first, and mpirun may want it on a disk: /tmp.
assert_eq "$(cat "$ERR")" "${note% using *} using /tmp" "the one line about TMPDIR, for dlaunch job"
assert_file_matches "$OUT" "^hostfile /tmp/dlaunch-hosts-[A-Za-z0-9]{6} localhost slots=4$" "the hostfile under /tmp"
[[ -z $(find "$THEIRS" -user 0) ]] || fail "root made something in nobody's TMPDIR: $(find "$THEIRS" -user 0)"
secret_intact "at the end of part 1"
stop_attacker

# --- 2. a --log-dir link nobody planted in /tmp ----------------------------------
LINK=/tmp/dlaunch-it-link-$$
at_exit "rm -f $LINK"
mkdir -m 700 "$TMP/roots"
"${as_nobody[@]}" ln -s "$TMP/roots" "$LINK" || fail "nobody could not plant $LINK"
log "fs.protected_symlinks is $(cat /proc/sys/fs/protected_symlinks 2>/dev/null || echo unknown)"
refusal="dlaunch: --log-dir $LINK: refused (the symbolic link $LINK is owned by uid $NOBODY in a directory others can write)"
# shellcheck disable=SC2086  # $explain: no word when empty
for explain in "" --explain; do
  run_dl 30 $explain --log-dir "$LINK" --rdzv-id job2 --nproc-per-node 1 -- echo written
  expect_rc 2 "dlaunch $explain --log-dir through nobody's link"
  assert_eq "$(cat "$ERR")" "$refusal" "the refusal ($explain)"
done
[[ -z $(ls -A "$TMP/roots") ]] || fail "something was written through the link: $(ls -A "$TMP/roots")"
# Below it too.
run_dl 30 --log-dir "$LINK/below" --rdzv-id job2 --nproc-per-node 1 -- echo written
expect_rc 2 "--log-dir below nobody's link"
[[ -z $(ls -A "$TMP/roots") ]] || fail "something was made through the link: $(ls -A "$TMP/roots")"
# As TMPDIR: not used, and the job runs.
# shellcheck disable=SC2016  # expanded by the worker's shell
TMPDIR=$LINK run_dl 30 --nproc-per-node 1 -- sh -c 'echo "error $TORCHELASTIC_ERROR_FILE"'
expect_rc 0 "TMPDIR through nobody's link"
assert_eq "$(cat "$ERR")" \
  "dlaunch: TMPDIR $LINK: refused (the symbolic link $LINK is owned by uid $NOBODY in a directory others can write); using $RAM" \
  "the one line about TMPDIR"
assert_file_matches "$OUT" "^error $RAM/dlaunch-[A-Za-z0-9]{6}/error-0-0\.json$" "the error file under $RAM"
[[ -z $(ls -A "$TMP/roots") ]] || fail "the private directory was made through the link"
# root's own link there is followed.
rm -f "$LINK"
ln -s "$TMP/roots" "$LINK"
run_dl 30 --log-dir "$LINK" --rdzv-id job3 --nproc-per-node 1 -- echo fine
expect_rc 0 "--log-dir through root's own link"
[[ -d $TMP/roots/job3 ]] || fail "the run directory is not where root's link leads"

# In a user namespace (rootless containers: unshare -r, bwrap, Apptainer) the
# host's root, who owns /tmp, shows as the overflow uid: trusted as root, and
# the job runs.
if setpriv --reuid=12345 --regid=12345 --clear-groups unshare --map-current-user true 2>/dev/null; then
  run_cmd 30 setpriv --reuid=12345 --regid=12345 --clear-groups unshare --map-current-user \
    "$DLAUNCH" --nproc-per-node 1 -- echo "in a namespace"
  expect_rc 0 "a job in a user namespace, /tmp owned by the overflow uid"
  assert_eq "$(cat "$OUT")" "in a namespace" "the job's output in a user namespace"
else
  log "no unprivileged user namespaces here: that case is skipped"
fi

wait_for 10 no_marked_processes || assert_no_leftovers "at the end"
pass
