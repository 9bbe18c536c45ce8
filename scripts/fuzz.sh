#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang into build-fuzz/ (or
# $FUZZ_BUILD_DIR) and runs each for SECONDS (the first argument when it is a
# number, else FUZZ_SECONDS, default 60; scripts/test.sh gives each 15),
# starting from its seed corpus, FUZZ_JOBS targets (default: one per core) at a
# time. A crash, a sanitizer report, an input slower than FUZZ_TIMEOUT seconds,
# one allocation over FUZZ_MALLOC_MB or a process over FUZZ_RSS_MB fails.
# Prints one line per target; exits 1 if any failed.
#
#   bash scripts/fuzz.sh 600                        all targets, 600 s each
#   FUZZ_SECONDS=10 bash scripts/fuzz.sh            all targets, 10 s each
#   bash scripts/fuzz.sh 300 codec                   one, for 5 minutes
#   bash scripts/fuzz.sh codec hostlist              only these
#   FUZZ_NO_BUILD=1 bash scripts/fuzz.sh             run what is built
#   FUZZ_BUILD_ONLY=1 bash scripts/fuzz.sh           build, do not run
#
# The input that failed is kept as build-fuzz/findings/<target>/crash-* (or
# timeout-*, oom-*, leak-*); rerun it with build-fuzz/fuzz/fuzz_<target> FILE.
# New inputs the fuzzer finds go to build-fuzz/corpus/<target>/, not into git.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cmake-env.sh
source scripts/cmake-env.sh
build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
timeout_s=${FUZZ_TIMEOUT:-10}
malloc_mb=${FUZZ_MALLOC_MB:-512}
rss_mb=${FUZZ_RSS_MB:-2048}
all=(codec hostfile hostlist cli tf_config job_spec samples multi_prog programs)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

if [[ -z "${FUZZ_NO_BUILD:-}" ]]; then
  # Quiet when it works; the compiler's or linker's words when it does not.
  mkdir -p "$build_dir"
  if ! { cmake -S . -B "$build_dir" -DDLAUNCH_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Sanitize &&
    cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"; } >"$build_dir/build.log" 2>&1; then
    grep -E -B2 -A8 'error|FAILED' "$build_dir/build.log" | head -n 60 >&2
    echo "fuzz.sh: the fuzzers' build failed; all of it in $build_dir/build.log" >&2
    exit 1
  fi
fi
[[ -z "${FUZZ_BUILD_ONLY:-}" ]] || exit 0

# Sanitizer findings are fatal and symbolized; leaks count as findings.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# fuzz_one TARGET: runs one target; its line goes to logs/TARGET.result.
fuzz_one() {
  local t=$1 bin seeds corpus findings log rc runs cov artifact what where
  bin=$build_dir/fuzz/fuzz_$t
  seeds=tests/fuzz/corpus/$t
  corpus=$build_dir/corpus/$t
  findings=$build_dir/findings/$t
  log=$build_dir/logs/$t.log
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  rm -f "$findings"/*
  # The first corpus directory receives new inputs; the seeds stay read-only.
  rc=0
  "$bin" -max_total_time="$seconds" -timeout="$timeout_s" -malloc_limit_mb="$malloc_mb" \
    -rss_limit_mb="$rss_mb" -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$findings/" "$corpus" "$seeds" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  artifact=$(find "$findings" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | head -1)
  if ((rc == 0)) && [[ -z "$artifact" ]]; then
    printf 'fuzz %-10s ok: %s runs in %ss, coverage %s, corpus %s\n' "$t" "${runs:-?}" "$seconds" \
      "${cov:-?}" "$(find "$corpus" -mindepth 1 -maxdepth 1 | wc -l)" >"$build_dir/logs/$t.result"
  else
    # The first line of the report says what it was (deadly signal, timeout,
    # out-of-memory, a sanitizer's error); the first frame in dlaunch's code says where.
    what=$(grep -m1 -E '^(==[0-9]+== ?ERROR|SUMMARY|.*runtime error|FUZZ_CHECK failed)' "$log" || true)
    where=$(grep -m1 -oE '(base|envmap|rendezvous|launcher)/[a-z_]+\.(cpp|hpp):[0-9]+' "$log" || true)
    printf 'fuzz %-10s FAILED (exit %s): %s at %s; input %s; log %s\n' "$t" "$rc" "${what:-see the log}" \
      "${where:-?}" "${artifact:+$findings/$artifact}" "$log" >"$build_dir/logs/$t.result"
  fi
}

# FUZZ_JOBS targets at a time (default one per core): each is one process.
parallel=${FUZZ_JOBS:-$(nproc)}
[[ $parallel =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: FUZZ_JOBS must be a positive number, not '$parallel'" >&2; exit 2; }
mkdir -p "$build_dir/logs"
for t in "${targets[@]}"; do
  rm -f "$build_dir/logs/$t.result"
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  fuzz_one "$t" &
done
wait
failed=0
for t in "${targets[@]}"; do
  if [[ -s $build_dir/logs/$t.result ]]; then
    cat "$build_dir/logs/$t.result"
    grep -q ' ok: ' "$build_dir/logs/$t.result" || failed=1
  else
    echo "fuzz $t: no result (see $build_dir/logs/$t.log)"
    failed=1
  fi
done
exit "$failed"
