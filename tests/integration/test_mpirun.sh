#!/usr/bin/env bash
# ctest: LABELS=slow PROCESSORS=2 TIMEOUT=600
# dlaunch under the real Open MPI mpirun (openmpi-bin), on this one machine:
#   1. per-node: `mpirun -np 2 dlaunch --nproc-per-node 2 -- DDP` with no
#      --rdzv-endpoint: the MPI bootstrap (dlaunch-mpi-bootstrap) finds rank 0;
#      4 DDP ranks in sync, RANK 0..3 once each, GROUP_RANK = NODE_RANK = the
#      mpirun rank, and no OMPI_COMM_WORLD_*/PMIX_*/OMPI_MCA_ess* in a worker;
#   2. the workers' own MPI: a worker's MPI_Init (mpi4py) runs as a singleton,
#      not as dlaunch's rank; with --env ompi each worker sees its own
#      OMPI_COMM_WORLD_* values;
#   3. per-process: `mpirun -np 4 dlaunch --nproc-per-node 1 -- DDP`: RANK =
#      OMPI_COMM_WORLD_RANK, LOCAL_RANK/LOCAL_WORLD_SIZE from
#      OMPI_COMM_WORLD_LOCAL_RANK/LOCAL_SIZE, DDP trains;
#   4. a failure: one worker exits 3, every dlaunch exits 3, mpirun ends, and
#      nothing is left running;
#   5. an explicit --rdzv-endpoint: used as given, no bootstrap.
# mpirun binds each process to one core by default when -np <= 2, which would
# put a whole node's workers on one core; --bind-to none keeps this test fast.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch
command -v mpirun >/dev/null || skip "mpirun is not installed (Debian openmpi-bin)"
mpirun --version 2>/dev/null | grep -q 'Open MPI' || skip "mpirun is not Open MPI's"

unset DLAUNCH_RDZV_TOKEN OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMIX_RANK SLURM_JOB_ID AZ_BATCH_MASTER_NODE \
  AZ_BATCHAI_MPI_MASTER_NODE PET_NNODES PET_NODE_RANK PET_MASTER_ADDR PET_RDZV_ENDPOINT
HELPER=$(dirname "$DLAUNCH")/dlaunch-mpi-bootstrap

# run_mpi SECONDS NP ARGS...: mpirun -np NP ARGS with each line tagged
# `[jobid,rank]<stream>:`; -x puts MARK into mpirun's own command line so
# that leftovers are found. Sets RC, OUT, ERR and ELAPSED like run_dl.
run_mpi() {
  local secs=$1 np=$2
  shift 2
  run_cmd "$secs" mpirun --allow-run-as-root --oversubscribe --bind-to none --tag-output \
    -x "DLTEST_MARK=$MARK" -np "$np" "$@"
  log "mpirun -np $np ${*:1:3} ...: exit $RC after ${ELAPSED}s"
}

no_helpers_left() { ! pgrep -f "^$HELPER" >/dev/null; }

# Worker scripts live under $TMP, so every worker carries the marker.
cp "$SRC/examples/ddp_train.py" "$TMP/ddp_train.py"
cat >"$TMP/ddp_wrap.sh" <<EOF
#!/bin/sh
echo "env: RANK=\$RANK LOCAL_RANK=\$LOCAL_RANK LOCAL_WORLD_SIZE=\$LOCAL_WORLD_SIZE GROUP_RANK=\$GROUP_RANK NODE_RANK=\$NODE_RANK WORLD_SIZE=\$WORLD_SIZE mpi_vars=\$(env | grep -cE '^(OMPI_COMM_WORLD_NODE_RANK|OMPI_UNIVERSE_SIZE|PMIX_|OMPI_MCA_ess)') world=\${OMPI_COMM_WORLD_RANK-unset}/\${OMPI_COMM_WORLD_SIZE-unset}/\${OMPI_COMM_WORLD_LOCAL_RANK-unset}/\${OMPI_COMM_WORLD_LOCAL_SIZE-unset}"
exec "$PY" -u "$TMP/ddp_train.py" --epochs 1 --steps 5
EOF
chmod +x "$TMP/ddp_wrap.sh"

# check_ddp NRANKS: the DDP verdicts in $OUT (lines `[1,M]<stdout>:[R]: ...`).
check_ddp() {
  local n=$1
  local n_sync
  n_sync=$(grep -Ec '<stdout>:\[[0-9]+\]: rank [0-9]+: params in sync, checksum ' "$OUT")
  [[ $n_sync == "$n" ]] || fail_run "expected $n ranks reporting 'params in sync', got $n_sync"
  local n_sums
  n_sums=$(sed -nE 's/.*<stdout>:\[[0-9]+\]: rank [0-9]+: params in sync, checksum (.*)$/\1/p' "$OUT" | sort -u | wc -l)
  [[ $n_sums == 1 ]] || fail_run "the ranks disagree on the parameters ($n_sums distinct checksums)"
  if grep -q 'OUT OF SYNC' "$OUT"; then fail_run "a rank reported parameters out of sync"; fi
  assert_file_matches "$OUT" "<stdout>:\[0\]: summary: world_size $n, .*all ranks in sync" "rank 0's summary"
  local ranks
  ranks=$(sed -nE 's/.*<stdout>:\[[0-9]+\]: env: RANK=([0-9]+) .*/\1/p' "$OUT" | sort -n | tr '\n' ' ')
  assert_eq "$ranks" "$(seq -s ' ' 0 $((n - 1))) " "RANK over the job"
  if grep -E '<stdout>:\[[0-9]+\]: env: .* mpi_vars=[1-9]' "$OUT" >&2; then
    fail_run "a worker inherited dlaunch's own PMIX_*/OMPI_MCA_ess*/OMPI_UNIVERSE_SIZE variables"
  fi
}

