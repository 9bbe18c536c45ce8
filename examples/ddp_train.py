#!/usr/bin/env python3
"""A small PyTorch DDP training job over gloo (CPU) to run under dlaunch.

    dlaunch --nproc-per-node 4 -- /usr/bin/python3 examples/ddp_train.py --epochs 3
    PYTHON_EXEC=/usr/bin/python3 dlaunch --legacy-launch --nproc-per-node 2 examples/ddp_train.py

Every rank trains the same model on its own synthetic data (seeded per rank),
DDP averages the gradients, and at the end every rank checks that its
parameters are identical to everyone else's. Each rank prints
`rank R: params in sync, checksum X`; rank 0 prints a summary. The exit status
is non-zero when the parameters differ or a collective gives a wrong answer.

Each step's number goes to DLAUNCH_PROGRESS_FILE when dlaunch sets it, so
that `--max-no-progress-restarts` can tell a run that got further from one
that crashes at the same step again.
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=20, help="steps per epoch")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    # torch.distributed.launch (dlaunch --legacy-launch) appends one of these.
    # LOCAL_RANK from the environment wins when present.
    p.add_argument("--local-rank", "--local_rank", dest="local_rank", type=int, default=None)
    return p.parse_args()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(),
                                  nn.Linear(32, 1))

    def forward(self, x):
        return self.body(x)


def report_progress(step):
    """Tells dlaunch how far this rank got: a larger number is progress."""
    path = os.environ.get("DLAUNCH_PROGRESS_FILE")
    if path:
        with open(path, "w") as f:
            f.write(str(step))


def main():
    args = parse_args()
    if "LOCAL_RANK" not in os.environ and args.local_rank is not None:
        os.environ["LOCAL_RANK"] = str(args.local_rank)
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            print(f"ddp_train: {var} is not set; run me under dlaunch or torchrun", file=sys.stderr)
            return 2

    started = time.monotonic()
    dist.init_process_group(backend="gloo", init_method="env://")
    rank = dist.get_rank()
    world = dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))

    # Sanity check: the sum of all ranks.
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    expected = world * (world - 1) / 2
    if t.item() != expected:
        print(f"rank {rank}: all_reduce sum of ranks is {t.item()}, expected {expected}",
              file=sys.stderr)
        return 1

    # Same initial weights everywhere (DDP would broadcast rank 0's anyway),
    # different data per rank.
    torch.manual_seed(1234)
    model = Net()
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()
    gen = torch.Generator().manual_seed(1000 + rank)
    true_w = torch.linspace(-1.0, 1.0, 16).unsqueeze(1)

    loss = torch.tensor(0.0)
    step = 0
    for epoch in range(args.epochs):
        for _ in range(args.steps):
            x = torch.randn(args.batch_size, 16, generator=gen)
            y = x @ true_w + 0.1 * torch.randn(args.batch_size, 1, generator=gen)
            opt.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()
            opt.step()
            step += 1
            report_progress(step)
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.SUM)
        if rank == 0:
            print(f"epoch {epoch}: mean last-step loss {avg.item() / world:.5f}", flush=True)

    # Are the parameters identical on every rank? Compare max and min elementwise.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    hi = flat.clone()
    lo = flat.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    spread = (hi - lo).abs().max().item()
    checksum = f"{flat.double().sum().item():.10f}"
    in_sync = spread == 0.0

    # Every rank's verdict, so rank 0 can summarise.
    ok = torch.tensor([1 if in_sync else 0])
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if in_sync:
        print(f"rank {rank}: params in sync, checksum {checksum}", flush=True)
    else:
        print(f"rank {rank}: params OUT OF SYNC (max spread {spread}), checksum {checksum}",
              flush=True)
    if rank == 0:
        n_params = flat.numel()
        verdict = "all ranks in sync" if ok.item() == 1 else "PARAMETERS DIFFER"
        print(f"summary: world_size {world}, local_rank {local_rank}, {n_params} params, "
              f"{args.epochs} epochs x {args.steps} steps, final loss {loss.item():.5f}, "
              f"{verdict}, {time.monotonic() - started:.2f}s", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok.item() == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
