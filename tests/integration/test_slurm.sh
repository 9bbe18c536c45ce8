#!/usr/bin/env bash
# dlaunch under a real Slurm (Debian slurm-wlm 22.05 and munge) on this one
# machine. The test starts its own munged, slurmctld and slurmd with every file
# under a temporary directory (own ports, own munge socket and key; /etc is
# left alone), then:
#   1. per-process: `srun -N1 -n2 dlaunch --nproc-per-node 1 -- DDP`: RANK =
#      SLURM_PROCID, LOCAL_RANK/LOCAL_WORLD_SIZE from SLURM_LOCALID and the
#      step's tasks on the node, the DDP ranks in sync, and the rendezvous on
#      the step's reserved port (MpiParams=ports gives SLURM_STEP_RESV_PORTS);
#   2. per-node: `srun -N1 -n1 dlaunch --nproc-per-node 2 -- DDP`;
#   2b. --launch-mode per-node: the command sees no Slurm task variables;
#   3. a failure: task 1's worker exits 3, srun exits 3, nothing is left;
#   4. `srun -n1 dlaunch --explain` names the source;
#   5. SIGUSR1 from scancel (every process of the step, or --batch) and from
#      kill reaches each worker exactly once;
#   6. --multi-prog FILE (ranges, '*', %t, %o): one dlaunch for the node
#      (`srun -n1 dlaunch --nproc-per-node 4`), and one a task (`srun -n4
#      dlaunch`): each rank runs its own line.
# It skips, with the reason, only when the packages are missing or the daemons
# do not come up.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch
for tool in munged slurmctld slurmd srun sinfo; do
  command -v "$tool" >/dev/null || skip "'$tool' is not installed (Debian slurm-wlm and munge)"
done

unset DLAUNCH_RDZV_TOKEN OMPI_COMM_WORLD_RANK PMIX_RANK AZ_BATCH_MASTER_NODE AZ_BATCHAI_MPI_MASTER_NODE \
  PET_NNODES PET_NODE_RANK PET_MASTER_ADDR PET_RDZV_ENDPOINT
# Nothing from an outer Slurm job may leak into ours.
for v in $(compgen -e | grep -E '^SLURM_'); do unset "$v"; done

# --- The daemons ---------------------------------------------------------------
# The daemons' files live outside $TMP: the leftover checks look for processes
# whose command line names $TMP, and the daemons must run until the end.
S=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-slurm-XXXXXX") || fail "mktemp -d failed"
at_exit "rm -rf -- '$S'"
mkdir -p "$S/munge" "$S/state" "$S/spool" "$S/log"
chmod 755 "$S/munge"
head -c 1024 /dev/urandom >"$S/munge/key"
chmod 600 "$S/munge/key"
HOST=$(hostname)
ctld_port=$(free_port)
slurmd_port=$(free_port)
# A range for the steps' reserved ports; the rendezvous takes a step's first.
# Above the kernel's ephemeral range (to 60999), so no free_port() elsewhere is
# handed one, and nothing may listen in it now: a foreign listener on the
# rendezvous port would leave both agents waiting for it.
range_free() { ! ss -Htln 2>/dev/null | awk '{n=split($4, a, ":"); print a[n]}' | awk -v lo="$1" -v hi="$2" '$1 >= lo && $1 <= hi {f=1} END {exit !f}'; }
for _ in 1 2 3 4 5 6 7 8; do
  resv_lo=$((61000 + (RANDOM % 40) * 100))
  resv_hi=$((resv_lo + 99))
  range_free "$resv_lo" "$resv_hi" && break
done
cat >"$S/slurm.conf" <<EOF
ClusterName=dltest$$
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$S/munge/socket
CredType=cred/munge
MpiDefault=none
MpiParams=ports=$resv_lo-$resv_hi
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmUser=root
SlurmdUser=root
ReturnToService=2
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PlugStackConfig=/dev/null
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=dltest Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$S/slurm.conf

# The exit trap kills the daemons (track_pid) if the test ends early;
# stop_daemons ends them gently at the end.
munged -F --force --socket="$S/munge/socket" --key-file="$S/munge/key" --pid-file="$S/munge/pid" \
  --log-file="$S/munge/log" --seed-file="$S/munge/seed" >"$S/log/munged.out" 2>&1 </dev/null &
MUNGED=$!
track_pid "$MUNGED"
wait_for 10 test -S "$S/munge/socket" || { cat "$S/log/munged.out" >&2; skip "munged did not start"; }
slurmctld -D -f "$S/slurm.conf" >"$S/log/slurmctld.out" 2>&1 </dev/null &
SLURMCTLD=$!
track_pid "$SLURMCTLD"
slurmd -D -f "$S/slurm.conf" >"$S/log/slurmd.out" 2>&1 </dev/null &
SLURMD=$!
track_pid "$SLURMD"

