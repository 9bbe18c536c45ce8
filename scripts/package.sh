#!/usr/bin/env bash
# Builds dlaunch's packages into dist/, offline, from Debian packages only:
#   dist/dlaunch_VERSION_ARCH.deb                           the binaries, man page, bash completion, docs (CPack)
#   dist/dlaunch-VERSION-py3-none-manylinux_2_N_ARCH.whl    the binary for pip (scripts/wheel/)
#
#   bash scripts/package.sh                       install the tools, build build/, package it
#   bash scripts/package.sh --build-dir DIR --dist OUT --no-build
#                                                 package DIR as it is built (tests/integration/test_package.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build_dir=${BUILD_DIR:-build} dist=dist build=1
while (($#)); do
  case $1 in
    --build-dir) build_dir=${2:?}; shift 2 ;;
    --dist) dist=${2:?}; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "package.sh: unknown argument '$1' (--build-dir DIR, --dist DIR, --no-build)" >&2; exit 2 ;;
  esac
done
[[ $build_dir == /* ]] || build_dir=$src/$build_dir
[[ $dist == /* ]] || dist=$src/$dist

if ((build)); then
  bash scripts/install-deps.sh package
  # What the packages hold, not the tests: `dlaunch` brings dlaunch-mpi-bootstrap.
  BUILD_DIR=$build_dir bash scripts/build.sh --target dlaunch dlaunch_docs
fi
cache=$build_dir/CMakeCache.txt
[[ -f $cache ]] || { echo "package.sh: $build_dir: not a CMake build directory (no CMakeCache.txt)" >&2; exit 2; }
if grep -qE '^DLAUNCH_(SANITIZE|FUZZ):BOOL=ON' "$cache"; then
  echo "package.sh: $build_dir: a sanitizer build; package a release build (scripts/build.sh)" >&2
  exit 2
fi
version=$(sed -nE 's/^set\(CPACK_PACKAGE_VERSION "(.*)"\)$/\1/p' "$build_dir/CPackConfig.cmake")
[[ -n $version ]] || { echo "package.sh: $build_dir/CPackConfig.cmake: no CPACK_PACKAGE_VERSION" >&2; exit 2; }

stage=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-package-XXXXXX")
trap 'rm -rf -- "$stage"' EXIT
mkdir -p "$dist"
log=$stage/log
# Runs a step quietly; on failure shows its output and stops.
step() {
  "$@" >"$log" 2>&1 || { tail -n 40 "$log" >&2; echo "package.sh: failed: $*" >&2; exit 1; }
}

# The Debian package: CPack stages it in the temporary directory, then it moves to dist.
step cpack --config "$build_dir/CPackConfig.cmake" -G DEB -B "$stage/cpack"
deb=$(find "$stage/cpack" -maxdepth 1 -name 'dlaunch_*.deb' | head -n 1)
[[ -n $deb ]] || { cat "$log" >&2; echo "package.sh: cpack made no .deb" >&2; exit 1; }
mv -f "$deb" "$dist/"
echo "package.sh: $dist/$(basename "$deb")"

# The wheel: the same stripped binary as the .deb's.
step cmake --install "$build_dir" --prefix "$stage/root" --strip
bin=$stage/root/bin/dlaunch
# A manylinux tag promises the binary needs nothing beyond glibc's own
# libraries, and no glibc newer than the tag's: check the first, compute the second.
# The default dlaunch, a static-pie, needs no glibc at all and gets the oldest
# tag pip knows, manylinux_2_17; one linked dynamically (-DDLAUNCH_STATIC_PIE=OFF)
# gets the tag of the newest glibc symbol it needs (that of the build machine,
# 2.34 and later).
allowed=" libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1 "
for lib in $(readelf -d "$bin" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p'); do
  [[ $allowed == *" $lib "* ]] || { echo "package.sh: $bin: needs $lib, which a manylinux wheel cannot assume" >&2; exit 1; }
done
glibc=$(readelf -V --wide "$bin" | { grep -oE 'GLIBC_2\.[0-9]+' || true; } | sed 's/GLIBC_2\.//' | sort -n | tail -n 1)
case $(readelf -h "$bin" | sed -nE 's/^ *Machine: *//p') in
  *X86-64*) arch=x86_64 ;;
  *AArch64*) arch=aarch64 ;;
  *) echo "package.sh: $bin: a machine no wheel tag is written for here: $(readelf -h "$bin" | grep Machine)" >&2; exit 1 ;;
esac
wheel=$stage/wheel
cp -r scripts/wheel "$wheel"
mkdir -p "$wheel/bin"
cp "$bin" "$wheel/bin/dlaunch"
cp "$stage/root/bin/dlaunch-watch" "$wheel/bin/dlaunch-watch"  # the watchdog it starts, beside it
cp README.md "$wheel/"
echo "$version" >"$wheel/VERSION"
printf '[bdist_wheel]\npython_tag = py3\nplat_name = manylinux_2_%s_%s\n' "${glibc:-17}" "$arch" >"$wheel/setup.cfg"
# Debian's interpreter, which has python3-build: not whatever python3 is first on PATH.
step env -C "$wheel" /usr/bin/python3 -m build --no-isolation --wheel --outdir "$stage/whl" .
whl=$(find "$stage/whl" -maxdepth 1 -name 'dlaunch-*.whl' | head -n 1)
[[ -n $whl ]] || { cat "$log" >&2; echo "package.sh: python3 -m build made no wheel" >&2; exit 1; }
mv -f "$whl" "$dist/"
echo "package.sh: $dist/$(basename "$whl")"
