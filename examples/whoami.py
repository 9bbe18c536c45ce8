"""Print what this worker was given, in one line: for trying several programs
in one job (docs/programs.md) without a training script.

    dlaunch -np 1 --role trainer -- python3 examples/whoami.py train : \
            -np 3 --role rollout -x MODE=serve -- python3 examples/whoami.py serve

Each worker prints its arguments, then RANK/WORLD_SIZE (the job's, or its own
world's under --role-restarts), its role and its place in it, LOCAL_RANK over
every group on the node, MASTER_PORT, and MODE and CUDA_VISIBLE_DEVICES when set.
"""

import os
import sys

e = os.environ
line = (
    f"{' '.join(sys.argv[1:]) or '-'}: RANK {e['RANK']}/{e['WORLD_SIZE']}"
    f" {e['ROLE_NAME']} {e['ROLE_RANK']}/{e['ROLE_WORLD_SIZE']}"
    f" LOCAL_RANK {e['LOCAL_RANK']}/{e['LOCAL_WORLD_SIZE']} MASTER_PORT {e['MASTER_PORT']}"
)
for name in ("MODE", "CUDA_VISIBLE_DEVICES"):
    if name in e:
        line += f" {name}={e[name]}"
print(line, flush=True)
