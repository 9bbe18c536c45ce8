# A small DDP training job over gloo (CPU) for the straggler tests
# (tests/integration/test_straggler.sh, bench/straggler.sh). It knows nothing of
# dlaunch: it reads only what torchrun gives a worker (RANK, WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT), so that what dlaunch reports of it is what it
# would report of any training script. Run it with Debian's /usr/bin/python3.
#
# Test variables (all optional):
#   STRAGGLER_SLOW_RANKS   ranks that are slow: "2" or "2,3" (none by default)
#   STRAGGLER_SLOW_WHERE   where they lose the time: "data" (in
#                          straggler_data.py's load_batch, the default) or
#                          "forward" (in Net.forward below)
#   STRAGGLER_SLOW_S       seconds they lose each step (default 0.2)
#   STRAGGLER_IO_S         seconds every rank spends loading a batch (0.01)
#   STRAGGLER_DEVICE_S     seconds every rank waits for its device each step,
#                          in wait_for_device() (0.07)
#   STRAGGLER_CHATTY_RANK0 "1": every 10 steps rank 0 prints a line and saves
#                          a checkpoint (torch.save of the model to a file in
#                          TMPDIR), as a rank 0 that logs and checkpoints does
#   STRAGGLER_AUGMENT      rounds of CPU work on every batch, about 50 us each,
#                          in straggler_data.py's augment (default 0)
#   STRAGGLER_STEPS        steps to run, then exit 0 (default: until SIGTERM)
# A clean step takes about 85 ms, most of it waiting for the "device": the
# job stands for a GPU job, whose main thread spends most of a step waiting
# for kernels, in one place on every rank and apart from the data loading and
# the model's forward, where the slow ranks lose their time. Then the
# gradients' all_reduce (in backward), where the ranks meet. The model is tiny
# and the waits are sleeps so that 4 ranks on 2 busy cores hardly wait for
# each other's CPU: with CPU work in every step they waited a fifth of it at
# random, and a clean run is meant to have no contention to find.
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from straggler_data import load_batch  # noqa: E402

RANK = int(os.environ["RANK"])
SLOW_RANKS = {int(r) for r in os.environ.get("STRAGGLER_SLOW_RANKS", "").split(",") if r.strip()}
SLOW_WHERE = os.environ.get("STRAGGLER_SLOW_WHERE", "data")
SLOW_S = float(os.environ.get("STRAGGLER_SLOW_S", "0.2")) if RANK in SLOW_RANKS else 0.0
CHATTY = os.environ.get("STRAGGLER_CHATTY_RANK0") == "1" and RANK == 0
STEPS = int(os.environ.get("STRAGGLER_STEPS", "0"))
DEVICE_S = float(os.environ.get("STRAGGLER_DEVICE_S", "0.07"))
if SLOW_WHERE not in ("data", "forward"):
    sys.exit(f"STRAGGLER_SLOW_WHERE: expected 'data' or 'forward', got '{SLOW_WHERE}'")


class Net(torch.nn.Module):
    def __init__(self, slow_s):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
        self.slow_s = slow_s

    def forward(self, x):
        if self.slow_s:
            time.sleep(self.slow_s)  # a slow layer: another kernel, a throttled core
        return self.body(x)


def wait_for_device():
    time.sleep(DEVICE_S)  # what a GPU job's loss.item() waits for


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()  # DDP's all_reduce of the gradients: where the ranks wait for each other
    opt.step()
    wait_for_device()
    return loss


def checkpoint(model, step, loss):
    print(f"step {step} loss {loss.item():.4f}", flush=True)
    fd, path = tempfile.mkstemp(prefix="straggler-ckpt-", suffix=".pt")
    with os.fdopen(fd, "wb") as f:
        torch.save(model.state_dict(), f)
    os.unlink(path)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo")
    model = DDP(Net(SLOW_S if SLOW_WHERE == "forward" else 0.0))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data_slow_s = SLOW_S if SLOW_WHERE == "data" else 0.0
    print(f"rank {RANK} of {dist.get_world_size()} training", flush=True)
    step = 0
    while not STEPS or step < STEPS:
        x, y = load_batch(RANK, step, data_slow_s)
        loss = train_step(model, opt, x, y)
        step += 1
        if CHATTY and step % 10 == 0:
            checkpoint(model, step, loss)
    print(f"rank {RANK} done after {step} steps", flush=True)
    # Every rank calls it before it exits, as PyTorch's docs ask (gloo's threads
    # could otherwise abort the interpreter at exit); nothing is left to do then.
    dist.destroy_process_group()
    os._exit(0)


main()
