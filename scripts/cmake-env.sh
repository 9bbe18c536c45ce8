# shellcheck shell=bash
# Sourced by the scripts that run CMake (build.sh, test.sh, fuzz.sh), from the
# repository's root.
#
# Ninja, where installed, for new build directories (an existing one keeps its
# generator). In a unity build a library is one or two compiler runs, and Make's
# generator starts a library's objects only once the libraries it links are
# built: on 2 cores one of them would sit idle most of the build.
if [[ -z ${CMAKE_GENERATOR:-} ]] && command -v ninja >/dev/null; then
  export CMAKE_GENERATOR=Ninja
fi
# The compiler cache, where there is one: the builds share objects across runs.
# Across checkouts only in the same place: CMake's unity sources include the
# real sources by absolute path (relocatable ones need CMake 4.0).
if [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]] && command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
fi
