#!/usr/bin/env bash
# --roles gives each task a TF_CONFIG (Kubeflow's shape: evaluator left out of
# the cluster, every task its own port) and --role-env adds variables to one role.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

cat >"$TMP/dump_env.py" <<'PYEOF'
import json, os, sys
with open(os.path.join(sys.argv[1], os.environ.get("RANK", "norank") + ".json"), "w") as f:
    json.dump(dict(os.environ), f)
PYEOF

cat >"$TMP/check.py" <<'PYEOF'
import glob, json, os, sys
d = sys.argv[1]
problems = []
bad = problems.append
envs = []
for p in sorted(glob.glob(os.path.join(d, "*.json"))):
    with open(p) as f:
        envs.append(json.load(f))
roles = {"chief": 1, "worker": 2, "ps": 1, "evaluator": 1}
n = sum(roles.values())
if len(envs) != n:
    bad(f"expected {n} tasks to report, got {len(envs)}")
ranks = sorted(e.get("RANK", "?") for e in envs)
if ranks != [str(i) for i in range(n)]:
    bad(f"RANK values: expected 0..{n-1}, got {ranks}")

tasks = []
clusters = []
for e in envs:
    r = e.get("RANK")
    if e.get("WORLD_SIZE") != str(n):
        bad(f"rank {r}: WORLD_SIZE: expected '{n}', got {e.get('WORLD_SIZE')!r}")
    raw = e.get("TF_CONFIG")
    if raw is None:
        bad(f"rank {r}: TF_CONFIG is missing")
        continue
    try:
        tf = json.loads(raw)
    except ValueError as ex:
        bad(f"rank {r}: TF_CONFIG is not JSON ({ex}): {raw!r}")
        continue
    if tf.get("environment") != "cloud":
        bad(f"rank {r}: TF_CONFIG environment: expected 'cloud', got {tf.get('environment')!r}")
    task = tf.get("task", {})
    ttype, tindex = task.get("type"), task.get("index")
    if ttype not in roles or not isinstance(tindex, int):
        bad(f"rank {r}: TF_CONFIG task: expected a type in {sorted(roles)} and an integer index, got {task!r}")
        continue
    tasks.append((ttype, tindex))
    clusters.append(json.dumps(tf.get("cluster"), sort_keys=True))
    cluster = tf.get("cluster", {})
    if set(cluster) != {"chief", "worker", "ps"}:
        bad(f"rank {r}: cluster keys: expected chief, worker, ps (no evaluator), got {sorted(cluster)}")
    for role, want_n in roles.items():
        if role == "evaluator":
            continue
        got = cluster.get(role, [])
        if not isinstance(got, list) or len(got) != want_n:
            bad(f"rank {r}: cluster[{role!r}]: expected a list of {want_n} addresses, got {got!r}")
    # The role view follows the task.
    if e.get("ROLE_NAME") != ttype:
        bad(f"rank {r} ({ttype}:{tindex}): ROLE_NAME: expected {ttype!r}, got {e.get('ROLE_NAME')!r}")
    if e.get("ROLE_RANK") != str(tindex):
        bad(f"rank {r} ({ttype}:{tindex}): ROLE_RANK: expected '{tindex}', got {e.get('ROLE_RANK')!r}")
    if e.get("ROLE_WORLD_SIZE") != str(roles[ttype]):
        bad(f"rank {r} ({ttype}:{tindex}): ROLE_WORLD_SIZE: expected '{roles[ttype]}', got {e.get('ROLE_WORLD_SIZE')!r}")
    # --role-env ps:MAGIC=newnumber reaches the ps task only.
    if ttype == "ps":
        if e.get("MAGIC") != "newnumber":
            bad(f"rank {r} (ps): MAGIC: expected 'newnumber', got {e.get('MAGIC')!r}")
    elif "MAGIC" in e:
        bad(f"rank {r} ({ttype}): MAGIC={e['MAGIC']!r} leaked to a role other than ps")

want_tasks = sorted((role, i) for role, k in roles.items() for i in range(k))
if sorted(tasks) != want_tasks:
    bad(f"tasks: expected {want_tasks}, got {sorted(tasks)}")
if len(set(clusters)) > 1:
    bad(f"tasks disagree on the cluster: {sorted(set(clusters))}")
if clusters:
    cluster = json.loads(clusters[0]) or {}
    addrs = [a for role in ("chief", "worker", "ps") for a in cluster.get(role, [])]
    ports = []
    for a in addrs:
        host, _, port = str(a).rpartition(":")
        if not host or not port.isdigit() or not (0 < int(port) < 65536):
            bad(f"cluster address {a!r} is not host:port")
        else:
            ports.append(port)
    if len(set(ports)) != len(ports):
        bad(f"every task needs its own port, got {addrs}")
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PYEOF

mkdir -p "$TMP/tf"
run_dl 30 --roles chief:1,worker:2,ps:1,evaluator:1 --role-env ps:MAGIC=newnumber \
  -- "$PY" "$TMP/dump_env.py" "$TMP/tf"
expect_rc 0 "--roles chief:1,worker:2,ps:1,evaluator:1"
out=$(timeout 30 "$PY" "$TMP/check.py" "$TMP/tf" 2>&1) || { show_run; fail "$(echo "$out" | head -n 15)"; }

wait_for 5 no_marked_processes
assert_no_leftovers "after the TF_CONFIG dumps"
pass
