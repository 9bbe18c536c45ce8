#!/usr/bin/env bash
# Checks that the C++ under version control is laid out as .clang-format says.
# Exit 0 when it is, 1 naming the files that are not, 77 when clang-format is
# not installed (scripts/install-deps.sh installs it).
#
#   bash scripts/clang-format.sh [SRC_DIR]          check (the quick tier's lint)
#   bash scripts/clang-format.sh --fix [SRC_DIR]    rewrite the files in place
#
# A commit that only reformats goes into .git-blame-ignore-revs, so that
# `git blame` skips it (git config blame.ignoreRevsFile .git-blame-ignore-revs).
set -euo pipefail
fix=0
if [[ ${1:-} == --fix ]]; then fix=1; shift; fi
cd "${1:-$(dirname "$0")/..}"
command -v clang-format >/dev/null || { echo "clang-format: not installed (apt-get install clang-format)" >&2; exit 77; }
# git ls-files where this is a clone; a source tarball has no .git, so find.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cpp' '*.hpp')
else
  mapfile -t files < <(find . -path ./build -prune -o -type f \( -name '*.cpp' -o -name '*.hpp' \) -print | sed 's|^\./||' | sort)
fi
((${#files[@]} > 0)) || { echo "clang-format: no C++ files found under $PWD" >&2; exit 1; }
if ((fix)); then
  printf '%s\0' "${files[@]}" | xargs -0 -P "$(nproc)" -n 20 clang-format -i
  exit 0
fi
# --dry-run -Werror prints each misplaced line as "FILE:LINE:COL: error: ..."
# and fails; one line a file is enough to say which to fix.
out=$(printf '%s\0' "${files[@]}" | xargs -0 -P "$(nproc)" -n 20 clang-format --dry-run -Werror 2>&1) && exit 0
bad=$(sed -nE 's/^([^ :]+\.[ch]pp):[0-9]+:[0-9]+: .*/\1/p' <<<"$out" | sort -u)
if [[ -z $bad ]]; then
  echo "clang-format: failed: $out" >&2
  exit 1
fi
sed 's/$/: not laid out as .clang-format says (bash scripts\/clang-format.sh --fix)/' <<<"$bad" >&2
exit 1
