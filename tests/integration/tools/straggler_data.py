# The data side of straggler_train.py, in a module of its own so that a rank
# slow to load its batches shows as "straggler_data.py:LINE load_batch".
import os
import time

import torch

# Every rank reads its batch for IO_S seconds: the same on all of them, so a
# clean run has a share in load_batch that no rank stands out in.
IO_S = float(os.environ.get("STRAGGLER_IO_S", "0.01"))
# Rounds of CPU work each rank does on every batch (a decode, an augmentation):
# none by default. A fixed amount of work, not of time, so that a rank on a
# busier CPU takes longer over it.
AUGMENT = int(os.environ.get("STRAGGLER_AUGMENT", "0"))


def augment(x, rounds):
    m = torch.eye(x.shape[1]) + 1e-3
    for _ in range(rounds):
        x = torch.tanh(x @ m)
    return x


def load_batch(rank, step, slow_s):
    """A batch of 32 samples of 64 features and their 10-way labels. A rank in
    STRAGGLER_SLOW_RANKS with STRAGGLER_SLOW_WHERE=data waits slow_s more: a
    slow disk or a remote store."""
    time.sleep(IO_S + slow_s)
    g = torch.Generator().manual_seed(rank * 100003 + step)
    x = torch.randn(32, 64, generator=g)
    if AUGMENT:
        x = augment(x, AUGMENT)
    y = torch.randint(0, 10, (32,), generator=g)
    return x, y
