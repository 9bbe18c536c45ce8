#!/usr/bin/env bash
# ctest: PROCESSORS=2
# Several programs in one job on this one machine, with real processes:
#   a. `dlaunch -np 1 --role a -- W A : -np 3 --role b -- W B` against the real
#      Open MPI `mpirun -np 1 W A : -np 3 W B` (openmpi-bin): rank by rank the
#      same program, local rank and sizes; ROLE_NAME/ROLE_RANK/ROLE_WORLD_SIZE
#      of each group;
#   b. a group's -x and --env ompi reach that group alone; a job flag after ':'
#      is refused; a worker's own ':' and an escaped '\:' stay arguments;
#   c. a worker failing in one group stops the whole job with its exit code,
#      and nothing is left running;
#   d. --multi-prog FILE (srun's format) with ranges, a list, '*', %t and %o;
#   e. bad input: one line naming the group or FILE:LINE, a non-zero exit;
#   f. (a) again in torchrun's form, the scripts under pyenv's Python (PYTHON_EXEC);
#   g. --role-restarts rollout=2: a rollout worker fails twice, only the rollout
#      restarts (a world of its own), the trainers keep their PIDs; with its
#      restarts spent the job ends with the rollout's code;
#   h. a head launch, each group on its own hosts (loopback addresses, started
#      through a local shell): ranks, roles and nodes as placed;
#   i. dlaunch SIGKILLed while a role's restarted worker runs: no worker left.
# Workers write what they see to files named by rank, so no output prefix is parsed.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE \
  PMIX_RANK SLURM_JOB_ID ONLY_A ONLY_B PET_NPROC_PER_NODE PET_NNODES
mkdir -p "$TMP/mpi" "$TMP/dl" "$TMP/env" "$TMP/fail" "$TMP/mp" "$TMP/py" "$TMP/rr" "$TMP/spent" "$TMP/head"

# W DIR PROG: one line to DIR/<rank>, the rank from dlaunch's RANK or mpirun's
# OMPI_COMM_WORLD_RANK: the program, then both launchers' variables.
cat >"$TMP/w.sh" <<'EOF'
#!/bin/sh
dir=$1 prog=$2
r=${RANK:-$OMPI_COMM_WORLD_RANK}
echo "prog=$prog rank=${RANK-unset} local=${LOCAL_RANK-unset} size=${WORLD_SIZE-unset} local_size=${LOCAL_WORLD_SIZE-unset} role=${ROLE_NAME-unset}/${ROLE_RANK-unset}/${ROLE_WORLD_SIZE-unset} ompi=${OMPI_COMM_WORLD_RANK-unset}/${OMPI_COMM_WORLD_LOCAL_RANK-unset}/${OMPI_COMM_WORLD_SIZE-unset}/${OMPI_COMM_WORLD_LOCAL_SIZE-unset} x=${ONLY_A-unset}/${ONLY_B-unset}" >"$dir/$r.tmp"
mv "$dir/$r.tmp" "$dir/$r"
EOF
chmod +x "$TMP/w.sh"
# The same under a Python, for (f).
cat >"$TMP/w.py" <<'EOF'
import os, sys
e = os.environ.get
d, prog = sys.argv[1], sys.argv[2]
line = "prog=%s rank=%s local=%s size=%s local_size=%s role=%s/%s/%s python=%s" % (
    prog, e("RANK", "unset"), e("LOCAL_RANK", "unset"), e("WORLD_SIZE", "unset"), e("LOCAL_WORLD_SIZE", "unset"),
    e("ROLE_NAME", "unset"), e("ROLE_RANK", "unset"), e("ROLE_WORLD_SIZE", "unset"), sys.executable)
with open(os.path.join(d, e("RANK", "x")), "w") as f:
    f.write(line + "\n")
EOF

# field FILE NAME: the value of NAME=... in FILE's line.
field() { sed -nE "s/.*(^| )$2=([^ ]*).*/\2/p" "$1"; }

