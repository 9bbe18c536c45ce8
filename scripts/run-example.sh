#!/usr/bin/env bash
# The main job on a fresh machine: install, build, then train the DDP example on
# 4 local ranks over gloo with dlaunch.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh example
bash scripts/build.sh --target dlaunch
exec "${BUILD_DIR:-build}/dlaunch" --nproc-per-node 4 -- /usr/bin/python3 examples/ddp_train.py --epochs 3 "$@"
