#!/usr/bin/env bash
# The direction of the source tree's arrows (issue 10), and no std::regex (issue
# 18). Each folder may include only what is listed for it; the build's test `layering` runs this on the tree,
# and once on a copy with an arrow planted the wrong way, which must be refused.
#
#   tests/layering/check.sh SOURCE_ROOT          exit 0, or 1 naming each bad include
#   tests/layering/check.sh --self-test SOURCE_ROOT
set -u

# folder -> folders it may include (besides itself)
declare -A MAY=(
  [envmap]=""
  [rendezvous]="envmap"
  [launcher/core]="envmap"
  [launcher/config]="envmap rendezvous launcher/core"
  [launcher/watchdog]="envmap"
  [launcher/process]="envmap rendezvous launcher/core launcher/watchdog"
  [launcher/http]="envmap rendezvous launcher/core"
  [launcher/jobwide]="envmap rendezvous launcher/core launcher/process launcher/http"
  [launcher/modes]="envmap rendezvous launcher/core launcher/config launcher/process launcher/http launcher/jobwide"
)
# The command line's flag struct is read by config/ (Decide) and main.cpp only;
# the modes take a Plan. A file elsewhere that includes it is refused.
FLAG_STRUCT=launcher/config/cli.hpp
FLAG_READERS_LEFT=()

check() {
  local root=$1 bad=0 file dir inc target allowed ok f
  cd "$root" || { echo "layering: cannot enter $root" >&2; return 2; }
  for f in launcher/*.cpp launcher/*.hpp; do
    [[ -e $f && $f != launcher/main.cpp ]] || continue
    echo "$f: launcher/ holds only main.cpp and the layer folders"
    bad=1
  done
  while IFS= read -r file; do
    dir=$(dirname "$file")
    case $dir in
      launcher/core* | launcher/config* | launcher/watchdog* | launcher/process* | launcher/http* | launcher/jobwide* | launcher/modes*) dir=${dir%%/*}/$(cut -d/ -f2 <<<"$dir") ;;
      launcher | launcher/mpi_bootstrap | launcher/docgen) continue ;;  # main.cpp and the helpers wire everything
      envmap* | rendezvous*) dir=${dir%%/*} ;;
      *) continue ;;
    esac
    [[ -v MAY[$dir] ]] || { echo "$file: folder $dir has no entry in tests/layering/check.sh"; bad=1; continue; }
    while IFS= read -r inc; do
      target=$(dirname "$inc")
      [[ $target == launcher/* ]] && target=launcher/$(cut -d/ -f2 <<<"$target")
      [[ $target == "$dir" ]] && continue
      ok=0
      for allowed in ${MAY[$dir]}; do [[ $target == "$allowed" ]] && ok=1; done
      if ((!ok)); then
        echo "$file: includes $inc, but $dir may include only: ${MAY[$dir]:-nothing of the project}"
        bad=1
      fi
      if [[ $inc == "$FLAG_STRUCT" && $dir != launcher/config ]]; then
        local listed=0
        for f in "${FLAG_READERS_LEFT[@]}"; do [[ $f == "$file" ]] && listed=1; done
        if ((!listed)); then
          echo "$file: includes the flag struct ($FLAG_STRUCT); a mode takes the Plan, only config/ and main.cpp read flags"
          bad=1
        fi
      fi
    done < <(sed -nE 's/^#include "((envmap|rendezvous|launcher)\/[^"]+)".*/\1/p' "$file")
  done < <(find envmap rendezvous launcher -name '*.cpp' -o -name '*.hpp' | sort)
  # tests/ mirrors the source folders: a unit test sits under tests/ at the path
  # of the folder it tests (tests/launcher/process/ for launcher/process/).
  while IFS= read -r file; do
    dir=$(dirname "${file#tests/}")
    [[ -d $dir ]] || { echo "$file: tests/ mirrors the source folders, and there is no $dir/"; bad=1; }
  done < <(find tests -name '*_test.cpp' 2>/dev/null | sort)
  # The event loop's rule (launcher/core/event_loop.hpp): only event_loop.cpp
  # runs an io_context; everything else arms handlers and returns.
  local hit
  while IFS= read -r hit; do
    echo "${hit%%:*}: runs an io_context (${hit#*:}); only launcher/core/event_loop.cpp may (event_loop.hpp)"
    bad=1
  done < <(grep -rnE '(^|[^A-Za-z0-9_])(io_?|io\(\))\.(run|run_one|run_for|run_until|poll|poll_one)\(' \
    --include='*.cpp' --include='*.hpp' envmap rendezvous launcher | sed -E 's/^([^:]+):([0-9]+):[[:space:]]*/\1:\2: /' |
    grep -v '^launcher/core/event_loop\.cpp:' | sort)
  # No std::regex in the libraries: what they read comes from workers and peers
  # (stacks, frames, logs), and std::regex backtracks and recurses once per
  # character, so a long line crashes dlaunch (issue 18). Scan by hand.
  while IFS= read -r hit; do
    echo "${hit%%:*}: uses std::regex (${hit#*:}); envmap/, rendezvous/ and launcher/ scan text by hand (issue 18)"
    bad=1
  done < <(grep -rnE '<regex>|std::(w?regex|regex_[a-z]+|[wsc]*match|sregex_iterator)\b' \
    --include='*.cpp' --include='*.hpp' envmap rendezvous launcher | sed -E 's/^([^:]+):([0-9]+):[[:space:]]*/\1:\2: /' |
    grep -vE '^[^:]+:[0-9]+: //' | sort)  # comments may name it
  return "$bad"
}

