#!/usr/bin/env bash
# How often straggler detection is right, with real workers on this machine:
#
# - slow data: tests/integration/test_straggler.sh's case a (4 ranks of the DDP
#   job tests/integration/tools/straggler_train.py, rank 2 loading its batches
#   0.2 s slower, --straggler-window 2), N runs. Right when the first straggler
#   event names rank 2 at load_batch within 3 windows of the first in which
#   the ranks met (tests/integration/tools/straggler_verdict.py).
#   Goal: at least N - 1 of N.
# - clean: the same job with no slow rank, N runs of 4 windows of training,
#   with the test's --straggler-window 4 for this case. Right when no
#   straggler is named. Goal: no false report in N.
# - clean-2s: the same with --straggler-window 2 (20 samples a rank): how
#   often chance names a rank of a clean job in windows that short. Goal: no
#   false report in N.
# - CPU contention: 2 ranks of the same job with no sleep at all
#   (STRAGGLER_IO_S=0, STRAGGLER_DEVICE_S=0, and STRAGGLER_AUGMENT=1000: each
#   batch takes about 50 ms of CPU work in augment()), rank 0 pinned to CPU 0,
#   rank 1 pinned to CPU 1 beside a busy loop pinned there (taskset). Right
#   when rank 1 is named within 5 windows of the first, whatever frame.
#   Reported as a count; its goal is every run. The work is in the data
#   loading, not the model: time in backward counts as waiting at the
#   synchronisation point, so a rank slower at its own backward would hide
#   there.
#
#   bench/straggler.sh [--runs N] [--cases data,clean,clean-2s,contention] [DLAUNCH]
#                                            (default: 20 runs of each, build/dlaunch)
#
# Prints a markdown table (one row a case: right runs of N, and what the
# wrong ones saw) and writes it to BENCH_STRAGGLER_RESULTS when set;
# bench/run.sh runs this and adds the rows to its own table. BENCH_KEEP_DIR:
# where a wrong run's events and output are kept (default: a new directory
# under $TMPDIR). Exits 1 when a case misses its goal.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
PY=/usr/bin/python3
TOOLS=$REPO/tests/integration/tools
RUNS=20
CASES=data,clean,clean-2s,contention
DL=""
die() { echo "bench: $*" >&2; exit 1; }
note() { echo "bench: $*" >&2; }
while (($#)); do
  case $1 in
    --runs)
      (($# >= 2)) || die "--runs needs a number"
      RUNS=$2
      shift 2
      ;;
    --runs=*) RUNS=${1#--runs=}; shift ;;
    --cases)
      (($# >= 2)) || die "--cases needs a list"
      CASES=$2
      shift 2
      ;;
    --cases=*) CASES=${1#--cases=}; shift ;;
    -h | --help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (expected --runs N or --cases LIST)" ;;
    *)
      [[ -z $DL ]] || die "one dlaunch path only, got '$DL' and '$1'"
      DL=$1
      shift
      ;;
  esac
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs: expected a positive number, got '$RUNS'"
DLAUNCH=${DL:-$REPO/build/dlaunch}
[[ -x $DLAUNCH ]] || die "dlaunch binary '$DLAUNCH' not found; build it first (cmake --build build --target dlaunch)"
DLAUNCH=$(cd "$(dirname "$DLAUNCH")" && pwd)/$(basename "$DLAUNCH")
"$PY" -c 'import torch.distributed' 2>/dev/null || die "$PY cannot import torch (python3-torch)"
KEEP=${BENCH_KEEP_DIR:-}

T=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-straggler-bench-XXXXXX") || die "mktemp -d failed"
cleanup() {
  local pids
  pids=$(pgrep -f -- "$T" 2>/dev/null | grep -vx "$$")
  # shellcheck disable=SC2086  # one pid a word
  [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
  rm -rf -- "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export OMP_NUM_THREADS=1
# The workers carry $T in their command line (a copy of the job), so that the
# cleanup finds them.
cp "$TOOLS/straggler_train.py" "$TOOLS/straggler_data.py" "$T/"
cat >"$T/spin.sh" <<'EOF'
while :; do :; done
EOF
# Rank 1 on CPU 1, every other rank on CPU 0.
cat >"$T/pinned.sh" <<EOF
cpu=0
[ "\$RANK" = 1 ] && cpu=1
exec taskset -c "\$cpu" "$PY" "$T/straggler_train.py"
EOF

windows() { grep -c '"event":"straggler_window"' "$1" 2>/dev/null; }
training() { [[ $(grep -c '^\[[0-9]*\]: rank [0-9] of [0-9] training' "$1" 2>/dev/null) -ge $2 ]]; }

# wait_until SECONDS CMD...: polls CMD every 0.1 s; 1 when SECONDS pass first.
wait_until() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < end)) || return 1
    sleep 0.1
  done
}

# one_run CASE RUN: runs the case once in $T/CASE.RUN/; sets SAID (the
# verdict's line) and RIGHT (1 or 0).
one_run() {
  local c=$1 r=$2 dir=$T/$1.$2 pid from nproc=4 env=() expect=() window=2
  mkdir -p "$dir"
  case $c in
    data) env=(STRAGGLER_SLOW_RANKS=2) expect=(named --ranks 2 --scope rank --frame load_batch --within 3) ;;
    clean) env=(STRAGGLER_SLOW_RANKS=) window=4 ;;
    clean-2s) env=(STRAGGLER_SLOW_RANKS=) ;;
    contention) nproc=2 env=(STRAGGLER_IO_S=0 STRAGGLER_DEVICE_S=0 STRAGGLER_AUGMENT=1000) expect=(named --ranks 1 --within 5) ;;
  esac
  local cmd=("$PY" "$T/straggler_train.py")
  [[ $c == contention ]] && cmd=(sh "$T/pinned.sh")
  local spin=
  if [[ $c == contention ]]; then
    taskset -c 1 sh "$T/spin.sh" &
    spin=$!
  fi
  env "${env[@]}" timeout -k 5 180 "$DLAUNCH" --nproc-per-node "$nproc" --straggler-window "$window" \
    --events "$dir/events.jsonl" -- "${cmd[@]}" >"$dir/out" 2>"$dir/err" </dev/null &
  pid=$!
  if [[ $c == clean* ]]; then
    wait_until 120 training "$dir/out" 4
    from=$(windows "$dir/events.jsonl")
    expect=(none --windows $((from + 4)))
    wait_until 90 "$PY" "$TOOLS/straggler_verdict.py" "$dir/events.jsonl" "${expect[@]}" --decided
  else
    wait_until 120 "$PY" "$TOOLS/straggler_verdict.py" "$dir/events.jsonl" "${expect[@]}" --decided
  fi
  pkill -TERM -P "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if [[ -n $spin ]]; then
    kill -KILL "$spin" 2>/dev/null
    wait "$spin" 2>/dev/null
  fi
  if SAID=$("$PY" "$TOOLS/straggler_verdict.py" "$dir/events.jsonl" "${expect[@]}"); then
    RIGHT=1
  else
    RIGHT=0
    [[ -n $KEEP ]] || KEEP=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-straggler-bench-keep-XXXXXX")
    cp -r "$dir" "$KEEP/"
  fi
  rm -rf -- "$dir"
}

