#!/usr/bin/env bash
# Writes cmake/dlaunch.symbol-order: the functions dlaunch runs when it starts,
# in the order they first run, for lld's --symbol-ordering-file
# (cmake/DlaunchTextOrder.cmake). With them together at the front of the text, a
# start faults in a few 64 KiB windows of it instead of nearly all of them.
#
#   bash scripts/symbol-order.sh [PATH/TO/dlaunch [OUT]]
#                                (default: build/dlaunch, cmake/dlaunch.symbol-order)
#
# Runs callgrind (Debian's valgrind) over the starts that matter: a one-node
# job, and both ends of a two-node rendezvous on loopback (the hosting agent and
# one that joins it). A list that lags the code costs only speed: a function
# missing from it is placed after the listed ones, and a name the binary no
# longer has is ignored. Rerun it after a change to the start path, and commit
# the list. tests/integration/test_text_order.sh runs it too, and fails when the
# committed list has fallen behind.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dlaunch=${1:-$repo/build/dlaunch}
out=${2:-$repo/cmake/dlaunch.symbol-order}
[[ -x $dlaunch ]] || { echo "symbol-order: '$dlaunch' is not built" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "symbol-order: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-order-XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
traced() {  # traced NAME ARGS...: dlaunch ARGS under callgrind, its function names kept mangled
  local name=$1
  shift
  timeout 300 valgrind --tool=callgrind --demangle=no --callgrind-out-file="$tmp/$name.cg" \
    "$dlaunch" "$@" >/dev/null 2>"$tmp/$name.err" || {
    echo "symbol-order: dlaunch $* failed under callgrind: $(tail -n 3 "$tmp/$name.err")" >&2
    exit 1
  }
}
# The two rendezvous' ports: SYMBOL_ORDER_PORTS="P1 P2" where the caller draws
# them (the tests draw theirs so that tests running side by side never meet),
# else any two free ones.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
read -r -a ports <<<"${SYMBOL_ORDER_PORTS:-$(free_port) $(free_port)}"
((${#ports[@]} == 2)) || { echo "symbol-order: SYMBOL_ORDER_PORTS must be two ports, got '${SYMBOL_ORDER_PORTS}'" >&2; exit 1; }

traced local --nproc-per-node 2 -- true
for k in 0 1; do  # the hosting agent traced, then the one that joins it
  common=(--nnodes 2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:${ports[k]}" --rdzv-id order)
  "$dlaunch" "${common[@]}" --rdzv-conf "is_host=$k,join_timeout=120" -- true >/dev/null 2>&1 &
  traced "end$k" "${common[@]}" --rdzv-conf "is_host=$((1 - k)),join_timeout=120" -- true
  wait $! || { echo "symbol-order: the untraced end of the rendezvous failed" >&2; exit 1; }
done

# callgrind names a function once, as "fn=(ID) NAME" or "cfn=(ID) NAME", the
# first time it appears; keep the names of the binary's own text, first seen first.
nm "$dlaunch" | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u >"$tmp/text"
{
  echo "# The functions dlaunch's start runs, first run first: lld's --symbol-ordering-file"
  echo "# (cmake/DlaunchTextOrder.cmake). Written by scripts/symbol-order.sh; rerun it after"
  echo "# a change to the start path."
  cat "$tmp/local.cg" "$tmp/end0.cg" "$tmp/end1.cg" |
    sed -nE 's/^c?fn=\([0-9]+\) (.+)$/\1/p' |
    awk -v text="$tmp/text" 'BEGIN {while ((getline s < text) > 0) keep[s] = 1} keep[$0] && !seen[$0]++'
} >"$out"
echo "symbol-order: $(grep -vc '^#' "$out") functions in $out"
