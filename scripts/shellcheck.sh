#!/usr/bin/env bash
# Lints every shell script under scripts/ and tests/ with shellcheck;
# .shellcheckrc says which rules are off and why. Exit 0 when clean, 1 with
# the findings, 77 when shellcheck is not installed (scripts/install-deps.sh
# installs it).
#
#   bash scripts/shellcheck.sh [SRC_DIR]
#
# The integration tests are read without following lib.sh (-x would analyse
# its 500 lines again for each of them, ten times the whole run's cost); lib.sh
# is checked on its own, and the variables a test sets for it (RC, OUT, ERR,
# ELAPSED) are marked where they are set.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
command -v shellcheck >/dev/null || { echo "shellcheck: not installed (apt-get install shellcheck)" >&2; exit 77; }
mapfile -t tests < <(find tests/integration -name 'test_*.sh' -type f | sort)
mapfile -t others < <(find scripts tests -name '*.sh' -type f ! -path 'tests/integration/test_*.sh' | sort)
((${#tests[@]} > 0 && ${#others[@]} > 0)) || { echo "shellcheck: no scripts found under $PWD" >&2; exit 1; }
rc=0
printf '%s\0' "${tests[@]}" | xargs -0 -P "$(nproc)" -n 20 shellcheck -e SC1091 -f gcc || rc=1
printf '%s\0' "${others[@]}" | xargs -0 -P "$(nproc)" -n 10 shellcheck -x -f gcc || rc=1
exit "$rc"