if [[ ${1:-} == --self-test ]]; then
  root=${2:?usage: check.sh --self-test SOURCE_ROOT}
  tmp=$(mktemp -d) || exit 2
  trap 'rm -rf "$tmp"' EXIT
  cp -r "$root/envmap" "$root/rendezvous" "$root/launcher" "$tmp/"
  mkdir -p "$tmp/tests/launcher/process" "$tmp/tests/launcher/things"
  touch "$tmp/tests/launcher/process/runner_test.cpp" "$tmp/tests/launcher/things/runner_test.cpp"
  # The planted arrows: core reaching up into process, and a process file
  # reading the flag struct.
  echo '#include "launcher/process/runner.hpp"' >>"$tmp/launcher/core/text.cpp"
  echo '#include "launcher/config/cli.hpp"' >>"$tmp/launcher/process/summary.cpp"
  # ... and a mode running the loop itself.
  echo 'void Planted(boost::asio::io_context& io) { io.run_one(); }' >>"$tmp/launcher/modes/remote.cpp"
  # ... and a test in a folder that mirrors nothing (tests/launcher/things/ above).
  # ... and a regex over a worker's text.
  echo '#include <regex>' >>"$tmp/rendezvous/codec.cpp"
  out=$(check "$tmp")
  rc=$?
  expect1="launcher/core/text.cpp: includes launcher/process/runner.hpp, but launcher/core may include only: envmap"
  expect2="launcher/process/summary.cpp: includes launcher/config/cli.hpp, but launcher/process may include only: envmap rendezvous launcher/core launcher/watchdog"
  expect3="launcher/modes/remote.cpp: runs an io_context ($(wc -l <"$tmp/launcher/modes/remote.cpp"): void Planted(boost::asio::io_context& io) { io.run_one(); }); only launcher/core/event_loop.cpp may (event_loop.hpp)"
  expect5="tests/launcher/things/runner_test.cpp: tests/ mirrors the source folders, and there is no launcher/things/"
  expect4="rendezvous/codec.cpp: uses std::regex ($(wc -l <"$tmp/rendezvous/codec.cpp"): #include <regex>); envmap/, rendezvous/ and launcher/ scan text by hand (issue 18)"
  if ((rc != 1)) || ! grep -qxF "$expect1" <<<"$out" || ! grep -qxF "$expect2" <<<"$out" ||
    ! grep -qxF "$expect3" <<<"$out" || ! grep -qxF "$expect4" <<<"$out" || ! grep -qxF "$expect5" <<<"$out"; then
    echo "layering self-test: the planted includes were not refused as expected (rc $rc):"
    echo "$out"
    exit 1
  fi
  [[ $(wc -l <<<"$out") -eq 6 ]] || { echo "layering self-test: more refused than planted:"; echo "$out"; exit 1; }
  echo "layering self-test: the planted arrows, loop runner, regex and misplaced test refused"
  exit 0
fi
check "${1:?usage: check.sh SOURCE_ROOT}"
