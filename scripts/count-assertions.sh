#!/usr/bin/env bash
# Counts the suite's assertions, so that a change to the suite can show it kept
# them (issue 19: "the number of assertions does not go down").
#
#   bash scripts/count-assertions.sh          the working tree
#   bash scripts/count-assertions.sh main     a commit (git grep on its tree)
#
# What counts, in lines that are not comments:
#   C++ (tests/**/*.cpp, *.hpp): each Catch2 REQUIRE*/CHECK* macro, and the fuzz
#     targets' FUZZ_CHECK;
#   shell (tests/**/*.sh): each call of lib.sh's checks (fail, fail_run,
#     expect_rc, assert_*), not their definitions.
# A check run in a loop counts once: this counts what was written, not what ran.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-}
if [[ -n $rev ]] && ! git rev-parse -q --verify "$rev^{tree}" >/dev/null; then
  echo "count-assertions: '$rev' is not a commit here" >&2
  exit 2
fi
grep_tree() {  # PATTERN PATHSPEC...: matching lines, without file names
  local pattern=$1
  shift
  if [[ -n $rev ]]; then
    git grep -h -E "$pattern" "$rev" -- "$@" || true
  else
    git grep -h --untracked -E "$pattern" -- "$@" || true
  fi
}
cpp=$(grep_tree '\b(REQUIRE|CHECK|FUZZ_CHECK)[A-Z_]*\(' 'tests/*.cpp' 'tests/*.hpp' |
  { grep -vE '^\s*//' || true; } | { grep -vE '#define' || true; } |
  { grep -oE '\b(REQUIRE|CHECK|FUZZ_CHECK)[A-Z_]*\(' || true; } | wc -l)
sh=$(grep_tree '\b(fail|fail_run|expect_rc|assert_[a-z_]+)\b' 'tests/*.sh' |
  { grep -vE '^\s*#' || true; } | { grep -vE '^\s*(fail|fail_run|expect_rc|assert_[a-z_]+)\s*\(\)' || true; } |
  { grep -oE '(^|[^a-z_$-])(fail|fail_run|expect_rc|assert_[a-z_]+)( |$)' || true; } | wc -l)
printf 'assertions%s: %d (C++ %d, shell %d)\n' "${rev:+ at $rev}" $((cpp + sh)) "$cpp" "$sh"
