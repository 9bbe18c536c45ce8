#!/usr/bin/env bash
# ctest: LABELS=slow,package RESOURCE_LOCK=dpkg PROCESSORS=2 TIMEOUT=300
# The packages of the build under test (scripts/package.sh --no-build), used
# as a user would. The .deb: dpkg -i, then `dlaunch --version`, `man -w
# dlaunch`, the bash completion through bash-completion's own loader, a
# 2-rank DDP job, and dpkg -r, after which none of its files is left. The
# wheel: pip install --no-index into a fresh venv, then `dlaunch` and `python
# -m dlaunch` there: the binary itself is on PATH, a failing rank's exit code
# comes back, and SIGTERM to the pid the user started stops every rank.
# Needs root (dpkg); refuses to touch a machine where dlaunch is installed.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_torch
[[ $(id -u) == 0 ]] || skip "needs root to install a .deb"
[[ -z ${DLAUNCH_SANITIZED:-} ]] || skip "a sanitizer build is not packaged (scripts/package.sh refuses it)"
for tool in dpkg dpkg-deb cpack readelf man; do command -v "$tool" >/dev/null || skip "'$tool' is not installed"; done
[[ -f /usr/share/bash-completion/bash_completion ]] || skip "bash-completion is not installed"
/usr/bin/python3 -c 'import build, venv, ensurepip' 2>/dev/null || skip "python3-build or python3-venv is not installed"
if dpkg-query -W -f='${Status}' dlaunch 2>/dev/null | grep -q 'ok installed' || [[ -e /usr/bin/dlaunch ]]; then
  skip "dlaunch is installed on this machine; this test will not replace it"
fi

run_cmd 240 bash "$SRC/scripts/package.sh" --no-build --build-dir "$(dirname "$DLAUNCH")" --dist "$TMP/dist"
expect_rc 0 "scripts/package.sh"
want_version=$("$DLAUNCH" --version)
version=$(sed -nE 's/^dlaunch ([0-9.]+) .*/\1/p' <<<"$want_version")
deb=$TMP/dist/dlaunch_${version}_$(dpkg --print-architecture).deb
[[ -f $deb ]] || fail_run "no $(basename "$deb") in dist/: $(ls "$TMP/dist")"
whl=$(find "$TMP/dist" -name "dlaunch-$version-py3-none-manylinux_2_*_$(uname -m).whl")
[[ -n $whl ]] || fail_run "no dlaunch-$version-py3-none-manylinux_2_N_$(uname -m).whl in dist/: $(ls "$TMP/dist")"
# The tag is the newest glibc symbol version the binary needs; a static one
# (CMake's opt-in DLAUNCH_STATIC_PIE) needs none and gets manylinux_2_17, the oldest.
needed=$(readelf -V --wide "$DLAUNCH" | { grep -oE 'GLIBC_2\.[0-9]+' || true; } | sed 's/GLIBC_2\.//' | sort -n | tail -n 1)
dynamic=0
loads_libraries "$DLAUNCH" && dynamic=1
((dynamic)) || [[ -z $needed ]] || fail "dlaunch has no interpreter but needs GLIBC_2.$needed"
assert_contains "$whl" "manylinux_2_${needed:-17}_" "the wheel's glibc tag"

# --- the Debian package -------------------------------------------------------
depends=$(dpkg-deb -f "$deb" Depends)
# What dpkg-shlibdeps computes from the dynamic programs in it: dlaunch when it
# is built dynamic, dlaunch-mpi-bootstrap (Open MPI) where MPI is installed.
if ((dynamic)) || [[ -x $(dirname "$DLAUNCH")/dlaunch-mpi-bootstrap ]]; then
  assert_contains "$depends" "libc6 (>= 2." "Depends, as dpkg-shlibdeps computes it"
fi
for t in python3-torch openssh-server slurm munge gdb iproute2 clang catch2 libboost; do
  [[ $depends != *"$t"* ]] || fail "the .deb depends on $t, a build or test tool: $depends"
done
dpkg-deb -c "$deb" | awk '{print $NF}' | sed -E 's|^\./|/|; s|(.)/$|\1|' >"$TMP/contents"
for f in /usr/bin/dlaunch /usr/bin/dlaunch-watch /usr/share/man/man1/dlaunch.1.gz /usr/share/bash-completion/completions/dlaunch \
  /usr/share/doc/dlaunch/README.md /usr/share/doc/dlaunch/copyright /usr/share/doc/dlaunch/docs/SECURITY.md \
  /usr/share/doc/dlaunch/docs/multinode.md /usr/share/doc/dlaunch/docs/events.schema.json; do
  grep -qx -- "$f" "$TMP/contents" || fail "the .deb has no $f"
