#!/usr/bin/env bash
# ctest: LABELS=slow PROCESSORS=2
# `dlaunch job SPEC.yml`: the seeds' job specs (../shared/seeds/000 and 001),
# written in their shapes, run on this machine, each instance a node on its own
# loopback address:
#   1. TensorFlow, 2 workers + 4 parameter servers with per-role MAGIC: six nodes,
#      one cluster of six distinct host:port pairs, MAGIC by role, $MAGIC expanded;
#   2. PyTorch per process (2 instances x 2): the real DDP example;
#   3. PyTorch per node: the real torch.distributed.launch with $NODE_RANK
#      $MASTER_ADDR $MASTER_PORT in the command (seed 000's);
#   4. MPI with dlaunch as the launcher (2 x 2): a script using the seeds'
#      aml_mpienv helper pattern (OMPI_COMM_WORLD_*, AZ_BATCH_MASTER_NODE), and DDP;
#   5. MPI whose command is mpirun -np 4 --hostfile $AZUREML_MPI_HOSTFILE;
#   6. --explain, and errors naming file:line, a count that does not match -H;
#   7. case 5's shape from a head onto two network-namespace hosts with sshd
#      (-H A,B): the command runs on node 0 and the user's mpirun fans out to
#      both (needs root, `ip netns`, sshd; skipped, logged, without them). Last,
#      since a machine that cannot make namespaces skips from there on.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch
SRC=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$TMP/job/src"
cp "$SRC/examples/ddp_train.py" "$TMP/job/src/"

