"""The differential test behind test_torchrun_diff.sh: one worker, many
command lines, run under Debian's torchrun (PyTorch 1.13) and under dlaunch.

    /usr/bin/python3 torchrun_diff.py DLAUNCH TMP [CASE-NAME-SUBSTRING...]

TMP holds diff_worker.py and torchrun_py311.py (the script copies them there,
so every command line carries TMP, the test's mark). For each case both
launchers run the same command line (or its dlaunch spelling), each into its
own dump directory, and the test compares what every worker saw (environment,
argv, interpreter, working directory), which files appear under --log-dir,
the worker lines on the console, and the exit status. One line per difference;
exit status 1 when there is any.

A difference that is dlaunch's on purpose is named in a case's `known` (and
in docs/migration.md, "Differences from torchrun"); everything else must be
equal. A case marked `pending` expects torchrun's behaviour where today's
dlaunch differs and a fix is on its way: it fails until then.
"""
import concurrent.futures
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

DLAUNCH, TMP = sys.argv[1], sys.argv[2]
ONLY = sys.argv[3:]
PY = "/usr/bin/python3"
WORK = os.path.join(TMP, "work")  # every run's working directory
WORKER = os.path.join(WORK, "diff_worker.py")
TORCHRUN = [PY, os.path.join(TMP, "torchrun_py311.py")]
RUN_SECS = 60  # a guard against a hang, not a bound on speed

# --- What the comparison leaves out -------------------------------------------

# Values that differ by nature from run to run and launcher to launcher; both
# launchers must set the variable (where torchrun does), its value is not
# compared.
IGNORED_VALUES = {
    "MASTER_PORT",              # a free port each run
    "TORCHELASTIC_ERROR_FILE",  # a path in each launcher's own directory
    "TORCHELASTIC_RUN_ID",      # random unless --rdzv-id gives it (then compared)
}
# Variables of the test harness or of the shell, not of either launcher.
HARNESS = {
    "_",              # the shell's last command
    "DIFF_DUMP_DIR",  # where this worker writes (one per launcher run)
}
# Variables only dlaunch sets, on purpose (docs/environment.md), each with
# the value it must have, from the worker's environment and the case's:
DLAUNCH_ONLY = {
    # GROUP_RANK under the name per-node scripts and job specs use.
    "NODE_RANK": lambda env, case_env: env.get("GROUP_RANK"),
    # torch >= 2.2's name of NCCL_ASYNC_ERROR_HANDLING. Like torch 2.2's
    # torchrun, dlaunch sets it to 1 unless the user set it, even where the
    # user set the old name to 0 (that torch then reads the new name first).
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": lambda env, case_env: case_env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
}
# DLAUNCH_JOB_MARK (docs/supervision.md), DLAUNCH_STACKS_DIR and
# DLAUNCH_STACKS_SIGNAL (the stack hook, docs/hangs.md).
DLAUNCH_ONLY_PREFIX = "DLAUNCH_"
# Set by both with values that differ on purpose (docs/migration.md): the
# value dlaunch must give, whatever torchrun's.
DOCUMENTED_ENV = {
    # torchrun's static rendezvous hosts a TCPStore in the agent and says
    # "True" (workers then join it as clients); dlaunch runs no TCPStore, so
    # rank 0's init_process_group hosts it, as under torchrun's c10d backend.
    "TORCHELASTIC_USE_AGENT_STORE": "False",
}
# PYTHONPATH: dlaunch puts its stack hook's directory first (docs/hangs.md);
# that entry is removed and the rest compared.
HOOK_ENTRY = re.compile(r"/hook-[0-9a-f]+$")

# A worker's console lines, with a launcher's prefix ("[default0]:" from
# torchrun's --tee, "[0]: " from dlaunch) taken off.
WORKER_LINE = re.compile(r"^(?:\[[^\]]*\]: ?)?((?:stdout|stderr) of rank .*)$")
# One message of diff_worker.py. Under torchrun the workers share the console
# untagged, and `python -u` writes print()'s text and its newline apart, so two
# ranks' messages can share a line ("...rank 3 attempt 0stderr of rank 2..."):
# torchrun's lines are read message by message. dlaunch's must be whole.
WORKER_MESSAGE = re.compile(r"(?:stdout|stderr) of rank \d+ attempt \d+")

_ports_lock = threading.Lock()
_ports_given = set()