done
if [[ -x $(dirname "$DLAUNCH")/dlaunch-mpi-bootstrap ]]; then
  grep -qx /usr/bin/dlaunch-mpi-bootstrap "$TMP/contents" || fail "the .deb has no /usr/bin/dlaunch-mpi-bootstrap"
fi

# From here on dpkg's state is changed: whatever happens, the package goes again.
# shellcheck disable=SC2317  # called through at_exit / wait_for
remove_package() { dpkg -r dlaunch >/dev/null 2>&1 || true; }
at_exit remove_package
run_cmd 120 dpkg -i "$deb"
expect_rc 0 "dpkg -i $(basename "$deb")"
assert_eq "$(/usr/bin/dlaunch --version)" "$want_version" "the installed dlaunch --version"
# The packaged programs are stripped, and as hardened as the built ones (test_hardening.sh).
for p in /usr/bin/dlaunch /usr/bin/dlaunch-watch /usr/bin/dlaunch-mpi-bootstrap; do
  [[ -e $p ]] || continue
  readelf -SW "$p" | grep -q ' .symtab ' && fail "$p is not stripped"
  problems=$(hardened_problems "$p")
  [[ -z $problems ]] || fail "the packaged $p is not hardened: $problems"
done
assert_eq "$(man -w dlaunch)" /usr/share/man/man1/dlaunch.1.gz "man -w dlaunch"
# The page renders without a groff warning and holds the flags.
MANWIDTH=120 man --warnings -E UTF-8 -l /usr/share/man/man1/dlaunch.1.gz >"$TMP/man.txt" 2>"$TMP/man.err"
[[ ! -s $TMP/man.err ]] || fail "man dlaunch: groff warns: $(head -n 5 "$TMP/man.err")"
grep -q -- '--nproc-per-node N' "$TMP/man.txt" || fail "man dlaunch does not show --nproc-per-node N"

