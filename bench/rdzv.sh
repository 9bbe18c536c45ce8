#!/usr/bin/env bash
# dlaunch rendezvous benchmark: many agents joining one coordinator,
# the load generator, torchrun's c10d rendezvous beside dlaunch's, and how fast a
# failure on one node stops the workers of another. Everything on 127.0.0.1.
#
#   bench/rdzv.sh [PATH/TO/dlaunch [PATH/TO/rdzv_load]]   (default: build/dlaunch,
#                                                          and bench/rdzv_load beside it)
#
# BENCH_REPS (default 5) repetitions per dlaunch measurement, BENCH_TORCH_REPS
# (default 1) for torchrun, whose 16 agents take seconds of CPU each.
# BENCH_RDZV_SIZES (default "64 256 1024") agent counts for the scale rows,
# BENCH_COLD=1 a cold run: caches dropped before every floor and run (root),
# BENCH_LOAD_N (default 10000) simulated agents for the load generator.
# Medians are reported. Prints a markdown table and writes the same to
# bench/rdzv_results.md. Builds nothing.
#
# What is measured:
# - scale: N real dlaunch agents (`--nnodes N --nproc-per-node 1 -- true`), N-1
#   with is_host=0 started first and then one with `--rdzv-conf is_host=1` (it
#   hosts the coordinator, under GNU time for its peak RSS), all from this shell
#   with `&`: at scale agents start before their host, and wait for it. The time
#   runs from before the first start until the last agent has exited. The floor
#   row is this shell starting N `true` the same way, which no launcher can beat.
#   A second floor starts N `env true`: two programs per unit, the least any
#   launcher that execs its worker can cost; the target is 2.5 times that floor,
#   at every size, in every rep (each rep against its own floor). Every floor
#   and run starts on a settled machine: after the processes of the run before
#   (their watchdogs and run directories included) are gone, which otherwise
#   falls on the next floor and flatters the ratio.
#   BENCH_BASELINE=PATH runs the same rows with another dlaunch binary in the
#   same reps, side by side (e.g. the build before a change), in the first
#   BENCH_BASELINE_REPS (default 1) of them.
# - a waiting agent: one agent with no host (`join_timeout=5`), its CPU time over
#   its life (getrusage, in microseconds), in percent of one core.
# - load generator: rdzv_load N (see bench/rdzv_load.cpp), once hosting the
#   coordinator itself (one thread for coordinator and agents), once against a
#   stand-alone `dlaunch coordinator` in its own process (its VmHWM is its peak RSS,
#   and its growth over the run divided by N the bytes an agent), at BENCH_LOAD_N and
#   at the most the hard fd limit allows (at most 19,000); then `rdzv_load
#   --no-sockets` with BENCH_NOSOCK_N (default 100000) and a tenth of it, pinned
#   to one core: the coordinator's machine and codec with no sockets.
# - torchrun 1.13 with `--rdzv_backend c10d`, N agents the same way, beside dlaunch
#   at the same N; the ratio is torchrun / dlaunch.
# - failure propagation: 2 agents ("nodes" A and B) with 2 workers each; on A local
#   rank 0 writes $EPOCHREALTIME and exits 1 after 0.5 s, all others sleep 60 s.
#   Measured up to B's dlaunch exiting, which happens after it reaped its workers,
#   so the value is an upper bound on "last worker on B gone". Once with A hosting
#   the coordinator, once with B hosting it.
# - recovery: bench/recovery.sh (a lost node in an elastic job and with a spare,
#   a health check that keeps a node out), its rows added to this table;
#   BENCH_RECOVERY=0 leaves it out.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
DLAUNCH=${1:-$REPO/build/dlaunch}
REPS=${BENCH_REPS:-5}
TORCH_REPS=${BENCH_TORCH_REPS:-1}
SIZES=${BENCH_RDZV_SIZES:-64 256 1024}
LOAD_N=${BENCH_LOAD_N:-10000}
PY=/usr/bin/python3
TORCHRUN=${TORCHRUN311:-$REPO/../shared/tools/torchrun311.py}
RESULTS=${BENCH_RESULTS:-$HERE/rdzv_results.md}
SCALE_TARGET_RATIO=2.5  # the targets: every size within 2.5 x the two-program floor in every rep,
                        # 10,000 simulated < 2 s, failure propagation < 200 ms (median),
WAIT_TARGET_PCT=1       # an agent waiting for its host under 1% of a core
LOAD_TARGET_N=10000
LOAD_TARGET_S=2
LOAD_EP_TARGET_S=1         # 10,000 against `dlaunch coordinator` < 1 s,
LOAD_BIG_TARGET_S=2        # 19,000 < 2 s, each at most 2 KiB an agent (VmHWM growth),
LOAD_KIB_TARGET=2          # 100,000 with no sockets < 3 s on one core, 2 KiB an agent
NOSOCK_N=${BENCH_NOSOCK_N:-100000}
NOSOCK_TARGET_S=3
FAIL_TARGET_MS=200

die() { echo "bench: $*" >&2; exit 1; }
note() { echo "bench: $*" >&2; }