def free_port():
    """A TCP port free on 127.0.0.1 now, below the ephemeral range, not handed
    out before in this run (as lib.sh's free_port)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        lo = 32768
    with _ports_lock:
        for port in random.sample(range(20000, lo), min(256, max(lo - 20000, 0))):
            if port in _ports_given:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            finally:
                s.close()
            _ports_given.add(port)
            return port
    raise RuntimeError("no free port")


def port_listening(port):
    hexport = ":%04X" % port
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                for line in f.readlines()[1:]:
                    cols = line.split()
                    if cols[3] == "0A" and cols[1].endswith(hexport):
                        return True
        except OSError:
            pass
    return False


# --- Cases ----------------------------------------------------------------------


class Case:
    """One command line.

    args: torchrun's arguments (after `torchrun`), with {W} for the worker's
      absolute path, {LOG} for a fresh --log-dir, {P} for a free port (one per
      launcher run, the same on both nodes).
    dl: dlaunch's arguments when they are spelt otherwise (default: args).
    nodes: 2 runs the command twice at once, {N} being 0 and 1.
    env: variables for both launchers (and so, their workers).
    legacy: torchrun's side is `python -m torch.distributed.launch`.
    fail: the worker's DIFF_FAIL plan (diff_worker.py).
    tr_rc: torchrun's exit status (checked, so the harness is known to be right).
    dl_rc: dlaunch's exit status where it is not torchrun's (the real code).
    expect: a function of torchrun's record giving what dlaunch's worker
      should see, where dlaunch is asked for another spelling on purpose.
    expect_recs: the same for all of torchrun's records at once
      ({RANK.RESTART_COUNT[.againN]: record}), for a documented difference.
    known: differences listed in docs/migration.md: {field: dlaunch's value, or
      None where it is not compared}; a field is "orig_argv" or "env:NAME".
    pending: why the case is expected to fail on today's dlaunch (a fix of
      dlaunch is on its way: the case's expectation is torchrun's).
    serial: torchrun takes a fixed port (--standalone: 29400).
    no_gpu: left out where a GPU is visible (Debian's torch has no CUDA, so
      torchrun counts none while dlaunch counts the GPUs).
    """

    def __init__(self, name, args, dl=None, nodes=1, env=None, legacy=False, fail=None,
                 tr_rc=0, dl_rc=None, expect=None, known=None, pending=None, serial=False, no_gpu=False,
                 expect_recs=None):
        self.name, self.args, self.dl, self.nodes = name, args, dl if dl is not None else args, nodes
        self.env, self.legacy, self.fail = env or {}, legacy, fail
        self.tr_rc, self.dl_rc = tr_rc, tr_rc if dl_rc is None else dl_rc
        self.expect, self.known, self.pending, self.serial = expect, known or {}, pending, serial
        self.no_gpu, self.expect_recs = no_gpu, expect_recs


def hyphens(args):
    """torch 2.x's spelling of torchrun 1.13's flags: --nproc_per_node -> --nproc-per-node."""
    return [re.sub(r"^(--[a-z]+(?:_[a-z]+)+)", lambda m: m.group(1).replace("_", "-"), a)
            if a.startswith("--") else a for a in args]


MI = ["--monitor_interval", "0.1"]  # torchrun checks its workers every 5 s otherwise
W2 = ["--nproc_per_node", "2"] + MI


def local_rank_hyphen(rec):
    """torch >= 2.0's torch.distributed.launch appends --local-rank=N."""
    rec = dict(rec)
    for field in ("argv", "orig_argv"):
        rec[field] = [re.sub(r"^--local_rank=", "--local-rank=", a) for a in rec[field]]
    return rec


def job_restart_count(recs):
    """dlaunch counts a job's restarts, the same on every node; torchrun each
    node's own (a node whose workers did not fail restarts them with its count
    unchanged). What torchrun's workers saw, counted as dlaunch counts."""
    out = {}
    for key, rec in recs.items():
        rank, attempt, *again = key.split(".")
        if again:
            n = int(attempt) + (int(again[0][5:] or 1) if again[0].startswith("again") else 0)
            rec = json.loads(json.dumps(rec))
            rec["env"]["TORCHELASTIC_RESTART_COUNT"] = str(n)
            key = f"{rank}.{n}"
        out[key] = rec
    return out


