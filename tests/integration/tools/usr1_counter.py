# A worker that counts the SIGUSR1s it gets: test_signals.sh and test_slurm.sh
# check that each worker gets a passed-on signal exactly once.
#
#   usr1_counter.py DIR [WAIT_S]
#
# Writes DIR/ready.RANK (holding its parent's pid, the launcher that started
# it) once its handler is in place, waits up to WAIT_S (default 60) s for a
# first SIGUSR1, so that a count of 0 is written inside the caller's bound, then
# 1.5 s more for a duplicate, and writes how many came to DIR/count.RANK.
import os
import signal
import sys
import time

out, rank = sys.argv[1], os.environ["RANK"]
wait_s = float(sys.argv[2]) if len(sys.argv) > 2 else 60
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
with open(f"{out}/ready.{rank}.tmp", "w") as f:
    f.write(str(os.getppid()))
os.rename(f"{out}/ready.{rank}.tmp", f"{out}/ready.{rank}")
deadline = time.monotonic() + wait_s
while not got and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(1.5)  # room for a duplicate
with open(f"{out}/count.{rank}", "w") as f:
    f.write(str(len(got)))