# Completion through bash-completion's own loader, as Tab would load it (an
# interactive bash, so that bash-completion loads; no history written).
# complete_words WORD... : what Tab offers for the last WORD (a fresh interactive bash, in $TMP/cwd).
mkdir -p "$TMP/cwd"
complete_words() {
  (cd "$TMP/cwd" && HISTFILE=/dev/null bash --norc --noprofile -ic '
    source /usr/share/bash-completion/bash_completion
    __load_completion dlaunch || exit 3
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _dlaunch
    printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$@" 2>/dev/null)
}
registered=$(HISTFILE=/dev/null bash --norc --noprofile -ic 'source /usr/share/bash-completion/bash_completion
  __load_completion dlaunch; complete -p dlaunch' 2>/dev/null)
assert_eq "$registered" "complete -F _dlaunch dlaunch" "complete -p dlaunch after bash-completion loads it"
assert_eq "$(complete_words dlaunch --hang-action '')" $'report\nstop' "Tab after --hang-action"
assert_eq "$(complete_words dlaunch --nproc_per_node = a)" "auto" "Tab in --nproc_per_node=a"
assert_eq "$(complete_words dlaunch --nproc-p)" "--nproc-per-node" "Tab in --nproc-p"
assert_eq "$(complete_words dlaunch sta)" $'stacks\nstatus' "Tab in the subcommand sta"
touch "$TMP/cwd/hosts.txt" "$TMP/cwd/pytorch.yml" "$TMP/cwd/notes.txt"
assert_eq "$(complete_words dlaunch --hostfile h)" "hosts.txt" "Tab after --hostfile"
assert_eq "$(complete_words dlaunch job '')" "pytorch.yml" "Tab after dlaunch job (a spec)"
assert_eq "$(complete_words dlaunch job pytorch.yml --hang-a)" "--hang-action" "Tab for a flag after the spec"
assert_eq "$(complete_words dlaunch coordinator --rdzv-token-)" "--rdzv-token-file" "Tab for a coordinator option"
# Run ids come from the live view: a job that runs now.
id=pkg$$
start_dl live 60 --nproc-per-node 1 --rdzv-id "$id" -- "$TMP/bin/sleep" 30
# shellcheck disable=SC2317  # called through at_exit / wait_for
listed() { /usr/bin/dlaunch status "$id" >/dev/null 2>&1; }
wait_for 10 listed || fail "dlaunch status $id: the job never showed"
assert_eq "$(complete_words dlaunch status pkg)" "$id" "Tab after dlaunch status"
kill -TERM "$(dl_pid live)" 2>/dev/null
wait_dl live

# The installed dlaunch runs a real job.
cp "$SRC/examples/ddp_train.py" "$TMP/ddp_train.py"
run_cmd 150 /usr/bin/dlaunch --nproc-per-node 2 -- "$PY" -u "$TMP/ddp_train.py" --epochs 1 --steps 5
expect_rc 0 "a 2-rank DDP job under the installed dlaunch"
for r in 0 1; do assert_file_matches "$OUT" "^\[$r\]: rank $r: params in sync" "rank $r's verdict"; done

run_cmd 120 dpkg -r dlaunch
expect_rc 0 "dpkg -r dlaunch"
if dpkg-query -W -f='${Status}' dlaunch 2>/dev/null | grep -q 'ok installed'; then fail "dpkg still lists dlaunch"; fi
while read -r f; do
  [[ -d $f && $f != /usr/share/doc/dlaunch* ]] && continue  # /usr, /usr/bin, ...: not the package's own
  [[ ! -e $f ]] || fail "$f is left after dpkg -r dlaunch"
done <"$TMP/contents"

# --- the wheel ------------------------------------------------------------------
run_cmd 120 /usr/bin/python3 -m venv --system-site-packages "$TMP/venv"
expect_rc 0 "python3 -m venv"
run_cmd 120 "$TMP/venv/bin/pip" install --no-index --no-cache-dir --disable-pip-version-check "$whl"
expect_rc 0 "pip install --no-index $(basename "$whl")"
assert_eq "$(PATH=$TMP/venv/bin:$PATH command -v dlaunch)" "$TMP/venv/bin/dlaunch" "dlaunch on the venv's PATH"
# The binary itself, not a Python script that starts it.
[[ $(head -c 4 "$TMP/venv/bin/dlaunch") == $'\x7fELF' ]] || fail "the venv's dlaunch is not the native binary"
assert_eq "$("$TMP/venv/bin/dlaunch" --version)" "$want_version" "the venv's dlaunch --version"
[[ -x $TMP/venv/bin/dlaunch-watch ]] || fail "the wheel brought no bin/dlaunch-watch beside dlaunch"
assert_eq "$("$TMP/venv/bin/python" -m dlaunch --version)" "$want_version" "python -m dlaunch --version"

# shellcheck disable=SC2016  # $LOCAL_RANK is the worker's
printf '#!/bin/sh\n[ "$LOCAL_RANK" = 1 ] && exit 7\nexec %s 30\n' "$TMP/bin/sleep" >"$TMP/fail.sh"
chmod +x "$TMP/fail.sh"
for how in "$TMP/venv/bin/dlaunch" "$TMP/venv/bin/python -m dlaunch"; do
  # shellcheck disable=SC2086  # $how is a command and its words
  run_cmd 60 $how --nproc-per-node 2 --shutdown-timeout 2 -- "$TMP/fail.sh"
  expect_rc 7 "rank 1 exits 7 under $how"
  wait_for 5 no_marked_processes
  assert_no_leftovers "after the failed job under $how"
done

# SIGTERM to the pid the user started: python -m dlaunch has become dlaunch.
"$TMP/venv/bin/python" -m dlaunch --nproc-per-node 2 -- "$TMP/bin/sleep" 60 >"$TMP/term.out" 2>"$TMP/term.err" </dev/null &
pid=$!
track_pid "$pid"
# shellcheck disable=SC2317  # called through at_exit / wait_for
two_sleeping() { [[ $(count_marked /bin/sleep) -ge 2 ]]; }
wait_for 20 two_sleeping || fail "python -m dlaunch: the 2 ranks never started ($(cat "$TMP/term.err"))"
assert_eq "$(cat "/proc/$pid/comm")" dlaunch "the process the user started, once its ranks run"
kill -TERM "$pid"
wait "$pid"
# shellcheck disable=SC2034  # for lib.sh's expect_rc and show_run
RC=$? OUT=$TMP/term.out ERR=$TMP/term.err ELAPSED=0
expect_rc 143 "SIGTERM to python -m dlaunch's pid"
wait_for 5 no_marked_processes
assert_no_leftovers "after SIGTERM to python -m dlaunch"
pass