# dlaunch's static form without --rdzv-id draws a random run id on each node;
# torchrun's workers all get "none" there.
# torchrun --run_path runs the script in a multiprocessing child of its own
# interpreter (orig_argv: python3 -c 'from multiprocessing.spawn ...'); dlaunch
# runs `python3 -u SCRIPT ARGS`. sys.argv is the same.
RUN_PATH = {"orig_argv": None}
# With a rendezvous endpoint, torchrun gives MASTER_ADDR a name: node 0's
# (socket.getfqdn()) with c10d and --standalone, the endpoint's host with the
# static backend; dlaunch gives node 0's address, so no worker depends on
# resolving a name. (--master-addr A gives A under both.)
ADDRESS_NOT_NAME = {"env:MASTER_ADDR": "127.0.0.1"}

CASES = [
    # The two spellings of every flag, and both forms of a value.
    Case("nproc_per_node N", W2 + ["{W}", "--lr", "1"]),
    Case("nproc_per_node=N", ["--nproc_per_node=2", "--monitor_interval=0.1", "{W}"]),
    Case("nproc-per-node N", W2 + ["{W}", "a"], dl=hyphens(W2) + ["{W}", "a"]),
    Case("nproc-per-node=N", ["--nproc_per_node=3"] + MI + ["{W}"],
         dl=["--nproc-per-node=3", "--monitor-interval=0.1", "{W}"]),
    Case("argparse's prefixes: --nproc, --monitor, --max_rest", ["--nproc", "2", "--monitor", "0.1", "--max_rest",
                                                                  "1", "{W}"]),
    Case("no flags: one worker", ["{W}"], env={"PET_MONITOR_INTERVAL": "0.1"}),
    Case("user's OMP_NUM_THREADS, NCCL_ASYNC_ERROR_HANDLING, PYTHONPATH kept", ["--nproc_per_node", "3"] + MI + ["{W}"],
         env={"OMP_NUM_THREADS": "4", "MY_SETTING": "x y", "NCCL_ASYNC_ERROR_HANDLING": "0",
              "PYTHONPATH": "/opt/diff-lib:/opt/other"}),
    Case("nproc_per_node auto (no GPU: os.cpu_count())", ["--nproc_per_node", "auto"] + MI + ["{W}"], no_gpu=True),
    Case("nproc_per_node cpu", ["--nproc_per_node", "cpu"] + MI + ["{W}"]),
    Case("role, rdzv_id, nnodes 1", ["--nnodes", "1", "--role", "trainer", "--rdzv_id", "job-7"] + W2 + ["{W}"]),
    Case("master_addr localhost", ["--master_addr", "localhost", "--master_port", "{P}"] + W2 + ["{W}"]),
    Case("node_rank 0, master_addr, master_port", ["--node_rank", "0", "--master_addr", "127.0.0.1",
                                                   "--master_port", "{P}"] + W2 + ["{W}"]),
    Case("start_method spawn", ["--start_method", "spawn"] + W2 + ["{W}"],
         dl=["--start-method", "spawn"] + hyphens(W2) + ["{W}"]),
    Case("relative script path, its own arguments left alone",
         W2 + ["diff_worker.py", "--nproc_per_node", "5", "a b", "--local_rank=9", "-m", "--", "x"]),
    # PET_* variables instead of flags (Kubeflow's PyTorchJob sets them).
    Case("PET_NPROC_PER_NODE", ["{W}"], env={"PET_NPROC_PER_NODE": "2", "PET_MONITOR_INTERVAL": "0.1"}),
    Case("PET_ set: nnodes, nproc, max_restarts, rdzv_id, role",
         ["{W}"], env={"PET_NNODES": "1", "PET_NPROC_PER_NODE": "3", "PET_MAX_RESTARTS": "1",
                       "PET_RDZV_ID": "kf-job", "PET_ROLE": "worker", "PET_MONITOR_INTERVAL": "0.1"}),
    Case("flag over PET_", W2 + ["{W}"], env={"PET_NPROC_PER_NODE": "3"}),
    Case("PET_MODULE=1", ["--nproc_per_node", "2"] + MI + ["diff_worker"], env={"PET_MODULE": "1"}),
    # How the script is run.
    Case("-m module", W2 + ["-m", "diff_worker", "a"]),
    Case("--module module", W2 + ["--module", "diff_worker"]),
    Case("--no_python", W2 + ["--no_python", PY, "{W}", "a"]),
    Case("--no-python", W2 + ["--no_python", PY, "{W}"], dl=hyphens(W2) + ["--no-python", PY, "{W}"]),
    Case("--no_python sh script", W2 + ["--no_python", "sh", "run_worker.sh", "x"]),
    Case("--run_path", W2 + ["--run_path", "{W}", "a"],
         known=RUN_PATH),
    Case("--run-path", W2 + ["--run_path", "{W}"], dl=hyphens(W2) + ["--run-path", "{W}"],
         known=RUN_PATH),
    # Failures and restarts: each attempt's workers, and the exit status
    # (torchrun's is always 1; dlaunch's is the worker's).
    Case("max_restarts 2, success in attempt 2", ["--max_restarts", "2"] + W2 + ["{W}"], fail="1:2:3"),
    Case("max-restarts 1, failure in every attempt", ["--max_restarts", "1"] + W2 + ["{W}"],
         dl=["--max-restarts", "1"] + hyphens(W2) + ["{W}"], fail="1:99:3", tr_rc=1, dl_rc=3),
    Case("one worker fails, no restarts", MI + ["{W}"], fail="0:99:7", tr_rc=1, dl_rc=7),
    Case("a worker killed by SIGKILL", W2 + ["{W}"], fail="1:99:-9", tr_rc=1, dl_rc=137),
    Case("restarts with log_dir and redirects",
         ["--max_restarts", "1", "--log_dir", "{LOG}", "--redirects", "3"] + W2 + ["{W}"], fail="0:1:5"),
    # --log-dir, --redirects, --tee: the files and the console.
    Case("log_dir alone", ["--log_dir", "{LOG}"] + W2 + ["{W}"]),
    Case("log_dir, redirects 3", ["--log_dir", "{LOG}", "--redirects", "3"] + W2 + ["{W}"]),
    Case("log-dir, -r 1 (stdout only)", ["--log_dir", "{LOG}", "-r", "1"] + W2 + ["{W}"],
         dl=["--log-dir", "{LOG}", "-r", "1"] + hyphens(W2) + ["{W}"]),
    Case("log_dir, redirects per rank 0:1,1:2", ["--log_dir", "{LOG}", "--redirects", "0:1,1:2"] + W2 + ["{W}"]),
    Case("log_dir, redirects 3, tee 3", ["--log_dir", "{LOG}", "--redirects", "3", "--tee", "3"] + W2 + ["{W}"]),
    Case("log_dir, rdzv_id, redirects 2", ["--log_dir", "{LOG}", "--rdzv_id", "logs-1", "--redirects", "2"]
         + W2 + ["{W}"]),
    Case("redirects 3 without log_dir", ["--redirects", "3"] + W2 + ["{W}"]),
    Case("tee 3 without log_dir", ["--tee", "3"] + W2 + ["{W}"]),
    Case("log_dir, tee 2", ["--log_dir", "{LOG}", "-t", "2"] + W2 + ["{W}"]),
    # What a mistake gets: torchrun exits 1 (2 for argparse's errors); dlaunch
    # 2 for bad input and the worker's own code otherwise (127: not found).
    Case("unknown flag", ["--no_such_flag", "1"] + W2 + ["{W}"], tr_rc=2, dl_rc=2),
    Case("nproc_per_node gpu without a GPU", ["--nproc_per_node", "gpu"] + MI + ["{W}"], tr_rc=1, dl_rc=2,
         no_gpu=True),
    Case("missing script", W2 + ["no_such_script.py"], tr_rc=1, dl_rc=2),
    Case("--no_python, command not found", W2 + ["--no_python", "no-such-command"], tr_rc=1, dl_rc=127),
    # --standalone (torchrun takes port 29400: these run one at a time).
    Case("standalone", ["--standalone"] + W2 + ["{W}"], serial=True, known=ADDRESS_NOT_NAME),
    Case("standalone, hyphens", ["--standalone", "--nnodes", "1"] + W2 + ["{W}"], serial=True,
         dl=["--standalone", "--nnodes", "1"] + hyphens(W2) + ["{W}"], known=ADDRESS_NOT_NAME),
    # Two nodes on this machine: static, from flags and from PET_*, and elastic.
    Case("static two nodes", ["--nnodes", "2", "--node_rank", "{N}", "--master_addr", "127.0.0.1",
                              "--master_port", "{P}"] + W2 + ["{W}"], nodes=2),
    Case("static two nodes, hyphens", ["--nnodes", "2", "--node_rank", "{N}", "--master_addr", "127.0.0.1",
                                       "--master_port", "{P}"] + W2 + ["{W}"], nodes=2,
         dl=["--nnodes", "2", "--node-rank", "{N}", "--master-addr", "127.0.0.1",
             "--master-port", "{P}"] + hyphens(W2) + ["{W}"]),
    Case("static two nodes from PET_", ["{W}"], nodes=2,
         env={"PET_NNODES": "2", "PET_NODE_RANK": "{N}", "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": "{P}",
              "PET_NPROC_PER_NODE": "2", "PET_MONITOR_INTERVAL": "0.1"}),
    Case("one node, c10d, rdzv_conf", ["--nnodes", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                                       "localhost:{P}", "--rdzv_conf", "join_timeout=60,read_timeout=60",
                                       "--max_restarts", "3"] + W2 + ["{W}"], known=ADDRESS_NOT_NAME),
    Case("elastic 1:2 nodes, c10d", ["--nnodes", "1:2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                                     "127.0.0.1:{P}", "--rdzv_id", "el-1"] + W2 + ["{W}"], nodes=2,
         known=ADDRESS_NOT_NAME),
    Case("elastic 2 nodes, a failure on node 1, max_restarts 1",
         ["--nnodes", "2", "--max_restarts", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:{P}",
          "--rdzv_id", "el-3"] + W2 + ["{W}"], nodes=2, fail="3:1:5", known=ADDRESS_NOT_NAME, expect_recs=job_restart_count),
    Case("elastic 2 nodes from PET_ (Kubeflow)", ["{W}"], nodes=2, known=ADDRESS_NOT_NAME,
         env={"PET_NNODES": "2", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "127.0.0.1:{P}",
              "PET_RDZV_ID": "kf-el", "PET_NPROC_PER_NODE": "2", "PET_MONITOR_INTERVAL": "0.1"}),
    Case("rdzv_endpoint without rdzv_backend", ["--nnodes", "1", "--rdzv_endpoint", "localhost:{P}"] + W2 + ["{W}"],
         known=ADDRESS_NOT_NAME),
    Case("elastic 2 nodes, c10d, hyphens", ["--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                                            "127.0.0.1:{P}", "--rdzv_id", "el-2"] + W2 + ["{W}"], nodes=2,
         dl=["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:{P}",
             "--rdzv-id", "el-2"] + hyphens(W2) + ["{W}"], known=ADDRESS_NOT_NAME),
    # python -m torch.distributed.launch (1.13: --local_rank=N after the script).
    Case("launch", W2 + ["{W}", "--lr", "1"], legacy=True,
         dl=["--legacy-launch", "--local-rank-underscore"] + W2 + ["{W}", "--lr", "1"]),
    Case("launch, torch 2 spelling --local-rank", W2 + ["{W}"], legacy=True,
         dl=["--legacy-launch"] + hyphens(W2) + ["{W}"], expect=local_rank_hyphen),
    Case("launch --use_env", ["--use_env"] + W2 + ["{W}", "a"], legacy=True,
         dl=["--legacy-launch", "--use_env"] + W2 + ["{W}", "a"]),
    Case("launch --use-env", ["--use_env"] + W2 + ["{W}"], legacy=True,
         dl=["--legacy-launch", "--use-env"] + hyphens(W2) + ["{W}"]),
    Case("launch --use_env --no_python", ["--use_env", "--no_python"] + W2 + [PY, "{W}"], legacy=True,
         dl=["--legacy-launch", "--use_env", "--no_python"] + W2 + [PY, "{W}"]),
    Case("launch -m", W2 + ["-m", "diff_worker", "a"], legacy=True,
         dl=["--legacy-launch", "--local-rank-underscore"] + W2 + ["-m", "diff_worker", "a"]),
    Case("launch --no_python without --use_env", ["--no_python"] + W2 + [PY, "{W}"], legacy=True, tr_rc=1, dl_rc=2,
         dl=["--legacy-launch", "--no_python"] + W2 + [PY, "{W}"]),
    Case("launch, two static nodes", ["--nnodes", "2", "--node_rank", "{N}", "--master_addr", "127.0.0.1",
                                      "--master_port", "{P}"] + W2 + ["{W}"], nodes=2, legacy=True,
         dl=["--legacy-launch", "--local-rank-underscore", "--nnodes", "2", "--node_rank", "{N}",
             "--master_addr", "127.0.0.1", "--master_port", "{P}"] + W2 + ["{W}"]),
]


# --- Running --------------------------------------------------------------------

_serial = threading.Lock()


def subst(args, n, port, log):
    out = []
    for a in args:
        a = a.replace("{W}", WORKER).replace("{N}", str(n)).replace("{LOG}", log)
        out.append(a.replace("{P}", str(port)))
    return out


def base_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "TORCHELASTIC_", "DLAUNCH_")) and k not in
           {"OMP_NUM_THREADS", "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "RANK",
            "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH", "PYTHON_EXEC"}}
    # Both launchers run the interpreter that has torch: torchrun honours
    # PYTHON_EXEC as dlaunch does.
    env["PYTHON_EXEC"] = PY
    env["PWD"] = WORK  # as a shell in WORK would have it
    # torchrun leaves a torchelastic_* directory in $TMPDIR after each run.
    env["TMPDIR"] = os.path.join(TMP, "tmp")
    return env