# ---------------------------------------------------------------------------
# 5 first, since it needs no helper: an explicit endpoint, used as given.
port=$(free_port)
run_mpi 120 2 "$DLAUNCH" --nproc-per-node 2 --rdzv-endpoint "127.0.0.1:$port" -- "$TMP/ddp_wrap.sh"
expect_rc 0 "mpirun -np 2 dlaunch --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:$port"
check_ddp 4
assert_file_matches "$ERR" "dlaunch: rendezvous 127\.0\.0\.1:$port: generation 1: 2 nodes, 4 workers" \
  "the coordinator at the given endpoint"
wait_for 5 no_marked_processes
assert_no_leftovers "after the explicit-endpoint job"

[[ -x $HELPER ]] || skip "$HELPER is not built (no MPI when dlaunch was configured); only the explicit-endpoint case ran"

# ---------------------------------------------------------------------------
# 1. Per-node, the endpoint through the MPI bootstrap.
run_mpi 120 2 "$DLAUNCH" --nproc-per-node 2 -- "$TMP/ddp_wrap.sh"
expect_rc 0 "per-node: mpirun -np 2 dlaunch --nproc-per-node 2 (no --rdzv-endpoint)"
check_ddp 4
assert_file_matches "$ERR" "dlaunch: rendezvous [^ ]+:[0-9]+: generation 1: 2 nodes, 4 workers" \
  "the coordinator at rank 0's bootstrapped endpoint"
# Each worker's node rank is the rank of the mpirun process that started its dlaunch.
for m in 0 1; do
  for lr in 0 1; do
    r=$((2 * m + lr))
    assert_file_matches "$OUT" \
      "^\[[0-9]+,$m\]<stdout>:\[$r\]: env: RANK=$r LOCAL_RANK=$lr LOCAL_WORLD_SIZE=2 GROUP_RANK=$m NODE_RANK=$m WORLD_SIZE=4 mpi_vars=0 world=unset/unset/unset/unset$" \
      "per-node: rank $r (mpirun rank $m)"
  done
done
wait_for 5 no_marked_processes
assert_no_leftovers "after the per-node job"
wait_for 5 no_helpers_left || fail "a dlaunch-mpi-bootstrap outlived the per-node job"

# ---------------------------------------------------------------------------
# 2. The workers' own MPI: a singleton without --env ompi, their own ranks with it.
cat >"$TMP/mpi_self.py" <<'EOF'
import os
from mpi4py import MPI
print("mpi4py: RANK=%s mpi %d of %d" % (os.environ["RANK"], MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()),
      flush=True)
EOF
if "$PY" -c 'import mpi4py' 2>/dev/null; then
  run_mpi 120 2 "$DLAUNCH" --nproc-per-node 2 -- "$PY" "$TMP/mpi_self.py"
  expect_rc 0 "workers calling MPI_Init themselves"
  n=$(grep -Ec '<stdout>:\[[0-3]\]: mpi4py: RANK=[0-3] mpi 0 of 1$' "$OUT")
  [[ $n == 4 ]] || fail_run "expected 4 workers whose own MPI_Init is a singleton (rank 0 of 1), got $n"
else
  log "python3-mpi4py is not installed: not checking a worker's own MPI_Init"
fi
cat >"$TMP/ompi_env.sh" <<'EOF'
#!/bin/sh
echo "ompi: RANK=$RANK LOCAL_RANK=$LOCAL_RANK ${OMPI_COMM_WORLD_RANK:-unset} ${OMPI_COMM_WORLD_SIZE:-unset} ${OMPI_COMM_WORLD_LOCAL_RANK:-unset} ${OMPI_COMM_WORLD_LOCAL_SIZE:-unset} ${OMPI_UNIVERSE_SIZE:-unset} pmix=$(env | grep -c '^PMIX_')"
EOF
chmod +x "$TMP/ompi_env.sh"
run_mpi 60 2 "$DLAUNCH" --nproc-per-node 2 --env ompi -- "$TMP/ompi_env.sh"
expect_rc 0 "--env ompi under mpirun"
for r in 0 1 2 3; do
  lr=$((r % 2))
  assert_file_matches "$OUT" "<stdout>:\[$r\]: ompi: RANK=$r LOCAL_RANK=$lr $r 4 $lr 2 4 pmix=0$" \
    "--env ompi: rank $r's own OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE} and OMPI_UNIVERSE_SIZE"