declare -A OK=() WRONG=()
cases=()
IFS=, read -ra wanted <<<"$CASES"
for c in "${wanted[@]}"; do
  case $c in
    data | clean | clean-2s) cases+=("$c") ;;
    contention)
      if command -v taskset >/dev/null && (($(getconf _NPROCESSORS_ONLN) >= 2)); then
        cases+=(contention)
      else
        note "CPU contention: needs taskset (util-linux) and 2 CPUs; left out"
      fi
      ;;
    *) die "--cases: expected data, clean, clean-2s or contention, got '$c'" ;;
  esac
done
t0=$SECONDS
for c in "${cases[@]}"; do
  OK[$c]=0 WRONG[$c]=""
  for ((r = 1; r <= RUNS; r++)); do
    one_run "$c" "$r"
    if ((RIGHT)); then
      OK[$c]=$((OK[$c] + 1))
    else
      WRONG[$c]+="; run $r: $SAID"
    fi
    note "$c, run $r of $RUNS: $( ((RIGHT)) && echo right || echo WRONG): $SAID"
  done
done

row() { printf '| %s | %s | %s | %s |\n' "$@"; }
judge() { (($1)) && echo PASS || echo MISS; }
table() {
  echo "# dlaunch straggler detection"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(getconf _NPROCESSORS_ONLN) cores, $(uname -sr); $RUNS runs a case;" \
    "run took $((SECONDS - t0)) s; $("$DLAUNCH" --version 2>&1 | head -n 1). Produced by \`bench/straggler.sh\`."
  echo
  row "measurement" "value" "target" "result"
  row "---" "---:" "---" "---"
  if [[ -n ${OK[data]:-} ]]; then
    row "straggler: rank 2 of 4 loads its batches 0.2 s slower (\`--straggler-window 2\`) → rank 2 named at load_batch within 3 windows" \
      "${OK[data]} of $RUNS" "≥ $((RUNS - 1)) of $RUNS" "$(judge $((OK[data] >= RUNS - 1)))"
  fi
  if [[ -n ${OK[clean]:-} ]]; then
    row "straggler: 4 clean ranks, 4 windows of 4 s of training → no straggler named" \
      "$((RUNS - OK[clean])) false of $RUNS" "0 of $RUNS" "$(judge $((OK[clean] == RUNS)))"
  fi
  if [[ -n ${OK[clean-2s]:-} ]]; then
    row "straggler: the same, windows of 2 s (20 samples a rank)" \
      "$((RUNS - OK[clean-2s])) false of $RUNS" "0 of $RUNS" "$(judge $((OK[clean-2s] == RUNS)))"
  fi
  if [[ -n ${OK[contention]:-} ]]; then
    row "straggler: 2 ranks, no sleep, rank 1 shares its CPU with a busy loop (taskset) → rank 1 named within 5 windows" \
      "${OK[contention]} of $RUNS" "$RUNS of $RUNS" "$(judge $((OK[contention] == RUNS)))"
  fi
  local c
  for c in "${cases[@]}"; do
    [[ -z ${WRONG[$c]} ]] || echo "- $c, wrong runs${WRONG[$c]} (kept in $KEEP)"
  done
}
if [[ -n ${BENCH_STRAGGLER_RESULTS:-} ]]; then
  table | tee "$BENCH_STRAGGLER_RESULTS"
else
  table
fi
((${OK[data]:-$RUNS} >= RUNS - 1 && ${OK[clean]:-$RUNS} == RUNS && ${OK[clean-2s]:-$RUNS} == RUNS &&
  ${OK[contention]:-$RUNS} == RUNS))
