#!/usr/bin/env bash
# The longest functions of the libraries (envmap/, rendezvous/, launcher/), for
# the reshape's rule that functions stay under about 80 lines (issue 20).
#
#   bash scripts/longest-functions.sh [COMMIT] [N]    N longest (default 15)
#
# A function's length is its lines from the signature to the closing brace, as
# Universal Ctags reports them (package universal-ctags); lambdas count within
# the function that holds them. With COMMIT, the tree of that commit is read.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-}
n=${2:-15}
command -v ctags >/dev/null && ctags --version 2>/dev/null | grep -q 'Universal Ctags' ||
  { echo "longest-functions: needs Universal Ctags (apt-get install universal-ctags)" >&2; exit 2; }
tree=.
if [[ -n $rev ]]; then
  git rev-parse -q --verify "$rev^{tree}" >/dev/null || { echo "longest-functions: '$rev' is not a commit here" >&2; exit 2; }
  tree=$(mktemp -d)
  trap 'rm -rf "$tree"' EXIT
  git archive "$rev" envmap rendezvous launcher | tar -x -C "$tree"
fi
cd "$tree"
find envmap rendezvous launcher -name '*.cpp' -o -name '*.hpp' | sort |
  ctags -L - --c++-kinds=f --fields=+ne --extras=+q -o - 2>/dev/null |
  awk -F'\t' '{
    line = ""; end = ""; scope = ""
    for (i = 4; i <= NF; ++i) {
      if ($i ~ /^line:/) line = substr($i, 6)
      else if ($i ~ /^end:/) end = substr($i, 5)
      else if ($i ~ /^(class|struct):/) scope = substr($i, index($i, ":") + 1)
    }
    if (line == "" || end == "" || $1 ~ /::/) next   # one row per function: the unqualified tag
    name = scope != "" ? scope "::" $1 : $1
    gsub(/dlaunch::(launcher|rendezvous|envmap)::|__anon[0-9a-f]+::/, "", name)
    printf "%5d  %s  %s:%s\n", end - line + 1, name, $2, line
  }' | sort -k1,1nr -k3 | head -n "$n"