# --- a. Two groups on one node, against mpirun -------------------------------
run_dl 60 -np 1 --role a -- "$TMP/w.sh" "$TMP/dl" A : -np 3 --role b -- "$TMP/w.sh" "$TMP/dl" B
expect_rc 0 "dlaunch -np 1 --role a -- A : -np 3 --role b -- B"
# What mpirun gives each rank of the same line (mpirun -np 1 A : -np 3 B).
want_prog=(A B B B)
want_role=(a/0/1 b/0/3 b/1/3 b/2/3)
for r in 0 1 2 3; do
  [[ -f $TMP/dl/$r ]] || fail_run "(a) dlaunch: rank $r wrote nothing"
  assert_eq "$(field "$TMP/dl/$r" prog)/$(field "$TMP/dl/$r" local)/$(field "$TMP/dl/$r" size)/$(field "$TMP/dl/$r" local_size)" \
    "${want_prog[r]}/$r/4/4" "(a) dlaunch rank $r: program/LOCAL_RANK/WORLD_SIZE/LOCAL_WORLD_SIZE"
  assert_eq "$(field "$TMP/dl/$r" role)" "${want_role[r]}" "(a) dlaunch rank $r: ROLE_NAME/ROLE_RANK/ROLE_WORLD_SIZE"
  assert_eq "$(field "$TMP/dl/$r" ompi)" unset/unset/unset/unset "(a) dlaunch rank $r: no OMPI_COMM_WORLD_* without --env ompi"
done
assert_no_leftovers "(a) after the dlaunch run"

if command -v mpirun >/dev/null && mpirun --version 2>/dev/null | grep -q 'Open MPI'; then
  # --bind-to none: with -np <= 2 per app context mpirun would bind to cores;
  # -x puts MARK into mpirun's command line so that leftovers are found.
  run_cmd 60 mpirun --allow-run-as-root --oversubscribe --bind-to none -x "DLTEST_MARK=$MARK" \
    -np 1 "$TMP/w.sh" "$TMP/mpi" A : -np 3 "$TMP/w.sh" "$TMP/mpi" B
  expect_rc 0 "mpirun -np 1 A : -np 3 B"
  for r in 0 1 2 3; do
    [[ -f $TMP/mpi/$r ]] || fail_run "(a) mpirun: rank $r wrote nothing"
    IFS=/ read -r m_rank m_local m_size m_local_size <<<"$(field "$TMP/mpi/$r" ompi)"
    assert_eq "$m_rank" "$r" "(a) mpirun's OMPI_COMM_WORLD_RANK in rank $r's file"
    assert_eq "$(field "$TMP/dl/$r" prog)/$(field "$TMP/dl/$r" local)/$(field "$TMP/dl/$r" size)/$(field "$TMP/dl/$r" local_size)" \
      "$(field "$TMP/mpi/$r" prog)/$m_local/$m_size/$m_local_size" \
      "(a) rank $r: dlaunch's program/LOCAL_RANK/WORLD_SIZE/LOCAL_WORLD_SIZE against mpirun's program/OMPI_COMM_WORLD_{LOCAL_RANK,SIZE,LOCAL_SIZE}"
  done
  wait_for 5 no_marked_processes
  assert_no_leftovers "(a) after mpirun"
else
  log "(a) mpirun (Open MPI, Debian openmpi-bin) is not installed: checked dlaunch against mpirun's numbering as written here"
fi

# --- b. What is a group's own, and what ':' means -----------------------------
run_dl 60 -np 1 --role a -x ONLY_A=1 -- "$TMP/w.sh" "$TMP/env" A : \
  -np 2 --role b --env ompi -x ONLY_B=2 -- "$TMP/w.sh" "$TMP/env" B
expect_rc 0 "(b) -x and --env ompi per group"
assert_eq "$(field "$TMP/env/0" x)/$(field "$TMP/env/0" ompi)" 1/unset/unset/unset/unset/unset \
  "(b) group a's rank 0: its own ONLY_A, not group b's ONLY_B or OMPI_COMM_WORLD_*"
for r in 1 2; do
  assert_eq "$(field "$TMP/env/$r" x)/$(field "$TMP/env/$r" ompi)" "unset/2/$r/$r/3/3" \
    "(b) group b's rank $r: its ONLY_B and OMPI_COMM_WORLD_{RANK,LOCAL_RANK,SIZE,LOCAL_SIZE}, not ONLY_A"
done

run_dl 30 -np 1 -- true : -np 1 --max-restarts 2 -- true
expect_rc 2 "(b) --max-restarts after ':'"
assert_eq "$(cat "$ERR")" \
  "dlaunch: group 2 (group2): --max-restarts applies to the whole job; give it before the first ':'" \
  "(b) --max-restarts after ':': stderr"

