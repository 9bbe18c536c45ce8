#!/usr/bin/env bash
# ctest: LABELS=quick
# The variables every worker sees (torchrun parity), the user's own values left
# alone, the opt-in dialects (--env ompi, --env horovod, --env azure), and
# --virtual-local-rank.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

# Each worker writes its environment (plus a few facts only it can check) to
# DIR/RANK.json.
cat >"$TMP/dump_env.py" <<'PYEOF'
import json, os, sys
env = dict(os.environ)
extra = {}
err = env.get("TORCHELASTIC_ERROR_FILE")
if err:
    d = os.path.dirname(err) or "."
    extra["error_file_dir_writable"] = os.path.isdir(d) and os.access(d, os.W_OK)
pf = env.get("DLAUNCH_PROGRESS_FILE")
if pf:
    # Nothing there until the worker writes it, in a directory it may write.
    if os.path.lexists(pf):
        extra["progress_file"] = "something is there"
    else:
        d = os.path.dirname(pf) or "."
        extra["progress_file"] = "free to write" if os.path.isdir(d) and os.access(d, os.W_OK) else "directory not writable"
hf = env.get("AZUREML_MPI_HOSTFILE")
if hf:
    try:
        with open(hf) as f:
            extra["hostfile_content"] = f.read()
    except OSError as e:
        extra["hostfile_content"] = None
        extra["hostfile_error"] = str(e)
out = os.path.join(sys.argv[1], env.get("RANK", "norank-%d" % os.getpid()) + ".json")
with open(out, "w") as f:
    json.dump({"env": env, "extra": extra}, f)
PYEOF

# check.py DIR NPROC MODE: asserts on the dumps; prints one line per problem.
cat >"$TMP/check.py" <<'PYEOF'
import glob, json, os, sys
d, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
problems = []
def bad(msg): problems.append(msg)

files = sorted(glob.glob(os.path.join(d, "*.json")))
dumps = []
for p in files:
    with open(p) as f:
        dumps.append(json.load(f))
if len(dumps) != n:
    bad(f"expected {n} dumps (one per rank), got {len(dumps)}: {[os.path.basename(p) for p in files]}")
envs = [x["env"] for x in dumps]
parent = json.loads(os.environ["PARENT_ENV_JSON"])

def same(var):
    vals = {e.get(var) for e in envs}
    if len(vals) != 1:
        bad(f"{var} differs between ranks: {sorted(map(str, vals))}")
    return next(iter(vals)) if vals else None

def want(e, var, value):
    got = e.get(var)
    if got != value:
        bad(f"rank {e.get('RANK')}: {var}: expected {value!r}, got {got!r}")

ranks = sorted(e.get("RANK", "?") for e in envs)
if ranks != [str(i) for i in range(n)]:
    bad(f"RANK values: expected {list(range(n))}, got {ranks}")

required = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
            "NODE_RANK", "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
            "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", "OMP_NUM_THREADS",
            "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"]
for e in envs:
    missing = [v for v in required if v not in e]
    if missing:
        bad(f"rank {e.get('RANK')}: missing {missing}")

for e in envs:
    r = e.get("RANK")
    want(e, "LOCAL_RANK", r)
    want(e, "WORLD_SIZE", str(n))
    want(e, "LOCAL_WORLD_SIZE", str(n))
    want(e, "GROUP_RANK", "0")
    want(e, "GROUP_WORLD_SIZE", "1")
    want(e, "NODE_RANK", "0")
    want(e, "ROLE_NAME", "default")
    want(e, "ROLE_RANK", r)
    want(e, "ROLE_WORLD_SIZE", str(n))
    want(e, "TORCHELASTIC_RESTART_COUNT", "0")
    want(e, "TORCHELASTIC_MAX_RESTARTS", "0")
    if e.get("TORCHELASTIC_USE_AGENT_STORE") not in ("True", "False"):
        bad(f"rank {r}: TORCHELASTIC_USE_AGENT_STORE: expected 'True' or 'False', got {e.get('TORCHELASTIC_USE_AGENT_STORE')!r}")

addr = same("MASTER_ADDR")
if not addr:
    bad(f"MASTER_ADDR is empty")
port = same("MASTER_PORT")
run_id = same("TORCHELASTIC_RUN_ID")
if not run_id:
    bad("TORCHELASTIC_RUN_ID is empty")
