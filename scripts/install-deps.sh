#!/usr/bin/env bash
# Installs everything dlaunch needs to build, package and test, from Debian
# packages only (--build-only: to build; --package: to build and package).
# Idempotent: packages already present are left alone, and apt's lists are refreshed
# only when something is missing.
set -euo pipefail

build_pkgs=(build-essential cmake ninja-build pkg-config ccache libboost1.81-dev libboost-filesystem1.81-dev libfmt-dev catch2 libssl-dev libopenmpi-dev
            libyaml-cpp-dev)
test_pkgs=(python3-torch iproute2 procps psmisc openmpi-bin python3-mpi4py openssh-server openssh-client pdsh time
           slurm-wlm slurmctld slurmd slurm-client munge
           python3-jsonschema  # tests/integration/test_events.sh: docs/events.schema.json
           gdb  # --hang-timeout: stacks of workers that are not Python
           shellcheck  # scripts/shellcheck.sh: the quick tier's lint of scripts/ and tests/
           libgloo-dev  # tests/integration/test_horovod.sh: the gloo client
           prometheus  # tests/integration/test_metrics_prometheus.sh: a real scraper of --metrics-addr
           libnss-myhostname  # tests/integration/test_nss_names.sh: a name only an NSS module knows
           devscripts  # tests/integration/test_hardening.sh: Debian's hardening-check
           clang libclang-rt-14-dev llvm)  # scripts/fuzz.sh: libFuzzer, llvm-symbolizer
# scripts/package.sh: the .deb (CPack runs dpkg-shlibdeps from dpkg-dev, and
# file(1) to find the binaries) and the wheel, built offline.
package_pkgs=(dpkg-dev file python3-build python3-setuptools python3-wheel)
test_pkgs+=(man-db bash-completion python3-venv)  # tests/integration/test_package.sh
want=("${build_pkgs[@]}")
case "${1:-}" in
  --build-only) ;;
  --package) want+=("${package_pkgs[@]}") ;;
  *) want+=("${package_pkgs[@]}" "${test_pkgs[@]}") ;;
esac

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
