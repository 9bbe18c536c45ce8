"""A worker for test_torchrun_diff.sh: writes what it sees to a JSON file.

$DIFF_DUMP_DIR/<RANK>.<TORCHELASTIC_RESTART_COUNT>.json gets its environment,
argv (sys.argv and the interpreter's own, sys.orig_argv), working directory,
interpreter and __name__. One line goes to stdout and one to stderr, for the
--log-dir, --redirects and --tee comparisons.

$DIFF_FAIL="RANK:ATTEMPTS:CODE" makes it fail: in the attempts (restart counts)
below ATTEMPTS, rank RANK exits CODE once every rank of its attempt has
written its file (CODE -N: it kills itself with signal N), and the other
ranks wait to be stopped; from attempt ATTEMPTS on, and in a second start
with the same restart count, every rank exits 0. So each run's set of files
does not depend on timing.
"""
import json
import os
import sys
import time

env = dict(os.environ)
out_dir = env["DIFF_DUMP_DIR"]
rank = env.get("RANK", "none")
attempt = env.get("TORCHELASTIC_RESTART_COUNT", "none")
rec = {
    "env": env,
    "argv": sys.argv,
    "orig_argv": getattr(sys, "orig_argv", None),
    "cwd": os.getcwd(),
    "executable": sys.executable,
    "name": __name__,
}
# The lines first: a rank that fails waits for every rank's file, and then
# each has written its lines whole before it is stopped.
print(f"stdout of rank {rank} attempt {attempt}", flush=True)
print(f"stderr of rank {rank} attempt {attempt}", file=sys.stderr, flush=True)
# A rank can start twice with one restart count (torchrun restarts a healthy
# node's workers without counting it when another node fails): .again, .again2.
path = os.path.join(out_dir, f"{rank}.{attempt}.json")
again = 1
while os.path.exists(path):
    path = os.path.join(out_dir, f"{rank}.{attempt}.again{again if again > 1 else ''}.json")
    again += 1
with open(path + ".tmp", "w") as f:
    json.dump(rec, f)
os.replace(path + ".tmp", path)

plan = env.get("DIFF_FAIL")
if plan:
    fail_rank, attempts, code = plan.split(":")
    if attempt.isdigit() and int(attempt) < int(attempts) and again == 1:
        if rank == fail_rank:
            world = int(env.get("WORLD_SIZE", "1"))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                done = [n for n in os.listdir(out_dir) if n.endswith(f".{attempt}.json")]
                if len(done) >= world:
                    break
                time.sleep(0.02)
            if int(code) < 0:
                os.kill(os.getpid(), -int(code))  # killed by that signal
                time.sleep(60)
            sys.exit(int(code))
        time.sleep(60)
