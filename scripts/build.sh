#!/usr/bin/env bash
# Configures and builds dlaunch and its tests into build/ (or $BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cmake-env.sh
source scripts/cmake-env.sh
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" "$@"
