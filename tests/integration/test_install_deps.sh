#!/usr/bin/env bash
# ctest: LABELS=quick
# scripts/install-deps.sh's modes, read with --list (nothing is installed): the
# newcomer's command (run-example.sh: `example`) installs the build's packages
# and PyTorch and no test tool; `test` (scripts/test.sh, .ci/run) installs all
# of them; each script asks for its own mode.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
deps=$SRC/scripts/install-deps.sh

list() { bash "$deps" --list "$@" | sort; }
for m in build example package test; do
  list "$m" >"$TMP/$m" || fail "install-deps.sh --list $m exited $?"
  [[ -s $TMP/$m ]] || fail "install-deps.sh --list $m printed nothing"
done
# subset A B: every package of mode A is in mode B.
subset() {
  local extra
  extra=$(comm -23 "$TMP/$1" "$TMP/$2" | tr '\n' ' ')
  [[ -z $extra ]] || fail "mode $1 installs what mode $2 does not: $extra"
}
subset build example
subset build package
subset example test
subset package test
grep -qx python3-torch "$TMP/example" || fail "mode example lacks python3-torch, which examples/ddp_train.py imports"
grep -qx python3-torch "$TMP/build" && fail "mode build installs python3-torch"
for tool in slurm-wlm slurmd munge prometheus openssh-server pdsh libgloo-dev gdb clang devscripts openmpi-bin; do
  grep -qx "$tool" "$TMP/test" || fail "mode test lacks $tool"
  grep -qx "$tool" "$TMP/example" && fail "mode example installs the test tool $tool"
done
# No mode given is the whole set, as before modes existed; the old flags still work.
assert_eq "$(list)" "$(cat "$TMP/test")" "--list with no mode"
assert_eq "$(list --package)" "$(cat "$TMP/package")" "--list --package"
assert_eq "$(list --build-only)" "$(cat "$TMP/build")" "--list --build-only"

bash "$deps" --list nonsense >"$TMP/out" 2>&1
rc=$?
assert_eq "$rc" 2 "install-deps.sh --list nonsense: exit code"
assert_contains "$(cat "$TMP/out")" "install-deps: unknown mode 'nonsense'" "install-deps.sh --list nonsense"

# Each entry point asks for the mode it needs.
grep -qx 'bash scripts/install-deps.sh example' "$SRC/scripts/run-example.sh" || fail "run-example.sh does not install mode example"
grep -qx 'bash scripts/install-deps.sh test' "$SRC/scripts/test.sh" || fail "test.sh does not install mode test"
grep -q 'bash scripts/install-deps.sh package$' "$SRC/scripts/package.sh" || fail "package.sh does not install mode package"
pass