stop_daemons() {
  kill -TERM "$SLURMD" "$SLURMCTLD" 2>/dev/null
  wait_for 15 eval '! kill -0 '"$SLURMD"' 2>/dev/null && ! kill -0 '"$SLURMCTLD"' 2>/dev/null' ||
    log "slurmd/slurmctld did not stop within 15 s after SIGTERM"
  kill -TERM "$MUNGED" 2>/dev/null
  wait_for 5 eval '! kill -0 '"$MUNGED"' 2>/dev/null' || log "munged did not stop within 5 s after SIGTERM"
}

node_idle() { [[ $(sinfo -h -o %T 2>/dev/null) == idle ]]; }
t0=$EPOCHREALTIME
if ! wait_for 60 node_idle; then
  tail -n 20 "$S/log/slurmctld.out" "$S/log/slurmd.out" "$S/log/"*.log >&2 2>/dev/null
  skip "slurmctld and slurmd did not bring node $HOST to 'idle' within 60 s (sinfo: $(sinfo -h -o %T 2>&1 | head -n 1))"
fi
log "Slurm up in $(since "$t0")s (slurmctld port $ctld_port, slurmd port $slurmd_port)"

# run_srun SECONDS ARGS...: srun --label ARGS under a timeout; sets RC, OUT, ERR, ELAPSED.
run_srun() {
  local secs=$1
  shift
  run_cmd "$secs" srun --label "$@"
  log "srun ${*:1:3} ...: exit $RC after ${ELAPSED}s"
}

cp "$SRC/examples/ddp_train.py" "$TMP/ddp_train.py"
cat >"$TMP/ddp_wrap.sh" <<EOF
#!/bin/sh
echo "env: RANK=\$RANK LOCAL_RANK=\$LOCAL_RANK LOCAL_WORLD_SIZE=\$LOCAL_WORLD_SIZE GROUP_RANK=\$GROUP_RANK NODE_RANK=\$NODE_RANK WORLD_SIZE=\$WORLD_SIZE TORCHELASTIC_RUN_ID=\$TORCHELASTIC_RUN_ID"
echo "slurm: PROCID=\${SLURM_PROCID-unset} NTASKS=\${SLURM_NTASKS-unset} JOB=\${SLURM_JOB_ID:+set}"
exec "$PY" -u "$TMP/ddp_train.py" --epochs 1 --steps 5
EOF
chmod +x "$TMP/ddp_wrap.sh"

# check_ddp N: N ranks in sync in $OUT (lines `TASK: [R]: ...`, or `TASK: ...` untagged).
check_ddp() {
  local n=$1 n_sync n_sums
  n_sync=$(grep -Ec '^ *[0-9]+: (\[[0-9]+\]: )?rank [0-9]+: params in sync, checksum ' "$OUT")
  [[ $n_sync == "$n" ]] || fail_run "expected $n ranks reporting 'params in sync', got $n_sync"
  n_sums=$(sed -nE 's/.*rank [0-9]+: params in sync, checksum (.*)$/\1/p' "$OUT" | sort -u | wc -l)
  [[ $n_sums == 1 ]] || fail_run "the ranks disagree on the parameters ($n_sums distinct checksums)"
  if grep -q 'OUT OF SYNC' "$OUT"; then fail_run "a rank reported parameters out of sync"; fi
  assert_file_matches "$OUT" "summary: world_size $n, .*all ranks in sync" "rank 0's summary"
}

# ---------------------------------------------------------------------------
# 1. Per-process: one dlaunch per Slurm task.
run_srun 150 -N1 -n2 --overcommit "$DLAUNCH" --nproc-per-node 1 -- "$TMP/ddp_wrap.sh"
expect_rc 0 "per-process: srun -N1 -n2 dlaunch --nproc-per-node 1"
check_ddp 2
job=$(sed -nE 's/.*TORCHELASTIC_RUN_ID=([0-9]+)$/\1/p' "$OUT" | sort -u)
[[ $job =~ ^[0-9]+$ ]] || fail_run "expected one Slurm job id as TORCHELASTIC_RUN_ID on both ranks, got '$job'"
for t in 0 1; do
  assert_file_matches "$OUT" \
    "^ *$t: \[$t\]: env: RANK=$t LOCAL_RANK=$t LOCAL_WORLD_SIZE=2 GROUP_RANK=0 NODE_RANK=0 WORLD_SIZE=2 TORCHELASTIC_RUN_ID=$job$" \
    "per-process: task $t's worker"