def run_launcher(case, which, tag):
    """Runs one launcher on the case's command line (each node at once);
    returns its record: exit codes, dumps, log files, console lines."""
    top = os.path.join(TMP, "runs", tag, which)
    dumps, log = os.path.join(top, "dumps"), os.path.join(top, "logs")
    os.makedirs(dumps)
    port = free_port()
    args = case.args if which == "torchrun" else case.dl
    extra_env = {}
    procs = []
    for n in range(case.nodes):
        env = base_env()
        env.update({k: v.replace("{N}", str(n)).replace("{P}", str(port)) for k, v in case.env.items()})
        env["DIFF_DUMP_DIR"] = dumps
        if case.fail:
            env["DIFF_FAIL"] = case.fail
        a = subst(args, n, port, log)
        if which == "torchrun":
            # torchrun's static rendezvous listens on --master_port, 29500 by
            # default: give each run its own, where the command line does not.
            if (not any(x.startswith(("--master_port", "--standalone", "--rdzv_backend")) for x in a)
                    and "PET_MASTER_PORT" not in env):
                env["PET_MASTER_PORT"] = str(free_port())
                extra_env["PET_MASTER_PORT"] = True
            cmd = TORCHRUN + (["--as-launch"] if case.legacy else []) + a
        else:
            cmd = [DLAUNCH] + a
        out = open(os.path.join(top, f"node{n}.out"), "w+")
        err = open(os.path.join(top, f"node{n}.err"), "w+")
        procs.append((subprocess.Popen(cmd, cwd=WORK, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=err, start_new_session=True), out, err, cmd))
    rcs, console, stderr_tails, cmds = [], [], [], []
    deadline = time.monotonic() + RUN_SECS
    for p, out, err, cmd in procs:
        try:
            p.wait(timeout=max(1, deadline - time.monotonic()))
            rcs.append(p.returncode)
        except subprocess.TimeoutExpired:
            rcs.append(f"still running after {RUN_SECS}s")
        try:
            os.killpg(p.pid, signal.SIGKILL)  # leftovers of its session
        except ProcessLookupError:
            pass
        p.wait()
        cmds.append(cmd)
        for stream, f in (("stdout", out), ("stderr", err)):
            f.seek(0)
            text = f.read()
            f.close()
            for line in text.splitlines():
                m = WORKER_LINE.match(line)
                if not m:
                    continue
                messages = WORKER_MESSAGE.findall(m.group(1))
                if which == "dlaunch" or len(messages) <= 1 or "".join(messages) != m.group(1):
                    console.append(f"{stream}: {m.group(1)}")  # a torn dlaunch line differs
                else:
                    console.extend(f"{stream}: {msg}" for msg in messages)
            if stream == "stderr":
                stderr_tails.append(text.splitlines()[-6:])
    recs = {}
    for name in sorted(os.listdir(dumps)):
        if name.endswith(".json"):
            with open(os.path.join(dumps, name)) as f:
                recs[name[:-5]] = json.load(f)
    files, run_dirs = None, None
    if os.path.isdir(log):
        files, run_dirs = {}, sorted(os.listdir(log))
        for root, _dirs, names in os.walk(log):
            for nm in names:
                rel = os.path.relpath(os.path.join(root, nm), log).split(os.sep)
                # torchrun: <run id>_<random>/...; dlaunch: <run id>/... (the run
                # id itself is random unless --rdzv-id names it).
                with open(os.path.join(root, nm), errors="replace") as f:
                    files["/".join(["RUN"] + rel[1:])] = f.read()
    return {"rcs": rcs, "recs": recs, "files": files, "run_dirs": run_dirs, "console": sorted(console), "harness": extra_env,
            "stderr": stderr_tails, "cmds": cmds, "dumps": dumps}


