#!/usr/bin/env bash
# The whole test suite on a fresh machine, as CI runs it (`.ci/run` calls this):
#   normal  the release build (build/ or $BUILD_DIR): unit and integration tests
#   asan    the same tests against a build with AddressSanitizer and UBSan
#           (build-asan/ or $ASAN_BUILD_DIR); any sanitizer report fails its test
#   fuzz    every libFuzzer target for FUZZ_SECONDS (default 60): scripts/fuzz.sh
# Every stage runs even when an earlier one failed; the exit status is 1 if any did.
#
#   bash scripts/test.sh                      all three
#   bash scripts/test.sh --asan-only          one stage (--normal-only, --fuzz-only)
#   bash scripts/test.sh --asan-only -R rdzv  arguments after the stage go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
stages=(normal asan fuzz)
case "${1:-}" in
  --normal-only) stages=(normal); shift ;;
  --asan-only) stages=(asan); shift ;;
  --fuzz-only) stages=(fuzz); shift ;;
esac
bash scripts/install-deps.sh

normal_stage() {
  bash scripts/build.sh || return 1
  (cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 300 "$@")
}

# First line of a sanitizer report and the first stack frame in dlaunch's own code.
report_summary() {
  local what where
  what=$(grep -m1 -oE '(ERROR: [A-Za-z]+Sanitizer: [a-z-]+|runtime error: .*)' "$1" || true)
  where=$(grep -m1 -oE '(envmap|rendezvous|launcher|tests)/[A-Za-z0-9_/]*\.(cpp|hpp):[0-9]+' "$1" || true)
  printf '%s at %s' "${what:-a sanitizer report}" "${where:-?}"
}

# Each test runs alone so that its sanitizer reports (written to files, because a
# test may swallow a dying dlaunch's stderr, or expect the exit code 1 that a
# sanitizer would also give) are its own. exitcode=86 sets them apart too.
asan_stage() {
  local dir=${ASAN_BUILD_DIR:-build-asan}
  # (Called under `||`, where set -e is off: each step checks itself.)
  cmake -S . -B "$dir" -DDLAUNCH_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || return 1
  # ASAN_BUILD_TARGETS: build only these (e.g. "dlaunch", then run with -E unit).
  local targets=()
  if [[ -n "${ASAN_BUILD_TARGETS:-}" ]]; then read -r -a targets <<<"--target $ASAN_BUILD_TARGETS"; fi
  cmake --build "$dir" -j"$(nproc)" "${targets[@]}" || return 1
  local reports=$PWD/$dir/sanitizer-reports
  rm -rf "$reports"
  local common="exitcode=86:log_exe_name=1:print_stacktrace=1"
  local supp=$PWD/tests/sanitizers/lsan.supp
  local names name rc failed=0 log n
  # The arguments pick the tests (-R, -E, -L); each then runs alone.
  names=$(cd "$dir" && ctest -N "$@" | sed -nE 's/^ *Test +#[0-9]+: +([^ ]+)$/\1/p')
  for name in $names; do
    mkdir -p "$reports/$name"
    log=$reports/$name/ctest.log
    rc=0
    (cd "$dir" &&
      ASAN_OPTIONS="$common:detect_leaks=1:log_path=$reports/$name/report${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
      UBSAN_OPTIONS="$common:halt_on_error=1:log_path=$reports/$name/report${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
      LSAN_OPTIONS="suppressions=$supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
      DLAUNCH_SANITIZED=1 \
      ctest --output-on-failure --timeout 300 -R "^${name}\$") >"$log" 2>&1 || rc=$?
    n=$(find "$reports/$name" -name 'report.*' | wc -l)
    if ((rc == 0 && n == 0)); then
      printf 'asan %-28s ok\n' "$name"
      continue
    fi
    failed=1
    if ((n > 0)); then
      printf 'asan %-28s FAILED: %d sanitizer report(s), first: %s\n' "$name" "$n" \
        "$(report_summary "$(find "$reports/$name" -name 'report.*' | sort | head -1)")"
    else
      printf 'asan %-28s FAILED (ctest exit %d, no sanitizer report); ctest output:\n' "$name" "$rc"
      tail -n 40 "$log" | sed 's/^/    /'
    fi
  done
  # The reports themselves, for the CI log (each is one process's; 80 lines show the stacks).
  find "$reports" -name 'report.*' | sort | while read -r f; do
    printf '\n==== %s\n' "${f#"$PWD"/}"
    head -n 80 "$f"
  done
  return "$failed"
}

status=0
for stage in "${stages[@]}"; do
  start=$SECONDS
  rc=0
  case $stage in
    normal) normal_stage "$@" || rc=$? ;;
    asan) asan_stage "$@" || rc=$? ;;
    fuzz) bash scripts/fuzz.sh || rc=$? ;;
  esac
  printf 'test.sh: stage %s %s in %ds\n' "$stage" "$( ((rc == 0)) && echo passed || echo FAILED)" $((SECONDS - start))
  ((rc == 0)) || status=1
done
exit "$status"
