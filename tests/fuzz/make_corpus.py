#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into corpus/<target>/.

Seeds are small, valid (or nearly valid) inputs that start each fuzzer deep in
its parser. Rerun after a wire format change (rendezvous/codec.hpp: bump
VERSION below) and commit the result: python3 tests/fuzz/make_corpus.py
"""
import hashlib
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = 5  # rendezvous::kProtocolVersion


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.remove(os.path.join(d, old))
    for seed in seeds:
        data = seed.encode() if isinstance(seed, str) else seed
        name = hashlib.sha1(data).hexdigest()
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


# ---- codec: one byte of piece size, then frames ----
def i32(v):
    return struct.pack(">i", v)


def s(v):
    b = v.encode() if isinstance(v, str) else v
    return struct.pack(">I", len(b)) + b


def lst(items, enc):
    return struct.pack(">I", len(items)) + b"".join(enc(x) for x in items)


def frame(type_, payload):
    return b"DLRV" + bytes([VERSION, type_, 0, 0]) + struct.pack(">I", len(payload)) + payload


hello = frame(1, i32(VERSION) + s("job42") + s(b"\x01" * 32) + i32(2) + i32(4) + i32(3) + i32(1800000) + i32(1)
              + i32(1) + i32(2) + i32(10000) + i32(300000))
challenge = frame(2, s(b"\x02" * 32) + s(b"\x04" * 32))
proof = frame(3, s(b"\x03" * 32))
join = frame(4, s("job42") + s("node1") + lst(["127.0.0.1", "::1"], s) + i32(8) + i32(8) + i32(-1)
             + i32(1) + i32(29500) + lst([20000, 20001], i32) + i32(1))
node = lambda h, a, n, ports: s(h) + s(a) + i32(n) + lst(ports, i32)
assignment = frame(5, i32(1) + i32(0) + lst([("n0", "127.0.0.1", 2, [1, 2]), ("n1", "127.0.0.2", 1, [])],
                                            lambda t: node(*t))
                   + s("127.0.0.1") + i32(29500) + s("job42") + i32(0) + i32(2) + i32(0) + i32(3))
heartbeat = frame(6, i32(5000) + i32(2) + struct.pack(">q", 4000000000) + struct.pack(">q", -1))
failed = frame(7, i32(1) + i32(0) + i32(3) + i32(137) + s("killed by signal 9"))
abort = frame(8, s("node 1 (n1) lost") + i32(1))
done = frame(9, i32(1) + i32(0) + i32(0))
leave = frame(10, i32(1))
refused = frame(11, s("rendezvous: bad token"))
query = frame(12, i32(1) + s("stacks"))
report = frame(13, i32(1) + i32(1) + lst(['{"rank":2,"pid":42}', '{"rank":3,"pid":43}'], s))
standby = frame(14, i32(3) + s("node 1 (b) lost"))
frames = [hello, challenge, proof, join, assignment, heartbeat, failed, abort, done, leave, refused, query, report,
          standby]
write("codec", [bytes([63]) + f for f in frames]
      + [bytes([0]) + hello + challenge + proof + join + assignment + heartbeat,
         bytes([5]) + failed + abort + done + leave + refused + query + report,
         bytes([63]) + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
         bytes([1]) + hello[:12] + b"\x00" * 3])

# ---- hostfile: hostfile text \0 -H list \0 --include \0 --exclude ----
write("hostfile", [
    "n1 slots=4\nn2 slots=4 max_slots=8\n# comment\n\x00n1:4,n2:4\x00n1@n2:0,2\x00",
    "worker-0 slots=8\nworker-1 slots=8\n\x00worker-0,worker-1\x00\x00worker-1:0,1",
    "n1:2\nn2\n\x00n1:2000000000\x00\x00n1:0",
    "[::1]:4\nfe80::1 slots=2\n\x00[::1]:4,127.0.0.1:2\x00::1\x00",
    "# only comments\n\n\x00\x00\x00",
])

# ---- hostlist: SLURM_JOB_NODELIST (and SLURM_TASKS_PER_NODE) ----
write("hostlist", [
    "gpu[001-004,007],cpu01", "b04-[09-10]", "r[1-2]n[1-2]", "node1", "a[1-3],b,c[08-10]",
    "2(x3),1", "4", "a[0-9]b[0-9]",
    # Issue 9, finding 8: an unsigned wrap that loops for ever, a product of ranges
    # that runs out of memory, a number past 32 bits.
    "a[4294967295-4294967295]", "a[0-99999]b[0-99999]", "a[4294967296]",
])

# ---- cli: arguments separated by NUL; PET_X=V goes to the environment ----
args = lambda *a: "\x00".join(a)
write("cli", [
    args("--nproc-per-node", "4", "train.py", "--lr", "0.1"),
    args("--nnodes", "1:2", "--rdzv-endpoint", "127.0.0.1:29400", "--rdzv-id", "job", "--rdzv-conf",
         "is_host=1,join_timeout=30,heartbeat_timeout=5", "--", "python3", "x.py"),
    args("-H", "n1:4,n2:4", "--exclude", "n1:0", "-x", "NCCL_DEBUG=INFO", "--ssh-option", "Port=22", "--", "true"),
    args("--legacy-launch", "--use-env", "--nproc_per_node=2", "--master_port=29501", "-m", "mod"),
    args("--redirects", "0:1,1:2", "--tee", "3", "--local-ranks-filter", "0,1", "--tag-output={rank}: ",
         "--shutdown-timeout", "2.5", "--signals-to-handle", "SIGTERM,SIGUSR1", "--", "true"),
    args("PET_NPROC_PER_NODE=2", "PET_NNODES=1", "--explain"),
    args("--roles", "chief:1,worker:2,ps:1", "--role-env", "ps:MAGIC=1", "--env", "ompi,azure,horovod",
         "--bind-to", "core", "--", "true"),
    args("--nproc-per-nod", "2", "x.py"),
    # Issue 9, finding 8: non-finite and huge durations, the largest worker count.
    args("--shutdown-timeout", "1e300", "--", "true"),
    args("--rdzv-conf", "join_timeout=inf", "--", "true"),
    args("--nproc-per-node", "2147483647", "--", "true"),
])

# ---- tf_config: --roles \0 TF_CONFIG \0 --role-env ... ----
tf = lambda cluster, type_, index: json.dumps({"cluster": cluster, "task": {"type": type_, "index": index}})
cluster = {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"], "ps": ["h3:2222"]}
write("tf_config", [
    "chief:1,worker:2,ps:1\x00" + tf(cluster, "worker", 1) + "\x00ps:MAGIC=newnumber",
    "worker:2\x00" + tf({"worker": ["[::1]:1", "127.0.0.1:2"]}, "worker", 0),
    "chief,evaluator:1\x00" + tf(cluster, "evaluator", 0),
    "worker:1073741824,ps:1073741824\x00" + tf(cluster, "ps", 0),
    "ps:1\x00{\"cluster\": {}, \"task\": {}}\x00ps:A=B",
])

# ---- multi_prog: one byte, the world size less one, then an srun --multi-prog file ----
write("multi_prog", [
    bytes([7]) + b"4-6 hostname\n1,7 echo task:%t\n0,2-3 echo offset:%o\n",
    bytes([3]) + b"# comment\n\n0,2 a\r\n1,3 b 'x %t' y\\ z\r\n",
    bytes([3]) + b"0 server --port 1\n* worker \\\n  --id=%o\n",
    bytes([255]) + b"0-254 a\n255 b\n* c\n",
    bytes([3]) + b"0-1 a\n1-99999999999999999999 b\n3-1 c\n* d\n* e\n",
    bytes([0]) + b"0 a 'unclosed\n0 \x00\n",
])

# ---- programs: DLAUNCH_PROGRAMS, the groups a head sends its agents ----
write("programs", [
    '{"groups":[{"role":"trainer","line":"group 1","argv":["python3","-u","train.py"],"local_rank_arg_at":3,'
    '"expand":false,"env":[["K","1"]],"ompi":false,"azure":false,"horovod":false,"gpus":["0","1"]},'
    '{"role":"rollout","line":"group 2","argv":["serve","%t"],"local_rank_arg_at":2,"expand":true,"env":[],'
    '"ompi":true,"azure":false,"horovod":false,"gpus":[]}],"per_node":[2,1],"node_counts":[[2,0],[0,1]],'
    '"restarts":[["rollout",2]]}',
    '{"groups":[{"role":"a","line":"","argv":["a"],"local_rank_arg_at":99999999999,"expand":1}],'
    '"per_node":[-1],"node_counts":[[1,2]],"restarts":[[1,2]]}',
    '{"groups":[[[[[[[["deep"]]]]]]]]}',
])
