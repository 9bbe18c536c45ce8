#!/usr/bin/env bash
# pytest.sh FILE...: runs pytest on the Python tests named (the stack hook's,
# tests/launcher/stacks/stack_hook_test.py) with Debian's Python, where
# scripts/install-deps.sh installs python3-pytest; the tests start whatever
# other interpreters they cover themselves. Exits 77 (ctest: skipped), saying
# why, where that Python or its pytest is missing. DLAUNCH_PYTEST_PYTHON picks
# another Python to run pytest.
py=${DLAUNCH_PYTEST_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import pytest' 2>/dev/null; then
  echo "skipped: $py cannot import pytest (Debian's python3-pytest; scripts/install-deps.sh installs it)"
  exit 77
fi
# No bytecode or cache written into the source tree.
PYTHONDONTWRITEBYTECODE=1 exec "$py" -m pytest -q -rs -p no:cacheprovider "$@"