def norm_env(env, which, rec_harness):
    out = {}
    for k, v in env.items():
        if k in HARNESS or (which == "torchrun" and k in rec_harness):
            continue
        if which == "dlaunch" and (k in DLAUNCH_ONLY or k.startswith(DLAUNCH_ONLY_PREFIX)):
            continue
        if k == "PYTHONPATH" and which == "dlaunch":
            v = os.pathsep.join(e for e in v.split(os.pathsep) if not HOOK_ENTRY.search(e))
            if not v:
                continue
        out[k] = v
    return out


def compare(case, tr, dl):
    """Lines naming each difference between the two records."""
    probs = []
    known = case.known

    def diff(field, t, d):
        if t != d:
            probs.append(f"{field}: torchrun {t!r}, dlaunch {d!r}")

    # Exit status: torchrun's is checked first, so a broken harness is not
    # taken for a difference.
    if tr["rcs"] != [case.tr_rc] * case.nodes:
        probs.append(f"harness: torchrun exited {tr['rcs']}, expected {case.tr_rc} on each node; "
                     f"its stderr ends: {tr['stderr']}")
        return probs
    if case.expect_recs:
        tr = dict(tr, recs=case.expect_recs(tr["recs"]))
    diff("exit status", [case.dl_rc] * case.nodes, dl["rcs"])
    diff("workers (RANK.RESTART_COUNT)", sorted(tr["recs"]), sorted(dl["recs"]))
    fixed_id = case.env.get("PET_RDZV_ID")
    for i, a in enumerate(case.args):
        if a == "--rdzv_id":
            fixed_id = case.args[i + 1]
        elif a.startswith("--rdzv_id="):
            fixed_id = a.split("=", 1)[1]
    # Variables whose value names the run's own port (PET_MASTER_PORT={P}).
    per_run = {k for k, v in case.env.items() if "{P}" in v}
    for key in sorted(set(tr["recs"]) & set(dl["recs"])):
        t, d = tr["recs"][key], dl["recs"][key]
        if case.expect:
            t = case.expect(t)
        for field in ("argv", "orig_argv", "executable", "cwd", "name"):
            if field not in known:
                diff(f"rank {key}: {field}", t[field], d[field])
        te, de = norm_env(t["env"], "torchrun", tr["harness"]), norm_env(d["env"], "dlaunch", {})
        for extra, value in DLAUNCH_ONLY.items():
            if d["env"].get(extra) != value(d["env"], case.env):
                probs.append(f"rank {key}: env {extra}: dlaunch {d['env'].get(extra)!r}, "
                             f"expected {value(d['env'], case.env)!r}")
        for k in sorted(set(te) | set(de)):
            if f"env:{k}" in known:
                if known[f"env:{k}"] is not None and de.get(k) != known[f"env:{k}"]:
                    probs.append(f"rank {key}: env {k}: dlaunch {de.get(k)!r}, expected {known[f'env:{k}']!r}")
                continue
            if k in DOCUMENTED_ENV:
                if de.get(k) != DOCUMENTED_ENV[k]:
                    probs.append(f"rank {key}: env {k}: dlaunch {de.get(k)!r}, expected {DOCUMENTED_ENV[k]!r}")
            elif k not in de:
                probs.append(f"rank {key}: env {k}: torchrun {te[k]!r}, dlaunch does not set it")
            elif k not in te:
                probs.append(f"rank {key}: env {k}: dlaunch {de[k]!r}, torchrun does not set it")
            elif k in per_run or (k in IGNORED_VALUES and not (k == "TORCHELASTIC_RUN_ID" and fixed_id)):
                continue
            elif te[k] != de[k]:
                probs.append(f"rank {key}: env {k}: torchrun {te[k]!r}, dlaunch {de[k]!r}")
    # Even where its value is not compared, a run id is the job's: the same for
    # every worker on every node, in every attempt.
    ids = {w: sorted({r["env"].get("TORCHELASTIC_RUN_ID") for r in run["recs"].values()})
           for w, run in (("torchrun", tr), ("dlaunch", dl))}
    if len(ids["torchrun"]) == 1 and len(ids["dlaunch"]) > 1:
        probs.append(f"TORCHELASTIC_RUN_ID differs between dlaunch's workers: {ids['dlaunch']} "
                     f"(torchrun's workers all had {ids['torchrun'][0]!r})")
    # --log-dir: torchrun writes the streams --redirects and --tee name;
    # dlaunch every stream of every worker (docs/migration.md). Where both
    # write a file, it holds the same.
    if tr["files"] is None or dl["files"] is None:
        diff("--log-dir made", tr["files"] is not None, dl["files"] is not None)
    else:
        every = set()
        for key, rec in tr["recs"].items():
            attempt, local = key.split(".")[1], rec["env"].get("LOCAL_RANK")
            every |= {f"RUN/attempt_{attempt}/{local}/{s}.log" for s in ("stdout", "stderr")}
        if not set(tr["files"]) <= every:
            probs.append(f"harness: torchrun wrote {sorted(set(tr['files']) - every)} under --log-dir, "
                         f"beyond every worker's stdout.log and stderr.log")
        diff("files under --log-dir", sorted(every), sorted(dl["files"]))
        for name in sorted(set(tr["files"]) & set(dl["files"])):
            diff(f"--log-dir: {name}", tr["files"][name], dl["files"][name])
        if fixed_id is not None:
            # torchrun: D/<rdzv id>_<random>/; dlaunch: D/<rdzv id>/.
            if len(tr["run_dirs"]) != 1 or not tr["run_dirs"][0].startswith(fixed_id + "_"):
                probs.append(f"harness: torchrun's run directories {tr['run_dirs']}, expected {fixed_id}_*")
            diff("--log-dir: run directory", [fixed_id], dl["run_dirs"])
        else:
            diff("--log-dir: number of run directories", len(tr["run_dirs"]), len(dl["run_dirs"]))
    con_t, con_d = tr["console"], dl["console"]
    if case.expect_recs:
        # The lines name each worker's restart count, which expect_recs maps.
        con_t, con_d = (sorted(re.sub(r" attempt \d+$", "", x) for x in c) for c in (con_t, con_d))
    diff("worker lines on the console", con_t, con_d)
    return probs


