#!/usr/bin/env bash
# The hot-spare recovery, many times in a row, on loopback: 4 agents with
# --nnodes 4 --spares 1 and a fifth waiting as the spare; SIGKILL of one
# non-host agent's dlaunch mid-run (a, b, c in turn). A run recovered when the
# next generation runs on 4 nodes, each survivor's worker kept its RANK, the
# spare's worker took the lost node's RANK, no third generation ran, every
# dlaunch but the killed one exited 0, and nothing was left running. Anything
# else counts as a loss of the job; its logs are kept.
#
#   bench/spare_loop.sh [--runs N] [PATH/TO/dlaunch]   (default: 50 runs, build/dlaunch)
#
# Prints "N of N recovered", or the failed runs with what went wrong and where
# their logs are (BENCH_KEEP_DIR, default a new directory under $TMPDIR), and
# exits 1. BENCH_RECOVERY_WAIT_S (default 30): the most one step of a run (a
# generation starting, the spare waiting, the job ending) may take. The
# rendezvous settings are bench/recovery_lib.sh's
# (heartbeat_timeout=3,last_call_timeout=1). The test suite runs this case once
# (tests/integration/test_node_recovery.sh); this loop is not part of it.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/recovery_lib.sh
source "$HERE/recovery_lib.sh"

RUNS=50
DL=""
while (($#)); do
  case $1 in
    --runs)
      (($# >= 2)) || rec_die "--runs needs a number"
      RUNS=$2
      shift 2
      ;;
    --runs=*) RUNS=${1#--runs=}; shift ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) rec_die "unknown option '$1' (expected --runs N)" ;;
    *)
      [[ -z $DL ]] || rec_die "one dlaunch path only, got '$DL' and '$1'"
      DL=$1
      shift
      ;;
  esac
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || rec_die "--runs: expected a positive number, got '$RUNS'"
rec_init "${DL:-$HERE/../build/dlaunch}"
KEEP=${BENCH_KEEP_DIR:-}

victims=(a b c)
ok=0 failures=() spare_s=()
t0=$EPOCHREALTIME
for ((r = 1; r <= RUNS; r++)); do
  v=${victims[$(((r - 1) % 3))]}
  rec_spare_case "run$r" "$v"
  if [[ -z $CASE_ERR ]]; then
    ok=$((ok + 1))
    spare_s+=("$CASE_SPARE_S")
    rec_note "run $r of $RUNS: $v killed, recovered (spare running after $(awk -v s="$CASE_SPARE_S" 'BEGIN{printf "%.3f", s}') s)"
  else
    [[ -n $KEEP ]] || KEEP=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-spare-loop-XXXXXX")
    mkdir -p "$KEEP" && cp -r "$RUN" "$KEEP/"
    failures+=("run $r ($v killed): $CASE_ERR; logs in $KEEP/run$r")
    rec_note "run $r of $RUNS: $v killed, NOT recovered: $CASE_ERR"
  fi
done
wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b - a}')
if ((ok)); then
  med=$(printf '%s\n' "${spare_s[@]}" | sort -g | awk '{v[NR]=$1} END{ if (NR%2) m=v[(NR+1)/2]; else m=(v[NR/2]+v[NR/2+1])/2; printf "%.3f s (%.3f–%.3f)", m, v[1], v[NR] }')
  echo "SIGKILL → the spare's worker running: median $med over the $ok recovered runs; $wall s in all"
fi
echo "$ok of $RUNS recovered"
if ((${#failures[@]})); then
  printf -- '- %s\n' "${failures[@]}"
  exit 1
fi
