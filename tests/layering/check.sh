#!/usr/bin/env bash
# The direction of the source tree's arrows (issue 10), and no std::regex (issue
# 18). Each folder, and the unit tests under tests/ at its path, may include only
# the folders cmake/layers.txt lists for it (the table the build links the layers
# from); the build's test `layering` runs this on the tree, and once on a copy
# with an arrow planted the wrong way, which must be refused.
#
#   tests/layering/check.sh SOURCE_ROOT          exit 0, or 1 naming each bad include
#   tests/layering/check.sh --self-test SOURCE_ROOT
set -u

# folder -> folders it may include (besides itself): cmake/layers.txt, the table
# the build links the layers' libraries from.
declare -A MAY=()
LAYERS=()  # the folders, longest first, to find the one a path is in
read_layers() {
  local table=$1/cmake/layers.txt line folder
  [[ -r $table ]] || { echo "layering: cannot read $table" >&2; exit 2; }
  while IFS= read -r line; do
    [[ $line =~ ^[a-z_/]+: ]] || continue
    folder=${line%%:*}
    MAY[$folder]=$(xargs <<<"${line#*:}")
    LAYERS+=("$folder")
  done <"$table"
  mapfile -t LAYERS < <(printf '%s\n' "${LAYERS[@]}" | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-)
}
# layer_of PATH: the layer folder PATH is in, or nothing.
layer_of() {
  local l
  for l in "${LAYERS[@]}"; do
    [[ $1 == "$l" || $1 == "$l"/* ]] && { echo "$l"; return; }
  done
}
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
      # main.cpp and the helpers wire everything; static_names/ is linked into the static-pie dlaunch alone
      launcher | launcher/mpi_bootstrap | launcher/docgen | launcher/static_names) continue ;;
    esac
    if [[ $file == tests/* ]]; then
      # A layer's unit tests may use what the layer may (their program links no more).
      dir=$(layer_of "${dir#tests/}")
      [[ -n $dir ]] || continue  # tests/fuzz/, tests/sanitizers/, tests/integration/: not a layer's
    else
      dir=$(layer_of "$dir")
      [[ -n $dir ]] || { echo "$file: its folder has no line in cmake/layers.txt"; bad=1; continue; }
    fi
    while IFS= read -r inc; do
      target=$(layer_of "$(dirname "$inc")")
      [[ -n $target ]] || target=$(dirname "$inc")
      [[ $target == "$dir" ]] && continue
      ok=0
      for allowed in ${MAY[$dir]}; do [[ $target == "$allowed" ]] && ok=1; done
      if ((!ok)); then
        echo "$file: includes $inc, but $dir may include only: ${MAY[$dir]:-nothing of the project}"
        bad=1
      fi
      if [[ $inc == "$FLAG_STRUCT" && $dir != launcher/config && $file != tests/* ]]; then
        local listed=0
        for f in "${FLAG_READERS_LEFT[@]}"; do [[ $f == "$file" ]] && listed=1; done
        if ((!listed)); then
          echo "$file: includes the flag struct ($FLAG_STRUCT); a mode takes the Plan, only config/ and main.cpp read flags"
          bad=1
        fi
      fi
    done < <(sed -nE 's/^#include "((base|envmap|rendezvous|launcher)\/[^"]+)".*/\1/p' "$file")
  done < <(find base envmap rendezvous launcher tests \( -name '*.cpp' -o -name '*.hpp' \) 2>/dev/null | sort)
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
    --include='*.cpp' --include='*.hpp' base envmap rendezvous launcher | sed -E 's/^([^:]+):([0-9]+):[[:space:]]*/\1:\2: /' |
    grep -v '^launcher/core/event_loop\.cpp:' | sort)
  # No std::regex in the libraries: what they read comes from workers and peers
  # (stacks, frames, logs), and std::regex backtracks and recurses once per
  # character, so a long line crashes dlaunch (issue 18). Scan by hand.
  while IFS= read -r hit; do
    echo "${hit%%:*}: uses std::regex (${hit#*:}); base/, envmap/, rendezvous/ and launcher/ scan text by hand (issue 18)"
    bad=1
  done < <(grep -rnE '<regex>|std::(w?regex|regex_[a-z]+|[wsc]*match|sregex_iterator)\b' \
    --include='*.cpp' --include='*.hpp' base envmap rendezvous launcher | sed -E 's/^([^:]+):([0-9]+):[[:space:]]*/\1:\2: /' |
    grep -vE '^[^:]+:[0-9]+: //' | sort)  # comments may name it
  return "$bad"
}

if [[ ${1:-} == --self-test ]]; then
  root=${2:?usage: check.sh --self-test SOURCE_ROOT}
  tmp=$(mktemp -d) || exit 2
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/cmake"
  cp -r "$root/base" "$root/envmap" "$root/rendezvous" "$root/launcher" "$tmp/"
  cp "$root/cmake/layers.txt" "$tmp/cmake/"
  mkdir -p "$tmp/tests/launcher/process" "$tmp/tests/launcher/things"
  touch "$tmp/tests/launcher/process/runner_test.cpp" "$tmp/tests/launcher/things/runner_test.cpp"
  # The planted arrows: core reaching up into process, and a process file
  # reading the flag struct.
  echo '#include "launcher/process/runner.hpp"' >>"$tmp/launcher/core/text.cpp"
  echo '#include "launcher/config/cli.hpp"' >>"$tmp/launcher/process/summary.cpp"
  # ... and a mode running the loop itself.
  echo 'void Planted(boost::asio::io_context& io) { io.run_one(); }' >>"$tmp/launcher/modes/remote.cpp"
  # ... and a test in a folder that mirrors nothing (tests/launcher/things/ above),
  # and a process test reaching up into a mode.
  echo '#include "launcher/modes/local.hpp"' >>"$tmp/tests/launcher/process/runner_test.cpp"
  # ... and a regex over a worker's text.
  echo '#include <regex>' >>"$tmp/rendezvous/codec.cpp"
  read_layers "$tmp"
  out=$(check "$tmp")
  rc=$?
  expect1="launcher/core/text.cpp: includes launcher/process/runner.hpp, but launcher/core may include only: base envmap"
  expect2="launcher/process/summary.cpp: includes launcher/config/cli.hpp, but launcher/process may include only: base envmap rendezvous launcher/core launcher/watchdog launcher/stacks"
  expect3="launcher/modes/remote.cpp: runs an io_context ($(wc -l <"$tmp/launcher/modes/remote.cpp"): void Planted(boost::asio::io_context& io) { io.run_one(); }); only launcher/core/event_loop.cpp may (event_loop.hpp)"
  expect5="tests/launcher/things/runner_test.cpp: tests/ mirrors the source folders, and there is no launcher/things/"
  expect6="tests/launcher/process/runner_test.cpp: includes launcher/modes/local.hpp, but launcher/process may include only: base envmap rendezvous launcher/core launcher/watchdog launcher/stacks"
  expect4="rendezvous/codec.cpp: uses std::regex ($(wc -l <"$tmp/rendezvous/codec.cpp"): #include <regex>); base/, envmap/, rendezvous/ and launcher/ scan text by hand (issue 18)"
  if ((rc != 1)) || ! grep -qxF "$expect1" <<<"$out" || ! grep -qxF "$expect2" <<<"$out" ||
    ! grep -qxF "$expect3" <<<"$out" || ! grep -qxF "$expect4" <<<"$out" || ! grep -qxF "$expect5" <<<"$out" ||
    ! grep -qxF "$expect6" <<<"$out"; then
    echo "layering self-test: the planted includes were not refused as expected (rc $rc):"
    echo "$out"
    exit 1
  fi
  [[ $(wc -l <<<"$out") -eq 7 ]] || { echo "layering self-test: more refused than planted:"; echo "$out"; exit 1; }
  echo "layering self-test: the planted arrows (a test's too), loop runner, regex and misplaced test refused"
  exit 0
fi
read_layers "${1:?usage: check.sh SOURCE_ROOT}"
check "$1"
