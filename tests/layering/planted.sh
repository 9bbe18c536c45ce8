#!/usr/bin/env bash
# The layers hold in the build, not only in check.sh: in a scratch copy of the
# source tree, envmap/ (the lowest layer with unit tests) gets
#   1. a call up into rendezvous/, declared by hand so that no include shows it:
#      building envmap's unit tests (dlaunch_tests_envmap, which links envmap's
#      library whole and only base/ below it) must fail to link, naming it;
#   2. an include of a rendezvous/ header: tests/layering/check.sh must refuse it.
# Only that one test program is built, in Debug (no optimiser), in a fresh
# configure of the copy. The copy is made at the same SCRATCH path each time
# (the build's tests pass one in the build tree) and removed after, so that
# the ccache of scripts/cmake-env.sh finds the objects of the run before: cold,
# the test takes half a minute on 2 cores; warm, a few seconds.
#
#   tests/layering/planted.sh SOURCE_ROOT SCRATCH
set -u
root=$(cd "${1:?usage: planted.sh SOURCE_ROOT SCRATCH}" && pwd) || exit 2
tmp=${2:?usage: planted.sh SOURCE_ROOT SCRATCH}
[[ $(basename "$tmp") == layering-planted* ]] || { echo "planted: SCRATCH is removed, so it must be named layering-planted*" >&2; exit 2; }
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
src=$tmp/src
mkdir -p "$src" || exit 2
tar -C "$root" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$src" -xf - || exit 2

cat >>"$src/envmap/layout.cpp" <<'EOF'
namespace dlaunch::rendezvous {
std::string QuoteId(std::string_view text);  // rendezvous/coordinator.hpp, a layer above
}
std::string PlantedUpwardCall();
std::string PlantedUpwardCall() { return dlaunch::rendezvous::QuoteId("planted"); }
EOF

cd "$src" || exit 2
# shellcheck source=scripts/cmake-env.sh
source scripts/cmake-env.sh
export CCACHE_BASEDIR=$tmp
if ! cmake -S . -B "$tmp/build" -DCMAKE_BUILD_TYPE=Debug -DDLAUNCH_WITH_MPI=OFF >"$tmp/configure.log" 2>&1; then
  echo "planted: the scratch copy did not configure:"
  tail -n 30 "$tmp/configure.log"
  exit 1
fi
if cmake --build "$tmp/build" --target dlaunch_tests_envmap -j"$(nproc)" >"$tmp/build.log" 2>&1; then
  echo "planted: envmap's unit tests linked although envmap/layout.cpp calls up into rendezvous/"
  exit 1
fi
if ! grep -q "undefined reference to .dlaunch::rendezvous::QuoteId" "$tmp/build.log"; then
  echo "planted: the build failed, but not by refusing the upward call to link:"
  tail -n 30 "$tmp/build.log"
  exit 1
fi
echo "planted: the call from envmap/ up into rendezvous/ fails to link ($(grep -m1 -o "undefined reference to [^']*'" "$tmp/build.log"))"

echo '#include "rendezvous/coordinator.hpp"' >>"$src/envmap/layout.cpp"
out=$(bash "$root/tests/layering/check.sh" "$src")
rc=$?
want="envmap/layout.cpp: includes rendezvous/coordinator.hpp, but envmap may include only: base"
if ((rc != 1)) || [[ $out != "$want" ]]; then
  echo "planted: check.sh did not refuse exactly the upward include (rc $rc):"
  echo "$out"
  exit 1
fi
echo "planted: the include of rendezvous/ from envmap/ is refused ($want)"