[[ -x $DLAUNCH ]] || die "dlaunch binary '$DLAUNCH' not found; build it first (cmake --build build --target dlaunch)"
DLAUNCH=$(cd "$(dirname "$DLAUNCH")" && pwd)/$(basename "$DLAUNCH")
RDZV_LOAD=${2:-${RDZV_LOAD:-$(dirname "$DLAUNCH")/bench/rdzv_load}}
BASELINE=${BENCH_BASELINE:-}
BASE_REPS=${BENCH_BASELINE_REPS:-1}  # a baseline that spins can take minutes a rep
[[ -z $BASELINE || -x $BASELINE ]] || die "BENCH_BASELINE '$BASELINE' is not an executable"
[[ -x $RDZV_LOAD ]] || die "rdzv_load '$RDZV_LOAD' not found; build it (cmake --build build --target rdzv_load) or pass its path second"
[[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time) is missing"
command -v ss >/dev/null || die "ss (iproute2) is missing"
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPS must be a positive number, got '$REPS'"
[[ $TORCH_REPS =~ ^[0-9]+$ ]] || die "BENCH_TORCH_REPS must be a number, got '$TORCH_REPS'"
[[ $LOAD_N =~ ^[1-9][0-9]*$ ]] || die "BENCH_LOAD_N must be a positive number, got '$LOAD_N'"
for n in $SIZES; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "BENCH_RDZV_SIZES: '$n' is not a positive number"; done
HAVE_TORCHRUN=1; [[ -x $PY && -f $TORCHRUN && $TORCH_REPS -gt 0 ]] || HAVE_TORCHRUN=0
COLD=${BENCH_COLD:-0}
[[ $COLD == 0 || $COLD == 1 ]] || die "BENCH_COLD must be 0 or 1, got '$COLD'"
# perf stat counts the scale rows' task-clock where the kernel lets it.
HAVE_PERF=0
command -v perf >/dev/null && perf stat -x, -e task-clock -o /dev/null -- true 2>/dev/null && HAVE_PERF=1
THP=$(sed -nE 's/.*\[(.*)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)

# 1024 agents: the hosting dlaunch holds a socket per agent, and the in-process
# load generator two per simulated agent (20,000 + slack for 10,000). As root the
# hard limit can be raised; otherwise take what there is and rdzv_load says if N
# does not fit.
ulimit -Hn 65536 2>/dev/null
ulimit -Sn "$(ulimit -Hn)" 2>/dev/null

T=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-rdzv-bench-XXXXXX") || die "mktemp -d failed"
BG=()   # processes started here that do not carry $T in their command line
cleanup() {
  local pids
  # shellcheck disable=SC2086
  ((${#BG[@]})) && kill -KILL "${BG[@]}" 2>/dev/null
  # Anything else still running from this bench has $T in its command line.
  pids=$(pgrep -f -- "$T" 2>/dev/null | grep -vx "$$")
  # shellcheck disable=SC2086
  [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
  rm -rf -- "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export OMP_NUM_THREADS=1
unset DLAUNCH_RDZV_TOKEN   # loopback: no token, no warning, the same for every run
ln -s "$(type -P true)" "$T/true"     # workers carry $T in their command line,
ln -s "$(type -P sleep)" "$T/sleep"   # and so do the agents that start them
ln -s "$(type -P env)" "$T/env"

# The two runs that start N processes, each in a fresh shell of its own: in one
# long-lived shell every round of 1,024 `&` ran slower than the one before (7.5
# s, 15.8 s, 18.4 s for the same floor), which made the floor of late reps
# three times what it is. A shell of its own also lets `perf stat` count it.
# floor_body.sh N [PROGRAM...]: starts N `true` (or PROGRAM... true) with `&`,
# waits, prints the seconds.
cat >"$T/floor_body.sh" <<'BODY'
n=$1
shift
t0=$EPOCHREALTIME
pids=()
for ((k = 0; k < n; k++)); do "$@" "$T/true" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.6f", b-a}'
BODY
# scale_body.sh N BINARY PORT TAG: N-1 agents, then the hosting one under GNU
# time (its peak RSS into $T/rss); prints "start end failures" once all exited.
cat >"$T/scale_body.sh" <<'BODY'
n=$1 bin=$2 port=$3 tag=$4
common=(--nnodes "$n" --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "$tag")
t0=$EPOCHREALTIME
pids=()
for ((k = 1; k < n; k++)); do
  "$bin" "${common[@]}" --rdzv-conf is_host=0,join_timeout=120 -- "$T/true" >/dev/null 2>>"$T/agents.err" &
  pids+=($!)
done
/usr/bin/time -f %M -o "$T/rss" "$bin" "${common[@]}" --rdzv-conf is_host=1,join_timeout=120 -- "$T/true" \
  >/dev/null 2>"$T/host.err" &
pids+=($!)
# Killing the dog's sleep (not the dog) ends it quietly and kills nothing.
( "$T/sleep" 180 && kill -KILL "${pids[@]}" ) 2>/dev/null &
dog=$!
fails=0
for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
pkill -TERM -P "$dog" 2>/dev/null
wait "$dog" 2>/dev/null
echo "$t0 $EPOCHREALTIME $fails"
BODY
export T

now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.6f", b-a}'; }
median() {
  (($#)) || { echo nan; return; }
  printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{ if (NR%2) print v[(NR+1)/2]; else printf "%.6f\n", (v[NR/2]+v[NR/2+1])/2 }'
}
fmt() { awk -v v="$1" -v f="$2" 'BEGIN{ if (v=="nan" || v=="") print "n/a"; else printf f, v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a=="nan"||b=="nan"||a==""||b==""||b+0==0) print "nan"; else printf "%.6f", a/b }'; }
kib_to_mib() { awk -v k="$1" 'BEGIN{ if (k=="nan" || k=="") print "nan"; else printf "%.2f", k/1024 }'; }
verdict() {
  awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN{
    if (v=="nan" || v=="") { print "n/a"; exit }
    ok = (op=="<=") ? v<=t : (op==">=") ? v>=t : (op==">") ? v>t : v<t
    print ok ? "PASS" : "MISS" }'
}
# must V OP T: verdict for a row with a target, where a run that failed or timed
# out (V nan or "timeout") is a MISS, not n/a.
must() { if [[ $1 == timeout || $1 == nan || -z $1 ]]; then echo MISS; else verdict "$@"; fi; }
# all_ok NOTE V OP T: MISS when NOTE says some reps did not complete, else must.
all_ok() { if [[ -n $1 ]]; then echo MISS; else shift; must "$@"; fi; }
# lfmt V: seconds of a load-generator row.
lfmt() { if [[ $1 == timeout ]]; then echo "> $LOAD_TIMEOUT s (timed out)"; else fmt "$1" '%.3f s'; fi; }
ERRORS=()
err_head() { head -c 300 "$1" 2>/dev/null | tr '\n' ' '; }

# free_port: a loopback TCP port nobody listens on, outside the ephemeral range
# (32768+) that the agents' own connections draw from.
free_port() {
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + RANDOM % 12000))
    [[ -z $(ss -Htan "sport = :$p" 2>/dev/null) ]] && { echo "$p"; return 0; }
  done
  die "no free port found in 20000-31999"
}

# wait_all LIMIT PID...: waits for every PID (children of this shell); SIGKILLs
# those still running after LIMIT seconds. Sets FAILS to how many exited non-zero.
FAILS=0
wait_all() {
  local limit=$1 p dog
  shift
  # Killing the dog's sleep (not the dog) ends it quietly and kills nothing.
  ( "$T/sleep" "$limit" && kill -KILL "$@" ) 2>/dev/null &
  dog=$!
  FAILS=0
  for p in "$@"; do wait "$p" || FAILS=$((FAILS + 1)); done
  pkill -TERM -P "$dog" 2>/dev/null
  wait "$dog" 2>/dev/null
  return 0
}

# wait_listen PORT: until something listens on 127.0.0.1:PORT (at most 10 s).
wait_listen() {
  local i
  for ((i = 0; i < 1000; i++)); do
    [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]] && return 0
    "$T/sleep" 0.01
  done
  return 1
}

# The runs below set OUT (and OUT_RSS) rather than print, so that they run in
# this shell: the agents are its children and ERRORS+= is kept.

# settle: waits (at most 30 s) until nothing started from $T runs any more: the
# agents' watchdogs are not this shell's children and outlive wait_all briefly.
settle() {
  local i
  for ((i = 0; i < 300; i++)); do
    pgrep -f -- "$T/" 2>/dev/null | grep -vqx "$$" || return 0
    "$T/sleep" 0.1
  done
  note "processes of an earlier run still there after 30 s"
}

# A cold run (BENCH_COLD=1) drops the page cache, dentries and inodes before
# every floor and every run, as on a freshly started machine: `sync; echo 3 >
# /proc/sys/vm/drop_caches` (root). The THP setting is recorded in the header.
cold() {
  [[ $COLD == 1 ]] || return 0
  sync
  echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || die "BENCH_COLD=1: cannot write /proc/sys/vm/drop_caches (root only)"
}

# counted NAME CMD...: runs CMD after `cold`, under `perf stat` where perf can
# count (task-clock of CMD and everything it starts, orphans included; the
# watchdogs outlive their agents), writing $T/NAME.perf; prints CMD's output.
counted() {
  local name=$1
  shift
  cold
  rm -f "$T/$name.perf"
  if ((HAVE_PERF)); then
    perf stat -x, -e task-clock -o "$T/$name.perf" -- "$@"
  else
    "$@"
  fi
}
# task_ms NAME: the task-clock in ms of the last `counted NAME`, or nan.
task_ms() {
  awk -F, '$3 == "task-clock" || $3 ~ /^task-clock/ {printf "%.1f", $1; found=1} END {if (!found) print "nan"}' \
    "$T/$1.perf" 2>/dev/null || echo nan
}

# floor_run N [PROGRAM...]: N `true` (or PROGRAM... true) started with `&` from
# a fresh shell (floor_body.sh); OUT = seconds, TASK_MS = their task-clock.
floor_run() {
  local n=$1
  shift
  settle
  OUT=$(counted "floor" bash "$T/floor_body.sh" "$n" "$@")
  TASK_MS=$(task_ms floor)
}

# scale_run N TAG [BINARY]: N dlaunch agents, the hosting one started last
# (scale_body.sh); OUT = seconds, OUT_RSS = the host's peak RSS in KiB, both
# empty (and an error recorded) on failure; TASK_MS = their task-clock.
scale_run() {
  local n=$1 tag=$2 bin=${3:-$DLAUNCH} t0 t1 port
  port=$(free_port)
  OUT="" OUT_RSS=""
  : >"$T/agents.err"
  settle
  # In a fresh shell (see floor_run), which reports "start end failures".
  t0="" t1="" FAILS=""
  counted scale bash "$T/scale_body.sh" "$n" "$bin" "$port" "$tag" >"$T/scale.out"
  read -r t0 t1 FAILS <"$T/scale.out"
  TASK_MS=$(task_ms scale)
  [[ -n $t1 ]] || FAILS=$n  # the subshell died before it reported
  if ((FAILS)); then
    ERRORS+=("scale N=$n ($bin): $FAILS of $n agents exited non-zero: $(err_head "$T/host.err") $(err_head "$T/agents.err")")
    return 0
  fi
  OUT=$(elapsed "$t0" "$t1")
  OUT_RSS=$(grep -E '^[0-9]+$' "$T/rss" | tail -n 1)
}

# wait_cpu BINARY: one agent whose host never comes (join_timeout=5); OUT = its
# CPU time (user + system) in percent of its wall time.
wait_cpu() {
  local port
  port=$(free_port)
  OUT=""
  [[ -x $PY ]] || { OUT=nan; return; }
  # GNU time counts in 10 ms steps, too coarse for a few ms in 5 s: getrusage.
  OUT=$("$PY" -c '
import resource, subprocess, sys, time
t = time.monotonic()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wall = time.monotonic() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.3f" % ((r.ru_utime + r.ru_stime) * 100 / wall))
' "$1" --nnodes 2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id wait --rdzv-conf is_host=0,join_timeout=5 -- "$T/true")
}

# torch_run N TAG: N torchrun agents with the c10d rendezvous; OUT = seconds.
# Torch 1.13 on loopback: without is_host every agent finds that the endpoint is
# its own address (_matches_machine_hostname), tries to bind the TCPStore, and all
# but one log "The server socket has failed to bind ... Address already in use"
# before falling back to a client (c10d_rendezvous_backend._create_tcp_store). That
# works, but is_host=1 on the first and 0 on the rest is deterministic and quiet,
# and mirrors how dlaunch is run above.
torch_run() {
  local n=$1 tag=$2 k t0 t1 port pids=() common
  port=$(free_port)
  common=(--nnodes "$n" --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port"
          --rdzv_id "$tag" --monitor_interval 0.1)
  OUT=""
  : >"$T/torch.err"
  t0=$(now)
  for ((k = 0; k < n; k++)); do
    "$PY" "$TORCHRUN" "${common[@]}" --rdzv_conf "is_host=$((k == 0 ? 1 : 0))" --no_python "$T/true" \
      >/dev/null 2>>"$T/torch.err" &
    pids+=($!)
  done
  wait_all 300 "${pids[@]}"
  t1=$(now)
  if ((FAILS)); then
    ERRORS+=("torchrun c10d N=$n: $FAILS of $n agents exited non-zero: $(tail -c 300 "$T/torch.err" | tr '\n' ' ')")
    return 0
  fi
  OUT=$(elapsed "$t0" "$t1")
}

# How a program's file came into the page cache changes what its start costs.
# A file written in large writes (cp, cat, an installer) sits in 64 KiB folios,
# which exec's faults map more cheaply; the linker writes dlaunch in small ones,
# and a program read back by exec's own faults, as the floor's env, true and
# libc are, is in 4 KiB folios too. The same binary started about 8 % faster
# as a fresh copy, and copies had flattered the baselines of earlier runs
# (bench/profile/agent.md). So every dlaunch measured here starts from the same
# state: its files dropped from the page cache (written back first), then read
# back by exec's faults, like the floor's programs.
evict() {
  local f
  sync
  for f in "$@"; do
    [[ -f $f ]] && dd if="$f" iflag=nocache count=0 status=none 2>/dev/null
  done
  return 0
}
evict "$DLAUNCH" "$(dirname "$DLAUNCH")/dlaunch-watch" \
  ${BASELINE:+"$BASELINE" "$(dirname "$BASELINE")/dlaunch-watch"}

BENCH_START=$(now)
LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg)
# Warm the page cache and the loader (a cold run drops them before each run anyway).
if [[ $COLD != 1 ]]; then
  for bin in "$DLAUNCH" ${BASELINE:+"$BASELINE"}; do
    timeout 30 "$bin" --nproc-per-node 1 -- "$T/true" >/dev/null 2>&1
  done
fi

# --- 1. Scale: N real agents, one coordinator -------------------------------------
# A row with a target counts every rep: when one of them failed, the value is
# the median of those that completed, marked "(k of REPS)", and the row is a MISS.
declare -A SCALE_S SCALE_RSS FLOOR_S FLOOR2_S OK_SCALE BASE_S OK_BASE WORST2 BASE2 TASK_S TASK_F2 TASK_B
# shellcheck disable=SC2086  # a list of numbers, split on purpose
ALL_SIZES=$(printf '%s\n' 8 16 $SIZES | sort -nu | tr '\n' ' ')
for n in $ALL_SIZES; do
  note "scale: $n agents, $REPS reps$([[ -n $BASELINE ]] && echo ", and the baseline beside")"
  secs=() rss=() fl=() fl2=() base=() r2=() b2=() tk=() tk2=() tkb=()
  for ((i = 0; i < REPS; i++)); do
    floor_run "$n"; fl+=("$OUT")
    floor_run "$n" "$T/env"; fl2+=("$OUT"); f2=$OUT; tk2+=("$TASK_MS")
    scale_run "$n" "scale-$n-$i"
    [[ -n $OUT ]] && tk+=("$TASK_MS")
    [[ -n $OUT ]] && secs+=("$OUT") && r2+=("$(ratio "$OUT" "$f2")")  # each rep against its own floor
    [[ -n $OUT_RSS ]] && rss+=("$OUT_RSS")
    [[ -n $OUT ]] && OK_SCALE[$n]=$((${OK_SCALE[$n]:-0} + 1))
    if [[ -n $BASELINE ]] && ((i < BASE_REPS)); then
      scale_run "$n" "base-$n-$i" "$BASELINE"
      [[ -n $OUT ]] && base+=("$OUT") && b2+=("$(ratio "$OUT" "$f2")") && OK_BASE[$n]=$((${OK_BASE[$n]:-0} + 1))
      [[ -n $OUT ]] && tkb+=("$TASK_MS")
    fi
  done
  # Every rep's ratio, for the spread the medians and the worst rep hide.
  note "scale: $n agents, each rep / its two-program floor:$( ((${#r2[@]})) && printf ' %.2f' "${r2[@]}")$( ((${#b2[@]})) && printf '; the baseline:' && printf ' %.2f' "${b2[@]}")"
  TASK_S[$n]=$(median "${tk[@]}")
  TASK_F2[$n]=$(median "${tk2[@]}")
  TASK_B[$n]=$(median "${tkb[@]}")
  WORST2[$n]=$( ((${#r2[@]})) && printf '%s\n' "${r2[@]}" | sort -g | tail -n 1 || echo nan)
  BASE2[$n]=$(median "${b2[@]}")
  SCALE_S[$n]=$(median "${secs[@]}")
  SCALE_RSS[$n]=$(kib_to_mib "$(median "${rss[@]}")")
  FLOOR_S[$n]=$(median "${fl[@]}")
  FLOOR2_S[$n]=$(median "${fl2[@]}")
  BASE_S[$n]=$(median "${base[@]}")
done
note "a waiting agent's CPU"
wait_cpu "$DLAUNCH"; WAIT_PCT=$OUT
WAIT_BASE_PCT=nan
[[ -n $BASELINE ]] && { wait_cpu "$BASELINE"; WAIT_BASE_PCT=$OUT; }

# --- 2. torchrun c10d at 8 and 16 ----------------------------------------------------
declare -A TORCH_S
for n in 8 16; do
  TORCH_S[$n]=nan
  ((HAVE_TORCHRUN)) || continue
  note "torchrun c10d: $n agents, $TORCH_REPS reps"
  secs=()
  for ((i = 0; i < TORCH_REPS; i++)); do
    torch_run "$n" "torch-$n-$i"
    [[ -n $OUT ]] && secs+=("$OUT")
  done
  TORCH_S[$n]=$(median "${secs[@]}")
done

# --- 3. Load generator: simulated agents from one process ----------------------------
# In-process, rdzv_load holds both ends of every connection: 2 fds per agent. Where
# the hard fd limit cannot be raised (a container without CAP_SYS_RESOURCE), N is
# cut to the most that fits and the row says so. Against `dlaunch coordinator` each
# process needs one fd per agent, so N = BENCH_LOAD_N runs there.
# A run that does not finish within LOAD_TIMEOUT counts as "> LOAD_TIMEOUT s" and
# that mode is not repeated.
LOAD_TIMEOUT=${BENCH_LOAD_TIMEOUT:-60}
LOAD_SMALL=${BENCH_LOAD_SMALL:-1000 2000}
max_n=$("$RDZV_LOAD" --max-n 2>/dev/null)
[[ $max_n =~ ^[0-9]+$ ]] || max_n=$LOAD_N
LOAD_IN_N=$((LOAD_N < max_n ? LOAD_N : max_n))
# load_run VAR TIMEDOUT_VAR N [ARGS...]: one rdzv_load run; appends its seconds= to
# VAR, or sets TIMEDOUT_VAR=1 when it timed out, or records an error.
load_run() {
  local -n acc=$1 tout=$2
  local n=$3 out rc
  shift 3
  # rdzv_load's own --timeout cannot fire while its one thread is busy inside the
  # coordinator, so the outer timeout (rc 124, or 137 after -k) counts as one too.
  out=$(timeout -k 5 $((LOAD_TIMEOUT + 30)) "$RDZV_LOAD" "$n" --timeout "$LOAD_TIMEOUT" "$@" 2>"$T/load.err")
  rc=$?
  if ((rc == 0)); then
    acc+=("$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' <<<"$out")")
  elif ((rc == 124 || rc == 137)) || grep -q "timed out" "$T/load.err"; then
    # shellcheck disable=SC2034  # a nameref: sets the caller's flag
    tout=1
  else
    ERRORS+=("rdzv_load $n $*: $(tail -c 300 "$T/load.err" | tr '\n' ' ')")
  fi
}
declare -A L_SMALL
for n in $LOAD_SMALL; do
  note "load generator: $n simulated agents in-process, $REPS reps"
  secs=() tmo=0
  for ((i = 0; i < REPS && !tmo; i++)); do load_run secs tmo "$n"; done
  L_SMALL[$n]=$(median "${secs[@]}")
  ((tmo)) && L_SMALL[$n]=timeout
done
note "load generator: $LOAD_IN_N simulated agents in-process, $LOAD_N against dlaunch coordinator," \
  "up to $REPS reps each (${LOAD_TIMEOUT} s timeout)"
L_IN=() L_EP=() L_EP_RSS=() L_EP_B=() TMO_IN=0 TMO_EP=0
for ((i = 0; i < REPS && !TMO_IN; i++)); do load_run L_IN TMO_IN "$LOAD_IN_N"; done
# A loopback coordinator without a token would use this user's loopback token;
# the bench gives both sides its own.
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/token")
# ep_rows VAR RSS_VAR BYTES_VAR TIMEDOUT_VAR N: REPS runs of N agents against a
# fresh `dlaunch coordinator` each; its peak RSS (VmHWM) and its growth over the
# run, in bytes an agent.
ep_rows() {
  local -n secs_=$1 rss_=$2 bytes_=$3 tmo_=$4
  local n=$5 i port coord rss0 hwm ok_
  for ((i = 0; i < REPS && !tmo_; i++)); do
    port=$(free_port)
    "$DLAUNCH" coordinator --listen "127.0.0.1:$port" --rdzv-token-file "$T/token" >/dev/null 2>"$T/coord.err" &
    coord=$!
    BG+=("$coord")
    if wait_listen "$port"; then
      rss0=$(awk '/^VmRSS:/{print $2}' "/proc/$coord/status" 2>/dev/null)
      ok_=${#secs_[@]}
      load_run secs_ tmo_ "$n" --endpoint "127.0.0.1:$port" --run-id "load-$i" --token "$(cat "$T/token")"
      hwm=$(awk '/^VmHWM:/{print $2}' "/proc/$coord/status" 2>/dev/null)
      # Only a run that assigned every agent says what an agent costs.
      if ((${#secs_[@]} > ok_)) && [[ -n $rss0 && -n $hwm ]]; then
        rss_+=("$hwm")
        bytes_+=("$(((hwm - rss0) * 1024 / n))")
      fi
    else
      ERRORS+=("dlaunch coordinator on 127.0.0.1:$port did not listen within 10 s: $(err_head "$T/coord.err")")
    fi
    kill -TERM "$coord" 2>/dev/null
    wait_all 10 "$coord"
    BG=()
  done
}
ep_rows L_EP L_EP_RSS L_EP_B TMO_EP "$LOAD_N"
m_load_in=$(median "${L_IN[@]}")
m_load_ep=$(median "${L_EP[@]}")
((TMO_IN)) && m_load_in=timeout
((TMO_EP)) && m_load_ep=timeout
m_load_ep_rss=$(kib_to_mib "$(median "${L_EP_RSS[@]}")")
m_load_ep_b=$(median "${L_EP_B[@]}")
# The most agents one coordinator and one rdzv_load can hold at the hard fd limit
# (each needs a descriptor an agent, rdzv_load 64 more), at most 19,000.
LOAD_BIG_N=$(($(ulimit -Hn) - 1000))
((LOAD_BIG_N > 19000)) && LOAD_BIG_N=19000
L_BIG=() L_BIG_RSS=() L_BIG_B=() TMO_BIG=0
if ((LOAD_BIG_N > LOAD_N)); then
  note "load generator: $LOAD_BIG_N simulated agents against dlaunch coordinator, up to $REPS reps"
  ep_rows L_BIG L_BIG_RSS L_BIG_B TMO_BIG "$LOAD_BIG_N"
fi
m_load_big=$(median "${L_BIG[@]}")
((TMO_BIG)) && m_load_big=timeout
m_load_big_b=$(median "${L_BIG_B[@]}")

# --- 3b. The coordinator's machine and codec alone ---------------------------------
# rdzv_load --no-sockets N (bench/rdzv_load.cpp): N simulated agents through the
# Coordinator and codec, no sockets, pinned to one core; and N/10 the same way, so
# that the ratio shows whether a tenfold N costs tenfold.
NS_S=() NS_B=() NS10_S=()
note "load generator: $NOSOCK_N agents with no sockets (and $((NOSOCK_N / 10))), $REPS reps"
pin=(); command -v taskset >/dev/null && pin=(taskset -c 0)
for ((i = 0; i < REPS; i++)); do
  for n in "$NOSOCK_N" $((NOSOCK_N / 10)); do
    if out=$(timeout -k 5 120 "${pin[@]}" "$RDZV_LOAD" --no-sockets "$n" 2>"$T/nosock.err"); then
      s_=$(sed -n 's/^seconds=\([0-9.]*\) .*/\1/p' <<<"$out")
      if ((n == NOSOCK_N)); then NS_S+=("$s_"); NS_B+=("$(sed -n 's/.* bytes_per_agent=\([0-9-]*\) .*/\1/p' <<<"$out")"); else NS10_S+=("$s_"); fi
    else
      ERRORS+=("rdzv_load --no-sockets $n: $(err_head "$T/nosock.err")")
    fi
  done
done
m_ns=$(median "${NS_S[@]}")
m_ns_b=$(median "${NS_B[@]}")
m_ns10=$(median "${NS10_S[@]}")

# --- 4. Failure propagation across nodes ----------------------------------------------
note "failure propagation: $REPS reps each way"
cat >"$T/fail.sh" <<EOF
if [ "\$1" = A ] && [ "\$LOCAL_RANK" = 0 ]; then
  "$T/sleep" 0.5
  printf '%s\n' "\$EPOCHREALTIME" >"$T/failed_at"
  exit 1
fi
exec "$T/sleep" 60
EOF
# fail_run HOST(A|B) TAG: OUT = milliseconds from A's worker exiting to B's dlaunch exiting.
fail_run() {
  local host=$1 tag=$2 port pa pb common
  port=$(free_port)
  common=(--nnodes 2 --nproc-per-node 2 --no-tag --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "$tag")
  OUT=""
  rm -f "$T/failed_at" "$T/b_end"
  rm -f "$T/a_rc"
  ( "$DLAUNCH" "${common[@]}" --rdzv-conf "is_host=$([[ $host == A ]] && echo 1 || echo 0)" \
      -- bash "$T/fail.sh" A >/dev/null 2>"$T/a.err"
    echo "$?" >"$T/a_rc" ) &
  pa=$!
  ( "$DLAUNCH" "${common[@]}" --rdzv-conf "is_host=$([[ $host == B ]] && echo 1 || echo 0)" \
      -- bash "$T/fail.sh" B >/dev/null 2>"$T/b.err"
    echo "$? $EPOCHREALTIME" >"$T/b_end" ) &
  pb=$!
  wait_all 90 "$pa" "$pb"
  local brc bend arc
  read -r brc bend <"$T/b_end" 2>/dev/null
  read -r arc <"$T/a_rc" 2>/dev/null
  # A exits with its worker's code 1; B must stop with a failure of its own, not
  # crash: 1..127. A run where either dlaunch crashed does not count.
  if [[ -s $T/failed_at && ${arc:-} == 1 && -n ${brc:-} && $brc -ge 1 && $brc -le 127 ]]; then
    OUT=$(awk -v s="$(cat "$T/failed_at")" -v e="$bend" 'BEGIN{ printf "%.3f", (e - s) * 1000 }')
  else
    [[ ${brc:-0} -ge 128 ]] && brc="$brc (killed by signal $((brc - 128)))"
    [[ ${arc:-0} -ge 128 ]] && arc="$arc (killed by signal $((arc - 128)))"
    ERRORS+=("failure propagation ($host hosts): node A's dlaunch exited ${arc:-?}, node B's ${brc:-?}, failed_at $([[ -s $T/failed_at ]] && echo written || echo missing): $(err_head "$T/a.err") $(err_head "$T/b.err")")
  fi
}
F_A=() F_B=() m_fail_a_note="" m_fail_b_note=""
for ((i = 0; i < REPS; i++)); do
  fail_run A "fail-a-$i"; [[ -n $OUT ]] && F_A+=("$OUT")
  fail_run B "fail-b-$i"; [[ -n $OUT ]] && F_B+=("$OUT")
done
m_fail_a=$(median "${F_A[@]}")
((${#F_A[@]} < REPS)) && m_fail_a_note=" (${#F_A[@]} of $REPS runs completed)"
m_fail_b=$(median "${F_B[@]}")
((${#F_B[@]} < REPS)) && m_fail_b_note=" (${#F_B[@]} of $REPS runs completed)"

# --- 5. Recovery from a lost node (bench/recovery.sh) -----------------------------------
# Its table's rows go into this one, its errors into this run's.
REC_ROWS=()
if [[ ${BENCH_RECOVERY:-1} != 0 ]]; then
  note "recovery: bench/recovery.sh"
  BENCH_RECOVERY_RESULTS=$T/recovery.md bash "$HERE/recovery.sh" "$DLAUNCH" >/dev/null 2>"$T/recovery.err" ||
    [[ -s $T/recovery.md ]] || ERRORS+=("bench/recovery.sh: $(err_head "$T/recovery.err")")
  while IFS= read -r line; do
    case $line in
      "| measurement "* | "| --- "*) ;;
      "| "*) REC_ROWS+=("$line") ;;
      "- "*) ERRORS+=("recovery: ${line#- }") ;;
    esac
  done <"$T/recovery.md" 2>/dev/null
fi

# --- Table ------------------------------------------------------------------------------
TOTAL_S=$(elapsed "$BENCH_START" "$(now)")
row() { printf '| %s | %s | %s | %s |\n' "$@"; }
table() {
  local n target res note_
  echo "# dlaunch rendezvous benchmark"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(getconf _NPROCESSORS_ONLN) cores, $(uname -sr); medians of $REPS reps" \
    "($TORCH_REPS for torchrun); run took $(fmt "$TOTAL_S" '%.0f') s;" \
    "$("$DLAUNCH" --version 2>&1 | head -n 1); load average at the start $LOAD_AT_START;" \
    "$( ((COLD)) && echo "a cold run (BENCH_COLD=1: page cache, dentries and inodes dropped before every floor and run)" || echo "a warm run, dlaunch's files read back by exec's faults")," \
    "transparent huge pages: ${THP:-unknown}. Produced by \`bench/rdzv.sh\`."
  echo
  row "measurement" "value" "target" "result"
  row "---" "---:" "---" "---"
  for n in 8 16; do
    row "rendezvous, $n agents × \`true\`, start → all exit: dlaunch" "$(fmt "${SCALE_S[$n]}" '%.3f s')" "" ""
    row "rendezvous, $n agents: torchrun 1.13 c10d (\`--monitor_interval 0.1\`)" "$(fmt "${TORCH_S[$n]}" '%.3f s')" "" ""
    row "rendezvous, $n agents: torchrun / dlaunch" "$(fmt "$(ratio "${TORCH_S[$n]}" "${SCALE_S[$n]}")" '%.1f')" "" ""
  done
  for n in $SIZES; do
    target="" res=""
    note_=""
    ((${OK_SCALE[$n]:-0} < REPS)) && note_=" (${OK_SCALE[$n]:-0} of $REPS runs completed)"
    target="≤ $SCALE_TARGET_RATIO × two-program floor, $REPS of $REPS"
    res=$(all_ok "$note_" "${WORST2[$n]}" '<=' "$SCALE_TARGET_RATIO")
    row "rendezvous scale, $n dlaunch agents × \`true\` (host started last), start → all exit" "$(fmt "${SCALE_S[$n]}" '%.3f s')$note_" "" ""
    row "… floor: this shell starting $n × \`true\` (\`&\` + \`wait\`)" "$(fmt "${FLOOR_S[$n]}" '%.3f s')" "" ""
    row "… dlaunch / floor" "$(fmt "$(ratio "${SCALE_S[$n]}" "${FLOOR_S[$n]}")" '%.2f')" "" ""
    row "… two-program floor: $n × \`env true\` (what any launcher that execs its worker costs at least)" "$(fmt "${FLOOR2_S[$n]}" '%.3f s')" "" ""
    row "… two-program floor / floor" "$(fmt "$(ratio "${FLOOR2_S[$n]}" "${FLOOR_S[$n]}")" '%.2f')" "" ""
    row "… dlaunch / two-program floor" "$(fmt "$(ratio "${SCALE_S[$n]}" "${FLOOR2_S[$n]}")" '%.2f')" "" ""
    row "… the worst rep's dlaunch / its two-program floor" "$(fmt "${WORST2[$n]}" '%.2f')" "$target" "$res"
    row "… peak RSS of the hosting dlaunch (GNU time %M)" "$(fmt "${SCALE_RSS[$n]}" '%.2f MiB')" "" ""
    if ((HAVE_PERF)); then
      row "… task-clock (perf stat, every process of the run): dlaunch, per agent" "$(fmt "$(awk -v t="${TASK_S[$n]}" -v n="$n" 'BEGIN{if (t=="nan") print "nan"; else print t/n}')" '%.2f ms')" "" ""
      row "… task-clock: two-program floor, per unit" "$(fmt "$(awk -v t="${TASK_F2[$n]}" -v n="$n" 'BEGIN{if (t=="nan") print "nan"; else print t/n}')" '%.2f ms')" "" ""
      row "… task-clock: dlaunch / two-program floor" "$(fmt "$(ratio "${TASK_S[$n]}" "${TASK_F2[$n]}")" '%.2f')" "" ""
    fi
    if [[ -n $BASELINE ]]; then
      note_=""
      note_=" (${OK_BASE[$n]:-0} of $((BASE_REPS < REPS ? BASE_REPS : REPS)) runs completed)"
      row "… the same with the baseline $(basename "$BASELINE")" "$(fmt "${BASE_S[$n]}" '%.3f s')$note_" "" ""
      row "… baseline / floor" "$(fmt "$(ratio "${BASE_S[$n]}" "${FLOOR_S[$n]}")" '%.2f')" "" ""
      row "… baseline / two-program floor (median of its reps, each against its own)" "$(fmt "${BASE2[$n]}" '%.2f')" "" ""
      ((HAVE_PERF)) && row "… task-clock: baseline / two-program floor" "$(fmt "$(ratio "${TASK_B[$n]}" "${TASK_F2[$n]}")" '%.2f')" "" ""
    fi
  done
  row "an agent waiting for its host (5 s): CPU in % of one core" "$(fmt "$WAIT_PCT" '%.2f %%')" "< $WAIT_TARGET_PCT %" "$(must "$WAIT_PCT" '<' "$WAIT_TARGET_PCT")"
  [[ -n $BASELINE ]] && row "… the same with the baseline" "$(fmt "$WAIT_BASE_PCT" '%.2f %%')" "" ""
  for n in $LOAD_SMALL; do
    row "load generator: $n simulated agents assigned, coordinator in the same thread" "$(lfmt "${L_SMALL[$n]}")" "" ""
  done
  target="" res=""
  if ((LOAD_IN_N == LOAD_TARGET_N)); then target="< $LOAD_TARGET_S s"; res=$(must "$m_load_in" '<' "$LOAD_TARGET_S"); fi
  row "load generator: $LOAD_IN_N simulated agents assigned, coordinator in the same thread$( ((LOAD_IN_N < LOAD_N)) && echo " (the most the fd limit allows in one process)")" "$(lfmt "$m_load_in")" "$target" "$res"
  target="" res=""
  if ((LOAD_N == LOAD_TARGET_N)); then target="< $LOAD_EP_TARGET_S s"; res=$(must "$m_load_ep" '<' "$LOAD_EP_TARGET_S"); fi
  row "load generator: $LOAD_N simulated agents assigned by \`dlaunch coordinator\` (own process)" "$(lfmt "$m_load_ep")" "$target" "$res"
  row "… peak RSS of that \`dlaunch coordinator\` (VmHWM)" "$(fmt "$m_load_ep_rss" '%.1f MiB')" "" ""
  row "… its growth over the run, an agent" "$(fmt "$m_load_ep_b" '%.0f B')" "≤ $LOAD_KIB_TARGET KiB" "$(must "$m_load_ep_b" '<=' $((LOAD_KIB_TARGET * 1024)))"
  if ((LOAD_BIG_N > LOAD_N)); then
    row "load generator: $LOAD_BIG_N simulated agents assigned by \`dlaunch coordinator\` (the most the fd limit allows)" "$(lfmt "$m_load_big")" "< $LOAD_BIG_TARGET_S s" "$(must "$m_load_big" '<' "$LOAD_BIG_TARGET_S")"
    row "… its growth over the run, an agent" "$(fmt "$m_load_big_b" '%.0f B')" "≤ $LOAD_KIB_TARGET KiB" "$(must "$m_load_big_b" '<=' $((LOAD_KIB_TARGET * 1024)))"
  fi
  target="" res=""
  if ((NOSOCK_N == 100000)); then target="< $NOSOCK_TARGET_S s"; res=$(must "$m_ns" '<' "$NOSOCK_TARGET_S"); fi
  row "$NOSOCK_N agents through the coordinator's machine and codec, no sockets, one core (\`rdzv_load --no-sockets\`)" "$(fmt "$m_ns" '%.3f s')" "$target" "$res"
  row "… peak memory an agent (VmHWM growth)" "$(fmt "$m_ns_b" '%.0f B')" "≤ $LOAD_KIB_TARGET KiB" "$(must "$m_ns_b" '<=' $((LOAD_KIB_TARGET * 1024)))"
  row "… $((NOSOCK_N / 10)) the same way; ratio (10 for linear)" "$(fmt "$m_ns10" '%.3f s'); $(fmt "$(ratio "$m_ns" "$m_ns10")" '%.1f')" "" ""
  row "failure propagation: worker on node A exits 1 → node B's dlaunch exits (A hosts)" "$(fmt "$m_fail_a" '%.1f ms')$m_fail_a_note" "< $FAIL_TARGET_MS ms" "$(all_ok "$m_fail_a_note" "$m_fail_a" '<' "$FAIL_TARGET_MS")"
  row "failure propagation: the same, B hosts" "$(fmt "$m_fail_b" '%.1f ms')$m_fail_b_note" "< $FAIL_TARGET_MS ms" "$(all_ok "$m_fail_b_note" "$m_fail_b" '<' "$FAIL_TARGET_MS")"
  ((${#REC_ROWS[@]})) && printf '%s\n' "${REC_ROWS[@]}"
  if ((${#ERRORS[@]})); then
    echo
    echo "Errors during the run:"
    printf -- '- %s\n' "${ERRORS[@]}"
  fi
  ((HAVE_TORCHRUN)) || echo "- torchrun ($TORCHRUN) not found or BENCH_TORCH_REPS=0: its rows are n/a"
  return 0
}
table | tee "$RESULTS"
