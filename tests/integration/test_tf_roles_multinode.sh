#!/usr/bin/env bash
# --roles across nodes: tasks take global ranks in the order the roles are
# listed, nodes take them in node-rank order, and every task on every node gets
# the same TF_CONFIG cluster, each task at its own node's address and a port
# free there.
#   1. two rendezvous agents on 127.0.0.1 and 127.0.0.2 (--local-addr);
#   2. a head launch over -H 127.0.0.1:2,127.0.0.2:2 (local shells);
#   3. what cannot work is refused in one line, exit 2: the static form across
#      nodes (no one can tell the other nodes' ports) and shares that are not whole;
#   4. a head launch over ssh onto two network-namespace hosts A and B, each
#      with its own sshd (lib.sh's ssh_hosts), the head in a third: tasks 0-1
#      on A's address, 2-3 on B's, each port bindable on its own host.
# Case 4 needs root, `ip netns` and sshd: without them it is skipped (logged);
# it runs last, since a machine that cannot make namespaces skips from there on.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

# Each task records its environment, and proves its port is free on its own
# address by binding it.
cat >"$TMP/task.py" <<'PYEOF'
import json, os, socket, sys
tf = json.loads(os.environ["TF_CONFIG"])
t = tf["task"]
host, _, port = tf["cluster"][t["type"]][t["index"]].rpartition(":")
s = socket.socket()
try:
    s.bind((host, int(port)))
    bound = "ok"
except OSError as ex:
    bound = str(ex)
env = dict(os.environ, BOUND=bound)
with open(os.path.join(sys.argv[1], os.environ["RANK"] + ".json"), "w") as f:
    json.dump(env, f)
PYEOF

cat >"$TMP/check.py" <<'PYEOF'
import glob, json, os, sys
d, want_addrs = sys.argv[1], sys.argv[2]  # want_addrs: "any" or the address per rank, comma-separated
problems = []
bad = problems.append
envs = {}
for p in glob.glob(os.path.join(d, "*.json")):
    with open(p) as f:
        e = json.load(f)
    envs[int(e["RANK"])] = e
roles = [("chief", 1), ("worker", 2), ("ps", 1)]
n = sum(k for _, k in roles)
if sorted(envs) != list(range(n)):
    bad(f"expected ranks 0..{n-1} to report, got {sorted(envs)}")