err_files = [e.get("TORCHELASTIC_ERROR_FILE") for e in envs]
if len(set(err_files)) != len(err_files) or not all(err_files):
    bad(f"TORCHELASTIC_ERROR_FILE must be a distinct path per rank, got {err_files}")
progress_files = [e.get("DLAUNCH_PROGRESS_FILE") for e in envs]
if len(set(progress_files)) != len(progress_files) or not all(progress_files):
    bad(f"DLAUNCH_PROGRESS_FILE must be a distinct path per rank, got {progress_files}")
for x in dumps:
    if x["env"].get("DLAUNCH_PROGRESS_FILE") and x["extra"].get("progress_file") != "free to write":
        bad(f"rank {x['env'].get('RANK')}: DLAUNCH_PROGRESS_FILE {x['env']['DLAUNCH_PROGRESS_FILE']!r}: "
            f"expected nothing there, in a directory the worker may write, got {x['extra'].get('progress_file')!r}")
for x in dumps:
    if x["extra"].get("error_file_dir_writable") is False:
        bad(f"rank {x['env'].get('RANK')}: the directory of TORCHELASTIC_ERROR_FILE "
            f"{x['env'].get('TORCHELASTIC_ERROR_FILE')!r} does not exist or is not writable")

if mode == "azure":
    if port != "6105":
        bad(f"--env azure: MASTER_PORT: expected '6105', got {port!r}")
else:
    if not (port or "").isdigit() or not (1024 < int(port) < 65536):
        bad(f"MASTER_PORT: expected a port number above 1024, got {port!r}")

