# A training loop without PyTorch for the straggler tests: the ranks (RANK,
# WORLD_SIZE) meet at a barrier of files in DIR (argv[1]) after every step, as
# a collective would make them. Standard library only, so that any Python runs
# it. Rank STRAGGLER_SLOW_RANKS (e.g. "1") spends STRAGGLER_SLOW_S (0.2) more
# each step in read_shard(); every rank spends 0.01 s there and 0.06 s in
# compute(). Runs STRAGGLER_STEPS steps (default: until SIGTERM).
import os
import sys
import time

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
DIR = sys.argv[1]
SLOW = {int(r) for r in os.environ.get("STRAGGLER_SLOW_RANKS", "").split(",") if r.strip()}
SLOW_S = float(os.environ.get("STRAGGLER_SLOW_S", "0.2")) if RANK in SLOW else 0.0
STEPS = int(os.environ.get("STRAGGLER_STEPS", "0"))


def read_shard():
    time.sleep(0.01 + SLOW_S)


def compute():
    time.sleep(0.06)


def reached(rank):
    try:
        with open(os.path.join(DIR, "rank%d" % rank)) as f:
            return int(f.read() or -1)
    except (OSError, ValueError):
        return -1


def barrier(step):
    # Named as the collectives are, so that dlaunch counts the time here as
    # waiting for the other ranks (launcher/straggler/detector.hpp).
    tmp = os.path.join(DIR, "rank%d.tmp" % RANK)
    with open(tmp, "w") as f:
        f.write(str(step))
    os.replace(tmp, os.path.join(DIR, "rank%d" % RANK))
    while any(reached(r) < step for r in range(WORLD) if r != RANK):
        time.sleep(0.005)


step = 0
while not STEPS or step < STEPS:
    read_shard()
    compute()
    barrier(step)
    step += 1
print("rank %d done after %d steps" % (RANK, step), flush=True)
