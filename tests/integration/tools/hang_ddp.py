# The hang tests' DDP job (test_hang.sh, test_hang_multinode.sh): real DDP over
# gloo in which rank 2 sleeps in load_batch() (SLEEP_S seconds) before its
# all_reduce while the others wait in it. It prints progress until the process
# group is up, then "rank R sees ..." (what the script saw of sys.argv, __main__
# and sys.path, which the hook must not change) and "rank R quiet from T" (the
# time of its last line). The tests copy it into their $TMP.
import os, select, sys, time


def start_progress():
    # Lines from a child process until the process group is up, so that only the
    # hang below is silent: `import torch` in 4 ranks on a loaded machine takes
    # longer than the tests' hang timeout, and holds the GIL while it loads
    # libtorch, which a thread's lines would wait for. Returns stop().
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        while not select.select([r], [], [], 0.5)[0]:
            print("setting up", flush=True)
        os._exit(0)
    os.close(r)

    def stop():
        os.close(w)
        os.waitpid(pid, 0)  # its last line is out

    return stop


stop_progress = start_progress()
import torch
import torch.distributed as dist


def load_batch():
    time.sleep(float(os.environ.get("SLEEP_S", "1000")))  # LOAD_BATCH_LINE


def step(rank, t):
    if rank == 2:
        load_batch()
    dist.all_reduce(t)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.barrier()
    stop_progress()
    print(f"rank {rank} sees argv={sys.argv[1:]} name={__name__} path0={sys.path[0]}", flush=True)
    print(f"rank {rank} quiet from {time.time():.3f}", flush=True)  # the last line before the hang
    step(rank, t)
    print(f"rank {rank} done {t.tolist()}", flush=True)
    # Without it gloo's threads can outlive the interpreter and the rank dies of
    # SIGABRT ("terminate called without an active exception") after its last
    # line: PyTorch's docs ask every rank to call it before it exits.
    dist.destroy_process_group()
    # The interpreter's own teardown (torch's modules) then writes nothing, and
    # on a loaded host it outlasted a 5 s hang watch: a second, true report of
    # silence after the job's last line (test_hang, CI). Nothing is left to do.
    print(f"rank {rank} left", flush=True)
    os._exit(0)


main()
