#!/usr/bin/env bash
# The whole test suite on a fresh machine, as CI runs it (`.ci/run` calls this):
#   normal  the release build (build/ or $BUILD_DIR): unit and integration tests
#   asan    the same tests against a build with AddressSanitizer and UBSan
#           (build-asan/ or $ASAN_BUILD_DIR); any sanitizer report fails its test
#   fuzz    every libFuzzer target, FUZZ_SECONDS (default 15) each: scripts/fuzz.sh
# Every stage runs even when an earlier one failed; the exit status is 1 if any
# did. The tests run in parallel (ctest -j$TEST_JOBS, default 4 per core: most
# of them sleep; tests/CMakeLists.txt says what each needs to itself), and each
# step's time is printed at the end.
#
# With all three stages the sanitized build and the fuzzers' build compile in
# the background (nice 10) while the normal stage's tests run: those mostly
# wait, and a 2-core machine would otherwise sit half idle for minutes. The
# tests must pass beside such load anyway (scripts/test-under-load.sh).
#
#   bash scripts/test.sh                      all three
#   bash scripts/test.sh --quick              the release build, then the unit tests,
#                                             layering, shellcheck and a smoke set
#                                             (ctest -L quick)
#   bash scripts/test.sh --asan-only          one stage (--normal-only, --fuzz-only)
#   bash scripts/test.sh --asan-only -R rdzv  arguments after the stage go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
stages=(normal asan fuzz)
case "${1:-}" in
  --quick) stages=(quick); shift ;;
  --normal-only) stages=(normal); shift ;;
  --asan-only) stages=(asan); shift ;;
  --fuzz-only) stages=(fuzz); shift ;;
esac
jobs=${TEST_JOBS:-$(($(nproc) * 4))}
bash scripts/install-deps.sh test
# shellcheck source=scripts/cmake-env.sh
source scripts/cmake-env.sh

quick_stage() {
  bash scripts/build.sh || return 1
  (cd "${BUILD_DIR:-build}" && ctest -j"$jobs" --output-on-failure --timeout 120 -L quick "$@")
}

# First line of a sanitizer report and the first stack frame in dlaunch's own code.
report_summary() {
  local what where
  what=$(grep -m1 -oE '(ERROR: [A-Za-z]+Sanitizer: [a-z-]+|runtime error: .*)' "$1" || true)
  where=$(grep -m1 -oE '(base|envmap|rendezvous|launcher|tests)/[A-Za-z0-9_/]*\.(cpp|hpp):[0-9]+' "$1" || true)
  printf '%s at %s' "${what:-a sanitizer report}" "${where:-?}"
}

# Sanitizer reports go to files (a test may swallow a dying dlaunch's stderr, or
# expect the exit code 1 that a sanitizer would also give; exitcode=86 sets them
# apart too), one directory per test: tests/sanitizers/per-test-reports.sh,
# which the sanitized build puts in front of every test, points log_path into
# $DLAUNCH_SANITIZER_REPORTS/<test>/. So the tests run in parallel here too.
# ctest's bound for a test is 600 s there, not 300: beside the fuzzers' build on
# 2 cores the unit tests (53 s alone) took over 300 s on 2026-11-26.
# The sanitized tree: configured and built (the build's output goes to stdout).
asan_build() {
  local dir=${ASAN_BUILD_DIR:-build-asan}
  cmake -S . -B "$dir" -DDLAUNCH_SANITIZE=ON -DCMAKE_BUILD_TYPE=Sanitize >/dev/null || return 1
  # ASAN_BUILD_TARGETS: build only these (e.g. "dlaunch", then run with -LE unit).
  # By default what the tests run (tests/CMakeLists.txt): not bench/.
  local targets=(--target dlaunch_test_programs)
  if [[ -n "${ASAN_BUILD_TARGETS:-}" ]]; then read -r -a targets <<<"--target $ASAN_BUILD_TARGETS"; fi
  cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
}