# 1. TensorFlow with parameter servers (seed 000's shape).
cat >"$TMP/job/src/tf_task.py" <<'PYEOF'
import json, os, sys
with open(os.path.join(sys.argv[1], os.environ["RANK"] + ".json"), "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv[2:], "cwd": os.getcwd()}, f)
PYEOF
mkdir -p "$TMP/tf"
cat >"$TMP/job/tf_ps.yml" <<YAMLEOF
command: $PY tf_task.py $TMP/tf --magic \$MAGIC
code:
  path:
    ./src
environment:
  docker:
    image: docker.io/tensorflow
environment_variables:
  MAGIC: number
distributed:
  tensorflow:
    worker:
      count: 2
      resource_limits:
        cpu: 4
    parameter_server:
      count: 4
      resource_limits:
        gpu: 4
        memory: 2Gi
      environment_variables:
        MAGIC: newnumber
compute:
  infrastructure: managed
  target: gpu-cluster
YAMLEOF
run_dl 90 job "$TMP/job/tf_ps.yml"
expect_rc 0 "dlaunch job tf_ps.yml"
assert_file_matches "$ERR" "^dlaunch: $TMP/job/tf_ps.yml: not applied here \(the platform's\): environment \(line 5\), .*compute.target" \
  "the platform's fields named once"
out=$("$PY" - "$TMP/tf" "$TMP/job/src" <<'PYEOF'
import glob, json, os, sys
tasks = [json.load(open(p)) for p in glob.glob(os.path.join(sys.argv[1], "*.json"))]
bad = []
if len(tasks) != 6: bad.append(f"expected 6 tasks, got {len(tasks)}")
clusters = set()
for t in tasks:
    e = t["env"]
    tf = json.loads(e["TF_CONFIG"])
    clusters.add(json.dumps(tf["cluster"], sort_keys=True))
    kind = tf["task"]["type"]
    want = "newnumber" if kind == "ps" else "number"
    if e.get("MAGIC") != want or t["argv"] != ["--magic", want]:
        bad.append(f"{kind} {tf['task']['index']}: MAGIC={e.get('MAGIC')!r} argv={t['argv']}, expected {want}")
    if t["cwd"] != sys.argv[2]:
        bad.append(f"cwd {t['cwd']}, expected code.path {sys.argv[2]}")
if len(clusters) != 1:
    bad.append(f"the tasks disagree on the cluster: {clusters}")
else:
    c = json.loads(clusters.pop())
    addrs = c.get("worker", []) + c.get("ps", [])
    if len(c.get("worker", [])) != 2 or len(c.get("ps", [])) != 4 or len(set(addrs)) != 6:
        bad.append(f"expected 2 workers and 4 ps at 6 distinct host:port pairs: {c}")
    if len({a.rpartition(':')[0] for a in addrs}) != 6:
        bad.append(f"expected six nodes (six loopback addresses): {addrs}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PYEOF
) || fail_run "tf_ps.yml: $out"
wait_for 10 no_marked_processes
assert_no_leftovers "after the TensorFlow job"

# check_ddp N WHAT: N ranks report their parameters in sync. Counted by
# occurrence, not by line: under a per-node launcher (torch.distributed.launch)
# the workers share its stdout, and print()'s text and newline are two writes,
# so two ranks' reports can share a line ("rank 2: ...rank 3: ...").
check_ddp() {
  local n_sync
  n_sync=$(grep -Eo 'rank [0-9]+: params in sync, checksum [0-9.]+' "$OUT" | wc -l)
  [[ $n_sync == "$1" ]] || fail_run "$2: expected $1 ranks in sync, got $n_sync"
  [[ $(grep -Eo 'params in sync, checksum [0-9.]+' "$OUT" | sort -u | wc -l) == 1 ]] ||
    fail_run "$2: the ranks disagree"
}

# 2. PyTorch, per process: 2 instances x 2 (the distribution: form).
cat >"$TMP/job/torch_pp.yml" <<YAMLEOF
command: $PY -u ddp_train.py --epochs 1 --steps 4
code:
  path: ./src
distribution:
  type: pytorch
  process_count_per_instance: 2
resources:
  instance_count: 2
YAMLEOF
run_dl 120 job "$TMP/job/torch_pp.yml"
expect_rc 0 "dlaunch job torch_pp.yml"
check_ddp 4 "per-process PyTorch"
wait_for 10 no_marked_processes

# 3. PyTorch, per node: seed 000's command, the real torch.distributed.launch in
# each instance, told $NODE_RANK, $MASTER_ADDR and $MASTER_PORT. Debian's torch
# 1.13 launcher fails on Python 3.11 (Std.from_str iterates an IntFlag, see
# ../shared/tools/torchrun311.py); the spec's PYTHONPATH brings a
# sitecustomize.py that makes the same one-function fix when that module is
# imported, and leaves torch.distributed.launch itself unchanged.
mkdir -p "$TMP/job/py311"
cat >"$TMP/job/py311/sitecustomize.py" <<'PYEOF'
import importlib.abc, importlib.machinery, re, sys

API = "torch.distributed.elastic.multiprocessing.api"

def fix(api):
    Std = api.Std
    def from_str(vm):
        if re.fullmatch(r"\d", vm):
            return Std(int(vm))
        return {int(i): Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    Std.from_str = staticmethod(from_str)

class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != API:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            fix(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Finder())
PYEOF
cat >"$TMP/job/torch_pn.yml" <<YAMLEOF
command: >-
  $PY -m torch.distributed.launch --nproc_per_node 2 --nnodes 2
  --node_rank \$NODE_RANK --master_addr \$MASTER_ADDR --master_port \$MASTER_PORT --use_env
  ddp_train.py --epochs 1 --steps 4
code:
  path: ./src
environment_variables:
  MASTER_PORT: $(free_port)
  PYTHONPATH: $TMP/job/py311
distributed:
  pytorch:
    worker:
      count: 2
YAMLEOF
run_dl 120 job "$TMP/job/torch_pn.yml"
expect_rc 0 "dlaunch job torch_pn.yml"
assert_file_matches "$ERR" "The module torch.distributed.launch is deprecated" "torch.distributed.launch itself ran"
check_ddp 4 "per-node torch.distributed.launch"
wait_for 10 no_marked_processes

# 4. MPI with dlaunch as the launcher: the seeds' aml_mpienv pattern, then DDP.
cat >"$TMP/job/src/aml_ddp.py" <<'PYEOF'
import os, runpy, sys
# The seeds' aml_mpienv.py: RANK and the rest from Open MPI's and Azure ML's variables.
os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
os.environ["LOCAL_RANK"] = os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]
single_node = int(os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"]) == int(os.environ["WORLD_SIZE"])
if not single_node:
    addr = os.environ["AZ_BATCH_MASTER_NODE"].split(":")
    os.environ["MASTER_ADDR"] = addr[0]
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = "6105"
else:
    os.environ["MASTER_ADDR"] = os.environ["AZ_BATCHAI_MPI_MASTER_NODE"]
print(f"aml_mpienv: rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}, hostfile "
      f"{os.path.exists(os.environ['AZUREML_MPI_HOSTFILE'])}", flush=True)
sys.argv = ["ddp_train.py"] + sys.argv[1:]
runpy.run_path("ddp_train.py", run_name="__main__")
PYEOF
cat >"$TMP/job/mpi.yml" <<YAMLEOF
command: $PY -u aml_ddp.py --epochs 1 --steps 4
code:
  path: ./src
distributed:
  mpi:
    worker:
      count: 2
      slots_per: 2
YAMLEOF
run_dl 120 job "$TMP/job/mpi.yml"
expect_rc 0 "dlaunch job mpi.yml"
for r in 0 1 2 3; do assert_file_matches "$OUT" "aml_mpienv: rank $r of 4, hostfile True" "aml_mpienv on rank $r"; done
check_ddp 4 "MPI with dlaunch as the launcher"
wait_for 10 no_marked_processes

# 5. MPI whose command is mpirun: once, with AZUREML_MPI_HOSTFILE. The ranks'
# reports are counted by occurrence: mpirun passes on each rank's output as it
# reads it, and a line's text and its newline may come apart
# ("mpi rank 1mpi rank 0", then two newlines).
if command -v mpirun >/dev/null; then
  cat >"$TMP/job/mpirun.yml" <<YAMLEOF
command: >-
  mpirun -np 4 --hostfile \$AZUREML_MPI_HOSTFILE --allow-run-as-root --oversubscribe
  $PY -c "import os; print('mpi rank ' + os.environ['OMPI_COMM_WORLD_RANK'] + ' here', flush=True)"
distributed:
  mpi:
    worker:
      count: 2
      slots_per: 2
YAMLEOF
  run_dl 120 job "$TMP/job/mpirun.yml"
  expect_rc 0 "dlaunch job mpirun.yml"
  [[ $(grep -Eo "mpi rank [0-3] here" "$OUT" | sort -u | wc -l) == 4 ]] || fail_run "mpirun.yml: expected MPI ranks 0-3"
  wait_for 10 no_marked_processes
fi

# 6. --explain runs nothing; errors name file:line; a node list must match.
run_dl 10 job "$TMP/job/tf_ps.yml" --explain
expect_rc 0 "--explain"
assert_file_matches "$OUT" "^job: $TMP/job/tf_ps.yml: 6 instance\(s\), 6 process\(es\) in all, as: dlaunch -H 127.0.0.1:1," "--explain's flags"
assert_file_matches "$OUT" "^node 5: 127.0.0.6, workers 1, through a local shell$" "--explain's nodes"
printf 'command: x\ndistributed:\n  pytorch:\n    workr:\n      count: 2\n' >"$TMP/job/typo.yml"
run_dl 5 job "$TMP/job/typo.yml"
expect_rc 2 "a misspelt key"
assert_file_matches "$ERR" "^dlaunch: $TMP/job/typo.yml:4: unknown key 'distributed.pytorch.workr' \(did you mean 'distributed.pytorch.worker'\?\)$" "the typo named"
printf 'command: x\ndistributed:\n  mpi:\n    worker:\n      count: -1\n' >"$TMP/job/count.yml"
run_dl 5 job "$TMP/job/count.yml"
expect_rc 2 "a bad count"
assert_file_matches "$ERR" "^dlaunch: $TMP/job/count.yml:5: distributed.mpi.worker.count: expected a number from 1 to 65536, got '-1'$" "the count named"
run_dl 5 job "$TMP/job/torch_pp.yml" -H 127.0.0.1,127.0.0.2,127.0.0.3
expect_rc 2 "a node list of the wrong size"
assert_file_matches "$ERR" "^dlaunch: $TMP/job/torch_pp.yml:8: the spec has 2 instance\(s\) but the node list has 3 node\(s\)$" "both counts named, at the count's line"
if [[ -e $TMP/job/mpirun.yml ]]; then
  run_dl 5 job "$TMP/job/mpirun.yml" -H 127.0.0.1,127.0.0.2,127.0.0.3
  expect_rc 2 "a node list of the wrong size for an mpirun command"
  assert_file_matches "$ERR" "^dlaunch: $TMP/job/mpirun.yml:7: the spec has 2 instance\(s\) but the node list has 3 node\(s\)$" "both counts named (mpirun)"
fi
# A bad value from --set names the --set, not a line of the file it is not on.
run_dl 5 job "$TMP/job/torch_pp.yml" --set distribution.process_count_per_instance=x
expect_rc 2 "a bad --set value"
assert_file_matches "$ERR" "^dlaunch: --set distribution.process_count_per_instance=x: distribution.process_count_per_instance: expected a number from 1 to 65536, got 'x'$" "the --set named"
# A flag the spec decides, given again, would win over it unseen: refused.
run_dl 5 job "$TMP/job/torch_pp.yml" --nproc_per_node=3
expect_rc 2 "--nproc-per-node after a spec"
assert_file_matches "$ERR" "^dlaunch: --nproc_per_node: the job spec decides it \(change the spec, or use --set KEY.PATH=VALUE\)$" "the flag named"
run_dl 5 job "$TMP/job/missing.yml"
expect_rc 2 "a missing spec"
assert_file_matches "$ERR" "^dlaunch: job spec $TMP/job/missing.yml: cannot read \(No such file or directory\)$" "the missing file named"
run_dl 5 job "$TMP/job"
expect_rc 2 "a directory as the spec"
assert_file_matches "$ERR" "^dlaunch: job spec $TMP/job: not a regular file$" "the directory named as the spec"

# 7. Case 5's spec shape over two namespace hosts, each with its own sshd
#    (lib.sh's ssh_hosts): dlaunch job -H A,B in a third (the head). The
#    spec's own mpirun -np 4 --hostfile $AZUREML_MPI_HOSTFILE runs once, on
#    node 0 (A: mpirun's own address, OMPI_MCA_orte_hnp_uri, is A's), and fans
#    out to both hosts (the test's key and port in plm_rsh_args, as a user
#    would give theirs): ranks 0-1 on A, 2-3 on B. The hostfile is gone after.
if command -v mpirun >/dev/null && [[ $(id -u) == 0 ]] && command -v ip >/dev/null && command -v ssh >/dev/null &&
  { command -v sshd >/dev/null || [[ -x /usr/sbin/sshd ]]; }; then
  ssh_hosts "dljob$$-" 3
  cat >"$TMP/job/src/mpi_where.py" <<'PYEOF'
import os, subprocess
addr = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", "eth0"], capture_output=True, text=True).stdout.split()[3].split("/")[0]
hnp = os.environ["OMPI_MCA_orte_hnp_uri"].split("//")[1].split(":")[0]
# mpirun passes AZUREML_MPI_HOSTFILE on only to the ranks on its own node.
f = os.environ.get("AZUREML_MPI_HOSTFILE")
hosts = open(f).read().replace("\n", ";") if f else "-"
print(f"mpi rank {os.environ['OMPI_COMM_WORLD_RANK']} of {os.environ['OMPI_COMM_WORLD_SIZE']} on {addr} mpirun on {hnp} hosts {hosts} ", flush=True)
PYEOF
  cat >"$TMP/job/mpirun_ssh.yml" <<YAMLEOF
command: >-
  mpirun -np 4 --hostfile \$AZUREML_MPI_HOSTFILE --allow-run-as-root
  --mca plm_rsh_agent ssh --mca plm_rsh_args "${SSH_CLIENT_ARGS[*]}"
  $PY mpi_where.py
code:
  path: ./src
distributed:
  mpi:
    worker:
      count: 2
      slots_per: 2
YAMLEOF
  run_cmd 120 ip netns exec "${NS_HOSTS[0]}" "$DLAUNCH" job "$TMP/job/mpirun_ssh.yml" -H "$NET.2,$NET.3" "${SSH_FLAGS[@]}"
  expect_rc 0 "dlaunch job mpirun_ssh.yml -H A,B"
  for r in 0 1 2 3; do
    host=$NET.$((r / 2 + 2))
    hosts="$NET.2 slots=2;$NET.3 slots=2;"
    [[ $host == "$NET.3" ]] && hosts=-
    assert_file_matches "$OUT" "mpi rank $r of 4 on $host mpirun on $NET.2 hosts $hosts " \
      "mpirun over ssh: rank $r on $host, mpirun on node 0 ($NET.2), the hostfile naming both nodes"
  done
  [[ $(grep -o "mpi rank" "$OUT" | wc -l) == 4 ]] || fail_run "mpirun over ssh: expected 4 MPI ranks"
  leftover=$(compgen -G "/tmp/dlaunch-job-*.hosts" || true)
  [[ -z $leftover ]] || fail "mpirun over ssh: the hostfile was left behind: $leftover"
  stop_sshds
  wait_for 10 no_marked_processes
else
  log "case 7 skipped: needs mpirun, root, ip, ssh and sshd"
fi

wait_for 10 no_marked_processes
assert_no_leftovers "at the end"
pass