# A ':' at the end of the line is the worker's; '\:' passes ':' where ':' would
# open a group (before a group flag).
run_dl 60 -np 1 --role a -- sh -c 'echo "first[$0|$1]"' '\:' -np : \
  -np 1 --role b -- sh -c 'echo "last[$0]"' :
expect_rc 0 "(b) ':' and '\\:' as a worker's arguments"
assert_file_matches "$OUT" '^\[0\]: first\[:\|-np\]$' "(b) '\\:' before -np reaches rank 0 as ':'"
assert_file_matches "$OUT" '^\[1\]: last\[:\]$' "(b) a trailing ':' reaches rank 1 as its argument"

# --- c. A failure in one group stops every group -------------------------------
# Rank 2 (group b) exits 3 once the three have started; the others would sleep
# past the run's guard: a launcher that waits for them hangs.
cat >"$TMP/fail.sh" <<EOF
#!/bin/sh
: >"$TMP/fail/started.\$RANK"
if [ "\$RANK" = 2 ]; then
  i=0
  while [ "\$(ls "$TMP/fail" | wc -l)" -lt 3 ] && [ \$i -lt 600 ]; do "$TMP/bin/sleep" 0.05; i=\$((i + 1)); done
  echo "rank 2 gives up" >&2
  exit 3
fi
exec "$TMP/bin/sleep" 600
EOF
chmod +x "$TMP/fail.sh"
run_dl 60 -np 1 --role a -- "$TMP/fail.sh" : -np 2 --role b -- "$TMP/fail.sh"
expect_rc 3 "(c) rank 2 of group b exits 3"
assert_file_matches "$ERR" '^dlaunch: root cause: rank 2 \(local_rank 2, pid [0-9]+\) exited with code 3' \
  "(c) the root cause"
wait_for 10 no_marked_processes
assert_no_leftovers "(c) after the failed job"

# --- d. --multi-prog on one node ------------------------------------------------
cat >"$TMP/mp.conf" <<EOF
# srun's format: RANKS PROGRAM ARGS
0        $TMP/w.sh $TMP/mp zero-%t
1-2,4    $TMP/w.sh $TMP/mp mid-%t-%o
*        $TMP/w.sh $TMP/mp rest-%t-'%t'
EOF
run_dl 60 --nproc-per-node 6 --multi-prog "$TMP/mp.conf"
expect_rc 0 "(d) --nproc-per-node 6 --multi-prog"
want_prog=(zero-0 mid-1-0 mid-2-1 rest-3-%t mid-4-2 rest-5-%t)
want_role=(line2/0/1 line3/0/3 line3/1/3 line4/0/2 line3/2/3 line4/1/2)
for r in 0 1 2 3 4 5; do
  [[ -f $TMP/mp/$r ]] || fail_run "(d) rank $r wrote nothing"
  assert_eq "$(field "$TMP/mp/$r" prog)/$(field "$TMP/mp/$r" size)" "${want_prog[r]}/6" \
    "(d) rank $r: its line's program, %t and %o expanded (a quoted '%t' kept), WORLD_SIZE"
  assert_eq "$(field "$TMP/mp/$r" role)" "${want_role[r]}" "(d) rank $r: ROLE_NAME/ROLE_RANK/ROLE_WORLD_SIZE"
done
run_dl 30 --explain --nproc-per-node 6 --multi-prog "$TMP/mp.conf"
expect_rc 0 "(d) --explain --multi-prog"
assert_file_matches "$OUT" "^groups: 3 programs, each rank runs the line of the --multi-prog file that names it$" \
  "(d) --explain says the file numbers the ranks"
assert_file_matches "$OUT" "^  $TMP/mp.conf:3 line3: ranks 1-2,4 \(3\): $TMP/w.sh $TMP/mp mid-%t-%o$" \
  "(d) --explain names line 3's ranks"