done
port=$(sed -nE "s/.*dlaunch: rendezvous $HOST:([0-9]+): generation 1: 2 nodes, 2 workers.*/\1/p" "$ERR" | head -n 1)
[[ -n $port ]] || fail_run "no coordinator line 'rendezvous $HOST:PORT: generation 1: 2 nodes, 2 workers'"
((port >= resv_lo && port <= resv_hi)) ||
  fail_run "the rendezvous is on port $port, not on one the step reserved ($resv_lo-$resv_hi)"
wait_for 5 no_marked_processes
assert_no_leftovers "after the per-process job"

# ---------------------------------------------------------------------------
# 2. Per-node: one dlaunch for the node, two workers.
run_srun 150 -N1 -n1 "$DLAUNCH" --nproc-per-node 2 -- "$TMP/ddp_wrap.sh"
expect_rc 0 "per-node: srun -N1 -n1 dlaunch --nproc-per-node 2"
check_ddp 2
for r in 0 1; do
  assert_file_matches "$OUT" \
    "^ *0: \[$r\]: env: RANK=$r LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 GROUP_RANK=0 NODE_RANK=0 WORLD_SIZE=2 TORCHELASTIC_RUN_ID=[0-9]+$" \
    "per-node: rank $r"
  # The task's own view describes dlaunch, not its two workers (Lightning would
  # read SLURM_PROCID as each one's rank); the job's variables stay.
  assert_file_matches "$OUT" "^ *0: \[$r\]: slurm: PROCID=unset NTASKS=unset JOB=set\$" "per-node: rank $r sees no task variables"
done
wait_for 5 no_marked_processes
assert_no_leftovers "after the per-node job"

# 2b. Per-node launch mode: the command is itself a launcher (Lightning,
# accelerate) and gets no task identity, or it would take SLURM_PROCID as its rank.
run_srun 60 -N1 -n1 "$DLAUNCH" --launch-mode per-node -- \
  /bin/sh -c 'echo "per-node: NODE_RANK=$NODE_RANK PROCID=${SLURM_PROCID-unset} NTASKS=${SLURM_NTASKS-unset} LOCALID=${SLURM_LOCALID-unset} JOB=${SLURM_JOB_ID:+set}"'
expect_rc 0 "srun -N1 -n1 dlaunch --launch-mode per-node"
assert_file_matches "$OUT" "^ *0: per-node: NODE_RANK=0 PROCID=unset NTASKS=unset LOCALID=unset JOB=set\$" \
  "--launch-mode per-node: the launcher sees no task variables"
wait_for 5 no_marked_processes
assert_no_leftovers "after the per-node launcher"

# ---------------------------------------------------------------------------
# 3. A failure: task 1's worker exits 3, task 0's would sleep 10 minutes, past
# the run's guard (60 s): a launcher that waits for it instead of stopping it hangs.
cat >"$TMP/fail.sh" <<EOF
#!/bin/sh
if [ "\$RANK" = 1 ]; then "$TMP/bin/sleep" 1; echo "rank 1 gives up" >&2; exit 3; fi
exec "$TMP/bin/sleep" 600
EOF
chmod +x "$TMP/fail.sh"
run_srun 60 -N1 -n2 --overcommit "$DLAUNCH" --nproc-per-node 1 -- "$TMP/fail.sh"
[[ $RC == 3 ]] || fail_run "srun after rank 1 exited 3: expected exit code 3, got $RC"
assert_file_matches "$ERR" "^ *1: dlaunch: root cause: rank 1 \(local_rank 1, pid [0-9]+\) exited with code 3" \
  "task 1's root cause"
assert_file_matches "$ERR" "^ *0: dlaunch: .*rank 1 exited with code 3" "task 0 names the failed rank"
wait_for 5 no_marked_processes
assert_no_leftovers "after the failed job"

# ---------------------------------------------------------------------------
# 4. --explain under srun.
run_srun 30 -N1 -n1 "$DLAUNCH" --explain
expect_rc 0 "srun dlaunch --explain"
assert_file_matches "$OUT" "^ *0: source: slurm$" "--explain's source"
assert_file_matches "$OUT" "^ *0: mode: TCP rendezvous at $HOST:[0-9]+, run id [0-9]+$" "--explain's mode"

