# The metrics tests' worker (test_metrics_*.sh): ticks every 0.2 s until
# $CTL/stop exists. While $CTL/hang exists (and $CTL/unhang does not) it
# prints nothing: a hang. Once $CTL/fail exists, rank 3 of the first
# generation exits 3 (a failure that --max-restarts restarts).
import os
import sys
import time

rank = int(os.environ["RANK"])
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
ctl = os.environ["CTL"]
n = 0
while not os.path.exists(f"{ctl}/stop"):
    if rank == 3 and restart == 0 and os.path.exists(f"{ctl}/fail"):
        print("rank 3 fails", flush=True)
        sys.exit(3)
    if not os.path.exists(f"{ctl}/hang") or os.path.exists(f"{ctl}/unhang"):
        print(f"rank {rank} tick {n}", flush=True)
        n += 1
    time.sleep(0.2)
print(f"rank {rank} done", flush=True)