if mode == "user-values":
    for e in envs:
        want(e, "OMP_NUM_THREADS", "7")
        want(e, "NCCL_ASYNC_ERROR_HANDLING", "0")
        want(e, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
else:
    for e in envs:
        want(e, "OMP_NUM_THREADS", "1")
        want(e, "NCCL_ASYNC_ERROR_HANDLING", "1")
        want(e, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")

dialect_vars = {
    "ompi": ["OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
             "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK", "OMPI_UNIVERSE_SIZE"],
    "horovod": ["HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
                "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME"],
    "azure": ["AZUREML_MPI_HOSTFILE", "AZ_BATCHAI_MPI_MASTER_NODE"],
    "tf": ["TF_CONFIG"],
}
on = {"default": set(), "user-values": set(), "ompi,horovod": {"ompi", "horovod"},
      "azure": {"azure", "ompi"}}[mode]
for dialect, names in dialect_vars.items():
    if dialect in on:
        continue
    for e in envs:
        leaked = [v for v in names if v in e and v not in parent]
        if leaked:
            bad(f"rank {e.get('RANK')}: {leaked} set although this dialect was not asked for")

for e in envs:
    r = e.get("RANK")
    if "ompi" in on:
        want(e, "OMPI_COMM_WORLD_RANK", r)
        want(e, "OMPI_COMM_WORLD_SIZE", str(n))
        want(e, "OMPI_COMM_WORLD_LOCAL_RANK", r)
        want(e, "OMPI_COMM_WORLD_LOCAL_SIZE", str(n))
        # As under mpirun: the rank among this job's processes on the node (not the node rank).
        want(e, "OMPI_COMM_WORLD_NODE_RANK", e.get("LOCAL_RANK"))
        want(e, "OMPI_UNIVERSE_SIZE", str(n))
    if "horovod" in on:
        want(e, "HOROVOD_RANK", r)
        want(e, "HOROVOD_SIZE", str(n))
        want(e, "HOROVOD_LOCAL_RANK", r)
        want(e, "HOROVOD_LOCAL_SIZE", str(n))
        want(e, "HOROVOD_CROSS_RANK", "0")
        want(e, "HOROVOD_CROSS_SIZE", "1")
        if not e.get("HOROVOD_HOSTNAME"):
            bad(f"rank {r}: HOROVOD_HOSTNAME is empty or missing")
    if "azure" in on:
        want(e, "AZ_BATCHAI_MPI_MASTER_NODE", addr)
if "azure" in on:
    same("AZUREML_MPI_HOSTFILE")
    for x in dumps:
        r = x["env"].get("RANK")
        if not x["env"].get("AZUREML_MPI_HOSTFILE"):
            bad(f"rank {r}: AZUREML_MPI_HOSTFILE is missing")
            continue
        content = x["extra"].get("hostfile_content")
        expected = f"{addr} slots={n}\n"
        if content != expected:
            bad(f"rank {r}: hostfile {x['env']['AZUREML_MPI_HOSTFILE']}: expected {expected!r}, "
                f"got {content!r} {x['extra'].get('hostfile_error', '')}")

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PYEOF

N=3
check() {  # check MODE DIR
  local out
  out=$(PARENT_ENV_JSON=$PARENT_ENV_JSON timeout 30 "$PY" "$TMP/check.py" "$2" "$N" "$1" 2>&1) || {
    show_run
    fail "$1: $(echo "$out" | head -n 15)"
  }
}
dump_run() {  # dump_run MODE DLAUNCH-FLAGS... ; the dumps go to $TMP/MODE
  local mode=$1
  shift
  mkdir -p "$TMP/$mode"
  run_dl 30 "$@" --nproc-per-node "$N" -- "$PY" "$TMP/dump_env.py" "$TMP/$mode"
  expect_rc 0 "dump run ($mode)"
}

# 1. Defaults, with OMP_NUM_THREADS and the NCCL switches unset.
unset OMP_NUM_THREADS NCCL_ASYNC_ERROR_HANDLING TORCH_NCCL_ASYNC_ERROR_HANDLING
for v in $(env | sed -nE 's/^((OMPI_|HOROVOD_|AZ_BATCH|AZUREML_|PMIX_|PET_|TORCHELASTIC_)[A-Za-z0-9_]*)=.*/\1/p'); do
  unset "$v"
done
unset RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT GROUP_RANK NODE_RANK
PARENT_ENV_JSON=$("$PY" -c 'import json,os; print(json.dumps(sorted(os.environ)))')

dump_run default
check default "$TMP/default"

# 2. Values the user exported are left alone.
OMP_NUM_THREADS=7 NCCL_ASYNC_ERROR_HANDLING=0 TORCH_NCCL_ASYNC_ERROR_HANDLING=0 dump_run user-values
check user-values "$TMP/user-values"

# 3. --env as a comma list.
dump_run ompi,horovod --env ompi,horovod
check ompi,horovod "$TMP/ompi,horovod"

# 4. --env repeated; azure writes a hostfile and moves MASTER_PORT to 6105.
dump_run azure --env azure --env ompi
check azure "$TMP/azure"

# 5. The run directory (error files) is made under $TMPDIR, as Python's tempfile
#    does, and removed at the end; an unusable $TMPDIR falls back to /dev/shm
#    (a tmpfs: nothing of it reaches a disk), else /tmp.
mkdir -p "$TMP/tmpdir"
# shellcheck disable=SC2016  # expanded by the worker's shell
TMPDIR=$TMP/tmpdir run_dl 30 -- sh -c 'echo "error file: $TORCHELASTIC_ERROR_FILE"'
expect_rc 0 "TMPDIR=$TMP/tmpdir"
assert_file_matches "$OUT" "^error file: $TMP/tmpdir/dlaunch-[A-Za-z0-9]{6}/error-0-0.json$" "the run directory under \$TMPDIR"
assert_eq "$(find "$TMP/tmpdir" -mindepth 1 | wc -l)" "0" "what is left under \$TMPDIR after the run"
# shellcheck disable=SC2016
TMPDIR=$TMP/no-such-dir run_dl 30 -- sh -c 'echo "error file: $TORCHELASTIC_ERROR_FILE"'
expect_rc 0 "TMPDIR naming no directory"
assert_file_matches "$OUT" "^error file: $(default_temp_parent)/dlaunch-[A-Za-z0-9]{6}/error-0-0.json$" \
  "the run directory under $(default_temp_parent)"

# --virtual-local-rank (torchrun 2.x): LOCAL_RANK=0 everywhere, and each worker
# sees only its own entry of the launcher's CUDA_VISIBLE_DEVICES.
# shellcheck disable=SC2016  # expanded by the worker's shell
CUDA_VISIBLE_DEVICES="4, 6" run_dl 30 --virtual-local-rank --nproc-per-node 2 --no-tag -- \
  sh -c 'echo "virtual: RANK=$RANK LOCAL_RANK=$LOCAL_RANK CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"'
expect_rc 0 "--virtual-local-rank"
assert_file_matches "$OUT" "^virtual: RANK=0 LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=4$" "--virtual-local-rank: rank 0"
assert_file_matches "$OUT" "^virtual: RANK=1 LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=6$" "--virtual-local-rank: rank 1"

wait_for 5 no_marked_processes
assert_no_leftovers "after the env dumps"
pass