# ---------------------------------------------------------------------------
# 5. Pre-emption signals reach each worker exactly once, whoever sends them:
#   a. `scancel --signal=USR1 JOB`: slurmstepd signals every process of the
#      step, the workers too; dlaunch must not pass it on again;
#   b. `scancel --batch --signal=USR1 JOB` (sbatch's B:) to a batch script that
#      exec'd dlaunch: only dlaunch gets it, and passes it on;
#   c. `kill -USR1 <dlaunch>` in a step: only dlaunch gets it, and passes it on.
# Each worker counts its SIGUSR1s, waits a moment for a second copy, and writes
# the count; one without the handler would die of the first.
cp "$SRC/tests/integration/tools/usr1_counter.py" "$TMP/usr1.py"
both_ready() { [[ -f $1/ready.0 && -f $1/ready.1 ]]; }
only_job() { squeue -h -o %i | head -n 1; }
no_jobs() { [[ -z $(squeue -h -o %i) ]]; }
# check_counts DIR WHAT: both workers counted exactly one SIGUSR1.
check_counts() {
  local r
  for r in 0 1; do
    [[ -f $1/count.$r ]] || fail_run "$2: worker $r wrote no count (it died of the signal, or never got it)"
    assert_eq "$(cat "$1/count.$r")" 1 "$2: SIGUSR1s worker $r got"
  done
}
for case in a c; do
  d=$TMP/usr1_$case
  mkdir -p "$d"
  OUT=$d/out ERR=$d/err
  timeout -k 5 90 srun --label -N1 -n1 "$DLAUNCH" --nproc-per-node 2 -- "$PY" -u "$TMP/usr1.py" "$d" \
    >"$OUT" 2>"$ERR" </dev/null &
  srun_pid=$!
  wait_for 30 both_ready "$d" || fail "signals ($case): the workers did not start within 30 s"
  if [[ $case == a ]]; then
    scancel --signal=USR1 "$(only_job)"
  else
    kill -USR1 "$(cat "$d/ready.0")"
  fi
  wait "$srun_pid"
  # shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
  RC=$?
  expect_rc 0 "signals ($case): srun dlaunch"
  check_counts "$d" "signals ($case)"
  if [[ $case == a ]]; then
    assert_file_matches "$ERR" "dlaunch: SIGUSR1 from slurmstepd reached every process of the Slurm step: not passed on again" \
      "signals (a): dlaunch says why it passed nothing on"
  fi
  wait_for 5 no_marked_processes
done
d=$TMP/usr1_b
mkdir -p "$d"
sbatch -Q -o "$d/batch.out" --wrap "exec $DLAUNCH --nproc-per-node 2 -- $PY -u $TMP/usr1.py $d" ||
  fail "signals (b): sbatch failed"
wait_for 30 both_ready "$d" || fail "signals (b): the workers did not start within 30 s ($(cat "$d/batch.out" 2>&1))"
scancel --batch --signal=USR1 "$(only_job)"
wait_for 30 no_jobs || fail "signals (b): the batch job did not end within 30 s"
OUT=$d/batch.out ERR=$d/batch.out RC=0
check_counts "$d" "signals (b)"
wait_for 5 no_marked_processes
assert_no_leftovers "after the signal cases"

# ---------------------------------------------------------------------------
# 6. --multi-prog: one dlaunch for the node's four ranks, then one a task (each
# runs the line of its own rank). Workers write what they see to DIR/RANK.
cat >"$TMP/mp_w.sh" <<'EOF'
#!/bin/sh
echo "prog=$2 rank=$RANK size=$WORLD_SIZE role=$ROLE_NAME/$ROLE_RANK/$ROLE_WORLD_SIZE" >"$1/$RANK"
EOF
chmod +x "$TMP/mp_w.sh"
# check_mp DIR WHAT: the four ranks of the file below.
check_mp() {
  local want=("low-0 rank=0 size=4 role=line2/0/2" "low-1 rank=1 size=4 role=line2/1/2"
    "star-2-0 rank=2 size=4 role=line3/0/2" "star-3-1 rank=3 size=4 role=line3/1/2") r
  for r in 0 1 2 3; do
    [[ -f $1/$r ]] || fail_run "$2: rank $r wrote nothing"
    assert_eq "$(cat "$1/$r")" "prog=${want[r]}" "$2: rank $r's line"
  done
}
for how in node task; do
  mkdir -p "$TMP/mp_$how"
  printf '# RANKS PROGRAM ARGS\n0-1 %s %s low-%%t\n*   %s %s star-%%t-%%o\n' \
    "$TMP/mp_w.sh" "$TMP/mp_$how" "$TMP/mp_w.sh" "$TMP/mp_$how" >"$TMP/mp_$how.conf"
done
run_srun 60 -N1 -n1 "$DLAUNCH" --nproc-per-node 4 --multi-prog "$TMP/mp_node.conf"
expect_rc 0 "srun -N1 -n1 dlaunch --nproc-per-node 4 --multi-prog"
check_mp "$TMP/mp_node" "multi-prog, one dlaunch"
run_srun 90 -N1 -n4 --overcommit "$DLAUNCH" --multi-prog "$TMP/mp_task.conf"
expect_rc 0 "srun -N1 -n4 dlaunch --multi-prog"
check_mp "$TMP/mp_task" "multi-prog, one dlaunch a task"
wait_for 5 no_marked_processes
assert_no_leftovers "after the multi-prog jobs"

stop_daemons
pass
