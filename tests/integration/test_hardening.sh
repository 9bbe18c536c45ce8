#!/usr/bin/env bash
# ctest: LABELS=quick
# The default build carries Debian's hardening (cmake/DlaunchHardening.cmake)
# in all three programs, dlaunch, dlaunch-watch and dlaunch-mpi-bootstrap:
#   1. each is position-independent (ELF type DYN, FLAGS_1 PIE) with full RELRO
#      (a GNU_RELRO segment and BIND_NOW), and calls the stack protector's and
#      glibc's FORTIFY checks (__stack_chk_fail, __*_chk; dlaunch-watch links no C
#      library, so it has its own guard and nothing to FORTIFY); Debian's own hardening-check
#      agrees on the dynamically linked ones (it reads the dynamic symbols, so it
#      cannot judge a static-pie such as dlaunch and dlaunch-watch by default,
#      whose full symbol table is read instead);
#   2. every source was compiled with each hardening flag that dpkg-buildflags
#      gives (DEB_BUILD_MAINT_OPTIONS=hardening=+all), and with CET's
#      -fcf-protection (build/compile_commands.json);
# test_package.sh holds the .deb's stripped programs to 1 (hardened_problems).
# The sanitizer build leaves FORTIFY out on purpose, and is not checked.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
[[ -z ${DLAUNCH_SANITIZED:-} ]] || skip "the sanitizer build leaves FORTIFY out (it hides accesses from ASan)"
command -v readelf >/dev/null || skip "readelf (binutils) is not installed"
build=$(dirname "$DLAUNCH")

# 1. The programs as built.
programs=("$DLAUNCH" "$build/dlaunch-watch")
[[ -x $build/dlaunch-mpi-bootstrap ]] && programs+=("$build/dlaunch-mpi-bootstrap")
for p in "${programs[@]}"; do
  problems=$(hardened_problems "$p")
  [[ -z $problems ]] || fail "1: $(basename "$p") is not hardened: $problems"
done
if command -v hardening-check >/dev/null; then
  for p in "${programs[@]}"; do
    loads_libraries "$p" || continue
    # Control flow integrity is left out: the binary's CET note is the AND of
    # every object linked in, and Debian builds its static libcrypto.a and Boost
    # archives without -fcf-protection. Our own objects are checked in 2.
    out=$(hardening-check --nocfprotection "$p" 2>&1) || fail "1: hardening-check $(basename "$p"): $out"
  done
else
  log "1: hardening-check (devscripts) is not installed; readelf's checks only"
fi
# The checks themselves see a program without the hardening.
cat >"$TMP/plain.c" <<'C'
int main(void) { return 0; }
C
if command -v cc >/dev/null && cc -no-pie -fno-stack-protector -Wl,-z,norelro -o "$TMP/plain" "$TMP/plain.c" 2>/dev/null; then
  problems=$(hardened_problems "$TMP/plain")
  assert_contains "$problems" "not position-independent" "1: the check on a -no-pie program"
  assert_contains "$problems" "no GNU_RELRO" "1: the check on a -z norelro program"
fi

# 2. The flags every source was compiled with.
commands=$build/compile_commands.json
[[ -f $commands ]] || fail "2: no $commands (CMAKE_EXPORT_COMPILE_COMMANDS)"
want=(-fstack-protector-strong -fstack-clash-protection -fcf-protection=full -D_FORTIFY_SOURCE=2 -Wformat
      -Werror=format-security)
if command -v dpkg-buildflags >/dev/null; then
  for f in $(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CXXFLAGS) \
           $(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CPPFLAGS); do
    # What is not hardening: debug info, the optimiser level, path maps, date warnings.
    case $f in -g | -O* | -ffile-prefix-map=* | -fdebug-prefix-map=* | -Wdate-time) continue ;; esac
    want+=("$f")
  done
fi
"$PY" - "$commands" "$SRC" "${want[@]}" <<'PY' || fail "2: a source compiled without the hardening flags (above)"
import json, shlex, sys
commands, src, want = sys.argv[1], sys.argv[2], sys.argv[3:]
entries = json.load(open(commands))
checked = 0
bad = []
for e in entries:
    args = e.get("arguments") or shlex.split(e["command"])
    # Only dlaunch's own sources (unity batches of them live in the build tree).
    if "/tests/fuzz/" in e["file"]:
        continue
    checked += 1
    missing = [w for w in want if w not in args]
    if not any(a in ("-fPIE", "-fPIC", "-fpie", "-fpic") for a in args):
        missing.append("-fPIE")
    if missing:
        bad.append(f"{e['file']}: without {' '.join(missing)}")
if checked < 10:
    print(f"only {checked} compile commands in {commands}", file=sys.stderr)
    sys.exit(1)
for b in bad[:10]:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
pass