done
wait_for 5 no_marked_processes
assert_no_leftovers "after the workers' own MPI"

# ---------------------------------------------------------------------------
# 3. Per-process: one dlaunch per worker.
run_mpi 150 4 "$DLAUNCH" --nproc-per-node 1 -- "$TMP/ddp_wrap.sh"
expect_rc 0 "per-process: mpirun -np 4 dlaunch --nproc-per-node 1"
check_ddp 4
for m in 0 1 2 3; do
  # One host: OMPI_COMM_WORLD_LOCAL_RANK = the rank, LOCAL_SIZE = 4, one node.
  # The worker is the mpirun rank, so the four OMPI_COMM_WORLD_* that the
  # seeds' aml_mpienv.py reads are its own and are kept (the PMIx ones are not).
  assert_file_matches "$OUT" \
    "^\[[0-9]+,$m\]<stdout>:\[$m\]: env: RANK=$m LOCAL_RANK=$m LOCAL_WORLD_SIZE=4 GROUP_RANK=0 NODE_RANK=0 WORLD_SIZE=4 mpi_vars=0 world=$m/4/$m/4$" \
    "per-process: mpirun rank $m's worker"
done
# ... and a worker's own MPI_Init still starts afresh: a singleton.
if "$PY" -c 'import mpi4py' 2>/dev/null; then
  run_mpi 120 2 "$DLAUNCH" --nproc-per-node 1 -- "$PY" "$TMP/mpi_self.py"
  expect_rc 0 "per-process workers calling MPI_Init themselves"
  n=$(grep -Ec '<stdout>:\[[0-1]\]: mpi4py: RANK=[0-1] mpi 0 of 1$' "$OUT")
  [[ $n == 2 ]] || fail_run "per-process: expected 2 workers whose own MPI_Init is a singleton, got $n"
fi
wait_for 5 no_marked_processes
assert_no_leftovers "after the per-process job"
wait_for 5 no_helpers_left || fail "a dlaunch-mpi-bootstrap outlived the per-process job"

# ---------------------------------------------------------------------------
# 4. A failure: rank 3 exits 3; the others would sleep 10 minutes, past the
# run's guard (60 s): a launcher that waits for them instead of stopping them hangs.
cat >"$TMP/fail.sh" <<EOF
#!/bin/sh
if [ "\$RANK" = 3 ]; then "$TMP/bin/sleep" 1; echo "rank 3 gives up" >&2; exit 3; fi
exec "$TMP/bin/sleep" 600
EOF
chmod +x "$TMP/fail.sh"
# Each dlaunch's own exit code, through a wrapper (a deferred trap: it still
# records the code when mpirun signals it while dlaunch is ending).
cat >"$TMP/dl_rc.sh" <<EOF
#!/bin/sh
trap 'echo "dl_rc \$OMPI_COMM_WORLD_RANK: SIGTERM from mpirun" >&2' TERM
"$DLAUNCH" "\$@"
rc=\$?
echo "\$rc" >"$TMP/dl_rc.\$OMPI_COMM_WORLD_RANK"
exit \$rc
EOF
chmod +x "$TMP/dl_rc.sh"
run_mpi 60 2 "$TMP/dl_rc.sh" --nproc-per-node 2 -- "$TMP/fail.sh"
[[ $RC == 3 ]] || fail_run "mpirun after rank 3 exited 3: expected exit code 3, got $RC"
for m in 0 1; do
  [[ -f $TMP/dl_rc.$m ]] || fail_run "dlaunch under mpirun rank $m left no exit code (killed?)"
  assert_eq "$(cat "$TMP/dl_rc.$m")" 3 "exit code of the dlaunch under mpirun rank $m"
done
assert_file_matches "$ERR" "<stderr>:dlaunch: root cause: rank 3 \(local_rank 1, pid [0-9]+\) exited with code 3" \
  "node 1's root cause"
wait_for 5 no_marked_processes
assert_no_leftovers "after the failed job"
wait_for 5 no_helpers_left || fail "a dlaunch-mpi-bootstrap outlived the failed job"

# ---------------------------------------------------------------------------
# Entrypoint form on a machine with (here: said to have) 2 GPUs, two tasks on
# it: each task is one worker, not one per GPU.
cat >"$TMP/shape.sh" <<EOF
#!/bin/sh
echo "shape: RANK=\$RANK WORLD_SIZE=\$WORLD_SIZE LOCAL_RANK=\$LOCAL_RANK"
EOF
chmod +x "$TMP/shape.sh"
CUDA_VISIBLE_DEVICES=0,1 run_mpi 60 2 "$DLAUNCH" -- "$TMP/shape.sh"
expect_rc 0 "mpirun -np 2 dlaunch -- CMD with 2 GPUs visible"
for r in 0 1; do
  assert_file_matches "$OUT" "shape: RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r\$" "entrypoint form, task $r is rank $r of 2"
done
wait_for 5 no_marked_processes
assert_no_leftovers "after the entrypoint-form job"

pass
