# The hang tests' DDP job (test_hang.sh, test_hang_multinode.sh): real DDP over
# gloo in which rank 2 sleeps in load_batch() (SLEEP_S seconds) before its
# all_reduce while the others wait in it. It prints progress until the process
# group is up, then "rank R sees ..." (what the script saw of sys.argv, __main__
# and sys.path, which the hook must not change) and "rank R quiet from T" (the
# time of its last line). The tests copy it into their $TMP.
import os, sys, threading, time
import torch
import torch.distributed as dist


def setup_progress(done):
    # Lines while the process group forms: only the hang below is silent.
    while not done.wait(0.5):
        print("setting up", flush=True)


def load_batch():
    time.sleep(float(os.environ.get("SLEEP_S", "1000")))  # LOAD_BATCH_LINE


def step(rank, t):
    if rank == 2:
        load_batch()
    dist.all_reduce(t)


def main():
    done = threading.Event()
    threading.Thread(target=setup_progress, args=(done,), daemon=True).start()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.barrier()
    done.set()
    print(f"rank {rank} sees argv={sys.argv[1:]} name={__name__} path0={sys.path[0]}", flush=True)
    time.sleep(0.6)  # the progress thread's last line is out
    print(f"rank {rank} quiet from {time.time():.3f}", flush=True)  # the last line before the hang
    step(rank, t)
    print(f"rank {rank} done {t.tolist()}", flush=True)


main()