# --- e. Bad input: one line naming the group, a non-zero exit -------------------
# bad WHAT NEEDLE... -- ARGS...: exit 2 and one stderr line, `dlaunch: ` then the
# first NEEDLE, holding every other; no worker ran.
bad() {
  local what=$1 needles=()
  shift
  while [[ $1 != -- ]]; do needles+=("$1"); shift; done
  shift
  run_dl 15 "$@"
  expect_rc 2 "(e) $what"
  [[ $(wc -l <"$ERR") == 1 ]] || fail_run "(e) $what: expected one line on stderr"
  assert_contains "$(cat "$ERR")" "dlaunch: ${needles[0]}" "(e) $what: the message"
  local needle
  for needle in "${needles[@]:1}"; do assert_contains "$(cat "$ERR")" "$needle" "(e) $what: the message"; done
  [[ ! -e $TMP/worker-ran ]] || fail "(e) $what: a worker ran"
}
W=(sh -c "touch $TMP/worker-ran")
bad "-np 0" "group 2: " "expected a positive number of processes, got '0'" -- \
  -np 1 -- "${W[@]}" : -np 0 -- "${W[@]}"
bad "':' with no command" "group 2: no command after ':'" -- -np 1 -- "${W[@]}" : -np 1
bad "a role named twice" "group 2 (a): role 'a' is named by group 1 too" -- \
  -np 1 --role a -- "${W[@]}" : -np 1 --role a -- "${W[@]}"
printf '0-2 %s\n2-3 %s\n' "${W[*]}" "${W[*]}" >"$TMP/overlap.conf"
bad "overlapping ranks" "multi-prog $TMP/overlap.conf:2: rank 2 is on line 1 and line 2" -- \
  --nproc-per-node 4 --multi-prog "$TMP/overlap.conf"
bad "a missing file" "multi-prog $TMP/none.conf: no such file" -- --nproc-per-node 2 --multi-prog "$TMP/none.conf"
# A FIFO nobody writes: opening it to read would block for ever.
mkfifo "$TMP/fifo.conf"
bad "a FIFO" "multi-prog $TMP/fifo.conf: a FIFO, not a regular file" -- --nproc-per-node 2 --multi-prog "$TMP/fifo.conf"
assert_no_leftovers "(e) after the bad inputs"

