#!/usr/bin/env bash
# The whole test suite on a fresh machine: install, build, run unit and
# integration tests. `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 300 "$@"
