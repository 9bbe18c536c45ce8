"""A worker of tests/gpu/groups_check.sh: the trainer all-reduces over NCCL
on its GPU, the rollout over gloo on the CPU, each in its own world; rollout
rank 1 fails once so that its role restarts alone."""
import os
import sys
import time

import torch
import torch.distributed as dist

role = os.environ["ROLE_NAME"]
rank = int(os.environ["RANK"])
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
nccl = role == "trainer"
if nccl:
    torch.cuda.set_device(0)  # its one visible GPU (--gpus), whatever LOCAL_RANK says
dist.init_process_group("nccl" if nccl else "gloo")
device = "cuda" if nccl else "cpu"
print(f"{role} start rank={rank} world={dist.get_world_size()} pid={os.getpid()} restart={restart} "
      f"local_rank={os.environ['LOCAL_RANK']} cvd={os.environ.get('CUDA_VISIBLE_DEVICES')} "
      f"port={os.environ['MASTER_PORT']}", flush=True)
t = torch.ones(1, device=device) * (rank + 1)
dist.all_reduce(t)
if role == "rollout" and rank == 1 and restart == 0:
    print(f"rollout rank 1 fails on purpose (sum {t.item()})", flush=True)
    sys.exit(3)
steps = 40 if nccl else 1
for _ in range(steps):  # the trainer outlives the rollout's restart
    dist.all_reduce(t)
    time.sleep(0.1)
if nccl:
    torch.cuda.synchronize()
print(f"{role} done rank={rank} pid={os.getpid()} sum={t.item()}", flush=True)
dist.destroy_process_group()