# --- f. (a) with the workers under another Python -------------------------------
# pyenv's newest, as dlaunch's interpreter (PYTHON_EXEC) for torchrun's form
# `--nproc-per-node N SCRIPT`: each group's script runs under it.
OTHER=
for py in $(printf '%s\n' "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3 | sort -V); do
  [[ -x $py && $(readlink -f "$py") != $(readlink -f "$PY") ]] && OTHER=$py
done
if [[ -z $OTHER ]]; then
  log "(f) no pyenv Python under ${PYENV_ROOT:-$HOME/.pyenv}/versions: not checking workers under another Python"
else
  run_cmd 60 env PYTHON_EXEC="$OTHER" "$DLAUNCH" --nproc-per-node 1 --role a "$TMP/w.py" "$TMP/py" A : \
    --nproc-per-node 3 --role b "$TMP/w.py" "$TMP/py" B
  expect_rc 0 "(f) the two groups under $OTHER"
  want_prog=(A B B B)
  want_role=(a/0/1 b/0/3 b/1/3 b/2/3)
  for r in 0 1 2 3; do
    [[ -f $TMP/py/$r ]] || fail_run "(f) rank $r wrote nothing"
    assert_eq "$(field "$TMP/py/$r" prog)/$(field "$TMP/py/$r" local)/$(field "$TMP/py/$r" size)/$(field "$TMP/py/$r" local_size)/$(field "$TMP/py/$r" role)/$(field "$TMP/py/$r" python)" \
      "${want_prog[r]}/$r/4/4/${want_role[r]}/$OTHER" "(f) rank $r: program/LOCAL_RANK/sizes/role/interpreter"
  done
fi

# --- g. A role restarted alone ----------------------------------------------------
# Each start leaves a file named by role, rank, restart and pid. Rollout rank 1
# fails at restarts 0 and 1, once rank 0 of that restart has left its file; at
# restart 2 it succeeds and says the trainers may finish (they wait for that,
# bounded): a trainer restarted with the rollout would leave a second file.
cat >"$TMP/rr.sh" <<EOF
#!/bin/sh
d=\$1
echo "rank=\$RANK world=\$WORLD_SIZE port=\$MASTER_PORT local=\$LOCAL_RANK/\$LOCAL_WORLD_SIZE" \
  >"\$d/\$ROLE_NAME.\$ROLE_RANK.\$TORCHELASTIC_RESTART_COUNT.\$\$"
if [ "\$ROLE_NAME" = rollout ]; then
  if [ "\$ROLE_RANK" = 1 ] && [ "\$TORCHELASTIC_RESTART_COUNT" -lt \${FAILS:-2} ]; then
    # Not before rank 0 of this restart has left its file: a failure stops it,
    # on a loaded machine before its first line.
    i=0
    while ! ls "\$d/rollout.0.\$TORCHELASTIC_RESTART_COUNT."* >/dev/null 2>&1 && [ \$i -lt 200 ]; do
      "$TMP/bin/sleep" 0.05
      i=\$((i + 1))
    done
    exit 3
  fi
  [ "\$ROLE_RANK" = 1 ] && : >"\$d/done"
  exit 0
fi
i=0
while [ ! -e "\$d/done" ] && [ \$i -lt 1200 ]; do "$TMP/bin/sleep" 0.05; i=\$((i + 1)); done
EOF
chmod +x "$TMP/rr.sh"
run_dl 90 --role-restarts rollout=2 -np 2 --role trainer -- "$TMP/rr.sh" "$TMP/rr" : \
  -np 2 --role rollout -- "$TMP/rr.sh" "$TMP/rr"
expect_rc 0 "(g) --role-restarts rollout=2, rollout rank 1 failing twice"
# count PATHS...: how many of the glob's matches exist.
count() {
  local n=0 f
  for f in "$@"; do [[ -e $f ]] && n=$((n + 1)); done
  echo "$n"
}
assert_eq "$(count "$TMP"/rr/trainer.*)" 2 "(g) trainer starts: each trainer once, its PID kept"
for r in 0 1; do
  assert_eq "$(count "$TMP"/rr/rollout."$r".*)" 3 "(g) rollout rank $r: started at restarts 0, 1 and 2"
done
assert_file_matches "$ERR" '^dlaunch: role rollout: restarting its 2 workers \(restart 2 of 2\); the other roles run on$' \
  "(g) the rollout's restart is said"
# The rollout's world: RANK = ROLE_RANK, WORLD_SIZE its size, a port of its own.
rollout=$(cat "$TMP"/rr/rollout.1.2.*)
trainer=$(cat "$TMP"/rr/trainer.0.0.*)
assert_eq "$(echo "$rollout" | sed -E 's/ port=[0-9]+//')" "rank=1 world=2 local=3/4" "(g) rollout rank 1's world"
assert_eq "$(echo "$trainer" | sed -E 's/ port=[0-9]+//')" "rank=0 world=2 local=0/4" "(g) trainer rank 0's world"
[[ $(field <(echo "$rollout") port) != "$(field <(echo "$trainer") port)" ]] ||
  fail_run "(g) the rollout's world shares the trainers' MASTER_PORT: $rollout / $trainer"
assert_no_leftovers "(g) after the job"
# Its restarts spent, the rollout's failure ends the job with its code, trainers and all.
run_cmd 90 env FAILS=9 "$DLAUNCH" --role-restarts rollout=1 -np 2 --role trainer -- "$TMP/rr.sh" "$TMP/spent" : \
  -np 2 --role rollout -- "$TMP/rr.sh" "$TMP/spent"
expect_rc 3 "(g) the rollout failing past --role-restarts rollout=1"
assert_file_matches "$ERR" '^dlaunch: root cause: rank 3 ' "(g) the rollout rank is the root cause"
wait_for 10 no_marked_processes
assert_no_leftovers "(g) after the spent restarts"

# --- i. dlaunch killed while a role restarts alone ---------------------------------
# The rollout fails once; its restarted worker says so and waits, as the trainer
# does. SIGKILL of dlaunch then: the watchdog ends both generations' processes,
# the restarted one included.
mkdir -p "$TMP/killed"
cat >"$TMP/rk.sh" <<EOF
#!/bin/sh
d=\$1
[ "\$ROLE_NAME" = rollout ] && [ "\$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 3
: >"\$d/\$ROLE_NAME.\$TORCHELASTIC_RESTART_COUNT"
exec "$TMP/bin/sleep" 60
EOF
chmod +x "$TMP/rk.sh"
start_dl killed 90 --role-restarts rollout=2 -np 1 --role trainer -- "$TMP/rk.sh" "$TMP/killed" : \
  -np 1 --role rollout -- "$TMP/rk.sh" "$TMP/killed"
wait_for 30 test -e "$TMP/killed/rollout.1" -a -e "$TMP/killed/trainer.0" || {
  wait_dl killed
  fail_run "(i) the rollout's restarted worker did not start"
}
kill -KILL "$(dl_pid killed)"
wait_dl killed
if ! wait_for 10 no_marked_processes; then
  # shellcheck disable=SC2046
  describe_pids $(marked_pids) >&2
  fail "(i) workers outlived a SIGKILLed dlaunch (lines above)"
fi
log "(i) dlaunch SIGKILLed during a role's restart: no worker of either generation left"

# --- h. A head launch, each group on its own hosts ---------------------------------
# 127.0.0.2 and 127.0.0.3 are this machine's: the head starts their agents
# through a local shell, as it would through ssh.
run_dl 90 -H 127.0.0.2:2 --role trainer -x ONLY_A=a -- "$TMP/w.sh" "$TMP/head" A : \
  -H 127.0.0.3:1 --role rollout -- "$TMP/w.sh" "$TMP/head" B
expect_rc 0 "(h) a head launch of two groups on hosts of their own"
want_prog=(A A B)
want_role=(trainer/0/2 trainer/1/2 rollout/0/1)
want_local=(0 1 0)
for r in 0 1 2; do
  [[ -f $TMP/head/$r ]] || fail_run "(h) rank $r wrote nothing"
  assert_eq "$(field "$TMP/head/$r" prog)/$(field "$TMP/head/$r" size)/$(field "$TMP/head/$r" role)/$(field "$TMP/head/$r" local)" \
    "${want_prog[r]}/3/${want_role[r]}/${want_local[r]}" "(h) rank $r: program/WORLD_SIZE/role/LOCAL_RANK"
done
run_dl 30 --explain -H 127.0.0.2:2 --role trainer -- "$TMP/w.sh" "$TMP/head" A : \
  -H 127.0.0.3:1 --role rollout -- "$TMP/w.sh" "$TMP/head" B
expect_rc 0 "(h) --explain of the head launch"
assert_file_matches "$OUT" '^  group 2 rollout: ranks 2 \(1\): ' "(h) --explain shows where each group's ranks are"
# Through pdsh, which forwards no stdin, the groups go on the agents' command lines.
run_dl 30 --explain -H n1.invalid:1 --remote pdsh --role trainer -- true : -H n2.invalid:1 --role rollout -- true
expect_rc 0 "(h) --explain of a head launch through pdsh"
assert_file_matches "$OUT" 'DLAUNCH_PROGRAMS, on its command line: pdsh forwards no stdin' \
  "(h) --explain says where the groups go through pdsh"
# -x before the first ':' is the trainer group's alone, on the other host too.
assert_eq "$(field "$TMP/head/0" x)/$(field "$TMP/head/2" x)" "a/unset/unset/unset" "(h) the trainer's -x"
# A --multi-prog file from a head: each agent reads it at the same path, as
# srun's steps do, and starts the ranks that fall on its node.
mkdir -p "$TMP/headmp"
cat >"$TMP/headmp.conf" <<EOF
0,3 $TMP/w.sh $TMP/headmp A
*   $TMP/w.sh $TMP/headmp B
EOF
run_dl 90 -H 127.0.0.2:2,127.0.0.3:2 --multi-prog "$TMP/headmp.conf"
expect_rc 0 "(h) a head launch of a --multi-prog file"
want_prog=(A B B A)
want_role=(line1/0/2 line2/0/2 line2/1/2 line1/1/2)
for r in 0 1 2 3; do
  [[ -f $TMP/headmp/$r ]] || fail_run "(h) multi-prog rank $r wrote nothing"
  assert_eq "$(field "$TMP/headmp/$r" prog)/$(field "$TMP/headmp/$r" role)/$(field "$TMP/headmp/$r" local)" \
    "${want_prog[r]}/${want_role[r]}/$((r % 2))" "(h) multi-prog rank $r: program/role/LOCAL_RANK"
done
assert_no_leftovers "at the end"

pass
