#!/usr/bin/env bash
# Installs what dlaunch needs, from Debian packages only. One mode, each adding
# to the one before it:
#   build     to build dlaunch and its unit tests (scripts/build.sh)
#   example   build, and what examples/ddp_train.py runs (scripts/run-example.sh)
#   package   build, and the packaging tools (scripts/package.sh)
#   test      everything: build, example, package and every test tool
#             (scripts/test.sh, and so .ci/run); the default
#
#   bash scripts/install-deps.sh [MODE]
#   bash scripts/install-deps.sh --list [MODE]   the packages of MODE, one a line; installs nothing
#
# --build-only and --package are the older names of build and package.
# Idempotent: packages already present are left alone, and apt's lists are refreshed
# only when something is missing.
set -euo pipefail

build_pkgs=(build-essential cmake ninja-build pkg-config ccache libboost1.81-dev libboost-filesystem1.81-dev libfmt-dev catch2 libssl-dev libopenmpi-dev
            libyaml-cpp-dev
            lld)  # cmake/DlaunchTextOrder.cmake: dlaunch's start path first in its text
# examples/ddp_train.py: PyTorch's DDP over gloo, on the system's python3.
example_pkgs=(python3-torch)
# scripts/package.sh: the .deb (CPack runs dpkg-shlibdeps from dpkg-dev, and
# file(1) to find the binaries) and the wheel, built offline.
package_pkgs=(dpkg-dev file python3-build python3-setuptools python3-wheel)
test_pkgs=(iproute2 procps psmisc openmpi-bin python3-mpi4py openssh-server openssh-client pdsh time
           slurm-wlm slurmctld slurmd slurm-client munge
           python3-jsonschema  # tests/integration/test_events.sh: docs/events.schema.json
           python3-pytest  # tests/launcher/stacks/stack_hook_test.py: the stack hook's Python
           gdb  # --hang-timeout: stacks of workers that are not Python
           shellcheck  # scripts/shellcheck.sh: the quick tier's lint of scripts/ and tests/
           clang-format  # scripts/clang-format.sh: the quick tier's check of the C++ layout
           libgloo-dev  # tests/integration/test_horovod.sh: the gloo client
           prometheus  # tests/integration/test_metrics_prometheus.sh: a real scraper of --metrics-addr
           libnss-myhostname  # tests/integration/test_nss_names.sh: a name only an NSS module knows
           devscripts  # tests/integration/test_hardening.sh: Debian's hardening-check
           valgrind  # scripts/symbol-order.sh (callgrind), which test_text_order runs
           libcap2-bin  # tests/integration/test_watch_stages.sh: setcap, a dlaunch that is not dumpable
           clang libclang-rt-14-dev llvm  # scripts/fuzz.sh: libFuzzer, llvm-symbolizer
           man-db bash-completion python3-venv)  # tests/integration/test_package.sh

list=0
if [[ ${1:-} == --list ]]; then list=1; shift; fi
mode=${1:-test}
want=("${build_pkgs[@]}")
case $mode in
  build | --build-only) ;;
  example) want+=("${example_pkgs[@]}") ;;
  package | --package) want+=("${package_pkgs[@]}") ;;
  test) want+=("${example_pkgs[@]}" "${package_pkgs[@]}" "${test_pkgs[@]}") ;;
  *) echo "install-deps: unknown mode '$mode' (build, example, package, test; --list MODE prints one)" >&2; exit 2 ;;
esac
if (($# > 1)); then
  echo "install-deps: one mode only, got '$*'" >&2
  exit 2
fi
if ((list)); then
  printf '%s\n' "${want[@]}"
  exit 0
fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