def run_case(i, case):
    tag = f"case{i:02d}"
    t0 = time.monotonic()
    lock = _serial if case.serial else None
    if lock:
        lock.acquire()
    try:
        if case.serial and port_listening(29400):
            return case, ["harness: port 29400 is taken by another program; torchrun --standalone needs it"], None, 0
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            ft = ex.submit(run_launcher, case, "torchrun", tag)
            fd = ex.submit(run_launcher, case, "dlaunch", tag)
            tr, dl = ft.result(), fd.result()
    finally:
        if lock:
            lock.release()
    return case, compare(case, tr, dl), (tr, dl), time.monotonic() - t0


def main():
    cases = [c for c in CASES if not ONLY or any(s in c.name for s in ONLY)]
    if any(n.startswith("nvidia") and n[6:].isdigit() for n in os.listdir("/dev")):
        for c in cases:
            if c.no_gpu:
                print(f"left out (a GPU is visible): {c.name}")
        cases = [c for c in cases if not c.no_gpu]
    jobs = int(os.environ.get("DIFF_JOBS", "4"))
    failed, pending_failed, pending_passed = [], [], []
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        # The serial cases first, so that they do not wait at the end.
        order = sorted(enumerate(cases), key=lambda ic: not ic[1].serial)
        futs = [ex.submit(run_case, i, c) for i, c in order]
        for fut in concurrent.futures.as_completed(futs):
            case, probs, runs, secs = fut.result()
            if case.pending:
                (pending_failed if probs else pending_passed).append(case)
            if not probs:
                print(f"same: {case.name} ({secs:.1f}s)", flush=True)
                continue
            label = "DIFFERS (pending: " + case.pending + ")" if case.pending else "DIFFERS"
            print(f"{label}: {case.name} ({secs:.1f}s)", flush=True)
            if runs:
                for which, r in zip(("torchrun", "dlaunch"), runs):
                    for cmd in r["cmds"]:
                        print(f"    {which}: {' '.join(cmd)}")
            for p in probs[:12]:
                print(f"    {p}")
            if len(probs) > 12:
                print(f"    ... and {len(probs) - 12} more")
            failed.append(case)
    print(f"{len(cases)} command lines, {len(failed)} differ "
          f"({len(pending_failed)} of them pending a fix), {time.monotonic() - t0:.1f}s", flush=True)
    for c in pending_passed:
        print(f"note: pending case now passes, drop its mark: {c.name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