want = [(role, i) for role, k in roles for i in range(k)]  # by global rank
clusters = set()
for r, e in sorted(envs.items()):
    tf = json.loads(e["TF_CONFIG"])
    clusters.add(json.dumps(tf["cluster"], sort_keys=True))
    got = (tf["task"]["type"], tf["task"]["index"])
    if r < len(want) and got != want[r]:
        bad(f"rank {r}: task {got}, expected {want[r]}")
    if e.get("NODE_RANK") != str(r // 2):
        bad(f"rank {r}: NODE_RANK {e.get('NODE_RANK')!r}, expected {r // 2} (two tasks per node, in node-rank order)")
    if e.get("WORLD_SIZE") != str(n):
        bad(f"rank {r}: WORLD_SIZE {e.get('WORLD_SIZE')!r}, expected {n}")
    if e.get("BOUND") != "ok":
        bad(f"rank {r}: could not bind its own TF port: {e.get('BOUND')}")
    if (got[0] == "ps") != (e.get("MAGIC") == "newnumber"):
        bad(f"rank {r} ({got[0]}): MAGIC={e.get('MAGIC')!r}; only the ps gets --role-env ps:MAGIC=newnumber")
    leaked = sorted(k for k in e if k.startswith("DLAUNCH_ROLE_ENV_"))
    if leaked:
        bad(f"rank {r}: inherited {leaked}, the head's carrier of --role-env values to its agents")
if len(clusters) != 1:
    bad(f"the tasks disagree on the cluster: {sorted(clusters)}")
else:
    cluster = json.loads(clusters.pop())
    addrs = [a for role, _ in roles for a in cluster[role]]
    if len(set(addrs)) != n:
        bad(f"expected {n} distinct host:port pairs, got {addrs}")
    if want_addrs != "any":
        hosts = [a.rpartition(":")[0] for a in addrs]
        if hosts != want_addrs.split(","):
            bad(f"task hosts by rank: {hosts}, expected {want_addrs}")
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PYEOF

check() {  # check DIR ADDRS WHAT
  local out
  out=$(timeout 30 "$PY" "$TMP/check.py" "$1" "$2" 2>&1) || { show_run; fail "$3: $(echo "$out" | head -n 10)"; }
}

# shellcheck disable=SC2054  # the commas are --roles' own
roles=(--roles chief:1,worker:2,ps:1 --role-env ps:MAGIC=newnumber)

# 1. Two agents of the rendezvous, each on its own loopback address.
port=$(free_port)
mkdir -p "$TMP/rdzv"
for i in 0 1; do
  start_dl "node$i" 60 --nnodes 2 --node-rank "$i" --rdzv-endpoint "127.0.0.1:$port" --rdzv-id tf \
    --local-addr "127.0.0.$((i + 1))" "${roles[@]}" -- "$PY" "$TMP/task.py" "$TMP/rdzv"
done
for i in 0 1; do
  wait_dl "node$i"
  expect_rc 0 "rendezvous agent $i with --roles across 2 nodes"
done
check "$TMP/rdzv" 127.0.0.1,127.0.0.1,127.0.0.2,127.0.0.2 "rendezvous"
wait_for 5 no_marked_processes
assert_no_leftovers "after the rendezvous job"

# 2. A head launch: the head forwards --roles, each agent runs its share.
mkdir -p "$TMP/head"
run_dl 60 -H 127.0.0.1:2,127.0.0.2:2 "${roles[@]}" -- "$PY" "$TMP/task.py" "$TMP/head"
expect_rc 0 "head launch with --roles across 2 nodes"
check "$TMP/head" any "head launch"
wait_for 5 no_marked_processes
assert_no_leftovers "after the head launch"

# 3. Refusals: one line naming --roles, exit 2.
run_dl 5 --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 "${roles[@]}" -- true
expect_rc 2 "static multi-node --roles"
assert_file_matches "$ERR" "^dlaunch: --roles: across nodes the tasks meet through the rendezvous" "static --roles refused"
run_dl 5 --nnodes 2 --rdzv-endpoint "127.0.0.1:$port" --roles worker:3 -- true
expect_rc 2 "--roles worker:3 over 2 nodes"
assert_file_matches "$ERR" "^dlaunch: --roles: 3 tasks do not split evenly over 2 nodes" "an uneven share refused"
run_dl 5 --nnodes 2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --roles worker:3 -- true
expect_rc 2 "--roles worker:3 with 2 nodes of 1"
assert_file_matches "$ERR" "^dlaunch: --roles: counts add up to 3 but 2 nodes of --nproc-per-node 1 make 2" "a count mismatch refused"
[[ $(wc -l <"$ERR") == 1 ]] || fail "expected one line on stderr, got: $(cat "$ERR")"

# 4. A head launch over ssh onto two namespace hosts (the head in a third).
netns_ok() { [[ $(id -u) == 0 ]] && command -v ip >/dev/null && command -v ssh >/dev/null &&
  { command -v sshd >/dev/null || [[ -x /usr/sbin/sshd ]]; }; }
if netns_ok; then
  ssh_hosts "dltfr$$-" 3
  mkdir -p "$TMP/netns"
  start_dl_wrapped netns 90 "ip netns exec ${NS_HOSTS[0]}" -H "$NET.2:2,$NET.3:2" "${SSH_FLAGS[@]}" "${roles[@]}" \
    -- "$PY" "$TMP/task.py" "$TMP/netns"
  wait_dl netns
  expect_rc 0 "head launch over ssh with --roles across 2 namespace hosts"
  check "$TMP/netns" "$NET.2,$NET.2,$NET.3,$NET.3" "head launch over ssh"
  stop_sshds
  wait_for 5 no_marked_processes
  assert_no_leftovers "after the head launch over ssh"
else
  log "case 4 skipped: needs root, ip, ssh and sshd"
fi
pass
