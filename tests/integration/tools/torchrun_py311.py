"""Debian's torchrun (python3-torch 1.13) on Python 3.11, for test_torchrun_diff.sh.

    /usr/bin/python3 torchrun_py311.py [TORCHRUN ARGS...]
    /usr/bin/python3 torchrun_py311.py --as-launch [torch.distributed.launch ARGS...]

That torchrun fails at start-up on Python 3.11 with
    AttributeError: 'NoneType' object has no attribute 'get'
because Std.from_str iterates an IntFlag, which on 3.11 skips the 0 and
multi-bit members. This replaces Std.from_str and runs the unchanged main of
torch.distributed.run (torchrun), or of torch.distributed.launch.
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api

Std = api.Std


def _from_str(vm):
    if re.fullmatch(r"\d", vm):
        return Std(int(vm))
    return {int(i): Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}


Std.from_str = staticmethod(_from_str)

# The guard matters: --run_path starts workers with multiprocessing's spawn,
# which runs this file again in each child.
if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--as-launch":
        del sys.argv[1]
        from torch.distributed.launch import main
    else:
        from torch.distributed.run import main
    sys.exit(main())
