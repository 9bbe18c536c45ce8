# The status tests' worker (test_status.sh, test_status_multinode.sh): prints a
# tick every 0.2 s for RUN_S seconds (default 8), or until the file STOP_FILE
# exists (the test is done with the job), sleeping in wait_here() between them,
# so that a stack shows that function, then "rank R done". The tests copy it
# into their $TMP.
import os, time


def wait_here(n):
    time.sleep(0.2)  # WAIT_LINE


def main():
    rank = os.environ["RANK"]
    end = time.monotonic() + float(os.environ.get("RUN_S", "8"))
    stop = os.environ.get("STOP_FILE", "")
    n = 0
    while time.monotonic() < end and not (stop and os.path.exists(stop)):
        print(f"rank {rank} tick {n}", flush=True)
        n += 1
        wait_here(n)
    print(f"rank {rank} done", flush=True)


main()