asan_stage() {
  local dir=${ASAN_BUILD_DIR:-build-asan}
  # (Called under `||`, where set -e is off: each step checks itself.)
  if [[ -z ${ASAN_BUILT:-} ]]; then
    asan_build || return 1
  fi
  local reports=$dir/sanitizer-reports
  [[ $reports == /* ]] || reports=$PWD/$reports
  rm -rf "$reports"
  mkdir -p "$reports"
  local common="exitcode=86:log_exe_name=1:print_stacktrace=1"
  local supp=$PWD/tests/sanitizers/lsan.supp
  local names name failed=0 n rc=0
  names=$(cd "$dir" && ctest -N "$@" | sed -nE 's/^ *Test +#[0-9]+: +([^ ]+)$/\1/p')
  (cd "$dir" &&
    ASAN_OPTIONS="$common:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
    UBSAN_OPTIONS="$common:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
    LSAN_OPTIONS="suppressions=$supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
    DLAUNCH_SANITIZED=1 DLAUNCH_SANITIZER_REPORTS=$reports \
    ctest -j"$jobs" --output-on-failure --timeout 600 "$@") >"$reports/ctest.log" 2>&1 || rc=$?
  # ctest lists the tests that failed (by number:name) for --rerun-failed.
  local failed_list=$dir/Testing/Temporary/LastTestsFailed.log
  ((rc == 0)) || [[ -s $failed_list ]] || { tail -n 40 "$reports/ctest.log"; return 1; }
  for name in $names; do
    n=$(find "$reports/$name" -name 'report.*' 2>/dev/null | wc -l)
    if ((n > 0)); then
      failed=1
      printf 'asan %-28s FAILED: %d sanitizer report(s), first: %s\n' "$name" "$n" \
        "$(report_summary "$(find "$reports/$name" -name 'report.*' | sort | head -1)")"
    elif ((rc != 0)) && grep -q "^[0-9]*:$name\$" "$failed_list"; then
      failed=1
      printf 'asan %-28s FAILED (no sanitizer report); its output:\n' "$name"
      # Its result line in ctest's log and the output --output-on-failure put under it.
      awk -v t="$name" '/^ *[0-9]+\/[0-9]+ Test +#/ {p = ($4 == t)} p' "$reports/ctest.log" |
        tail -n 40 | sed 's/^/    /'
    else
      printf 'asan %-28s ok\n' "$name"
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
times=()
# record STEP RC SECONDS [NOTE]: a step's line now and in the summary at the end.
record() {
  local line
  line=$(printf 'test.sh: %-12s %s in %ds%s' "$1" "$( (($2 == 0)) && echo passed || echo FAILED)" "$3" "${4:+ $4}")
  echo "$line"
  times+=("$line")
  (($2 == 0)) || status=1
}

# The background builds: the sanitized tree, then the fuzzers, one after the
# other at nice 10 in a process group of their own (stopped if this script is).
# Each writes its output to bg/NAME.log and "RC SECONDS" to bg/NAME.done.
bg=${BUILD_DIR:-build}/test-background
bg_pid=
start_background_builds() {
  rm -rf "$bg"
  mkdir -p "$bg"
  set -m
  (
    for step in asan fuzz; do
      t=$SECONDS
      rc=0
      case $step in
        asan) nice -n 10 bash -c "$(declare -f asan_build); asan_build" >"$bg/$step.log" 2>&1 || rc=$? ;;
        fuzz) FUZZ_BUILD_ONLY=1 nice -n 10 bash scripts/fuzz.sh >"$bg/$step.log" 2>&1 || rc=$? ;;
      esac
      # Written whole, then renamed: the waiter reads it as soon as it exists.
      echo "$rc $((SECONDS - t))" >"$bg/$step.done.tmp"
      mv "$bg/$step.done.tmp" "$bg/$step.done"
    done
  ) </dev/null &
  bg_pid=$!
  set +m
  trap '[[ -z $bg_pid ]] || kill -- -"$bg_pid" 2>/dev/null || true' EXIT
}
# Waits for background step NAME, records it, and returns its status.
wait_background() {
  local rc secs
  while [[ ! -e $bg/$1.done ]] && kill -0 "$bg_pid" 2>/dev/null; do sleep 1; done
  read -r rc secs <"$bg/$1.done" 2>/dev/null || { rc=1 secs=0; }
  record "$1-build" "$rc" "$secs" "(in the background)"
  ((rc == 0)) || tail -n 40 "$bg/$1.log"
  return "$rc"
}

background=0
if [[ ${stages[*]} == "normal asan fuzz" ]]; then background=1; fi
for stage in "${stages[@]}"; do
  start=$SECONDS
  rc=0
  case $stage in
    quick) quick_stage "$@" || rc=$? ;;
    normal)
      bash scripts/build.sh || rc=$?
      record build "$rc" $((SECONDS - start))
      ((background == 0)) || start_background_builds
      start=$SECONDS
      if ((rc == 0)); then
        (cd "${BUILD_DIR:-build}" && ctest -j"$jobs" --output-on-failure --timeout 300 "$@") || rc=$?
      fi
      ;;
    asan)
      if ((background)); then
        wait_background asan || rc=$?
        start=$SECONDS
        ((rc != 0)) || ASAN_BUILT=1 asan_stage "$@" || rc=$?
      else
        asan_stage "$@" || rc=$?
      fi
      ;;
    fuzz)
      if ((background)); then
        wait_background fuzz || rc=$?
        bg_pid=  # ended: its process group id may be reused
        start=$SECONDS
        ((rc != 0)) || FUZZ_NO_BUILD=1 FUZZ_SECONDS=${FUZZ_SECONDS:-15} bash scripts/fuzz.sh || rc=$?
      else
        FUZZ_SECONDS=${FUZZ_SECONDS:-15} bash scripts/fuzz.sh || rc=$?
      fi
      ;;
  esac
  record "$stage" "$rc" $((SECONDS - start))
done
# Each step's time again, together at the end of a long log.
printf '\n'
printf '%s\n' "${times[@]}" "test.sh: $( ((status == 0)) && echo passed || echo FAILED) in ${SECONDS}s (ctest -j$jobs)"
exit "$status"
