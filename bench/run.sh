#!/usr/bin/env bash
# dlaunch benchmark: start-up, peak RSS, failure teardown and output throughput,
# measured side by side with the plain floor, mpirun and torchrun in one run.
#
#   bench/run.sh [PATH/TO/dlaunch]        (default: build/dlaunch)
#
# BENCH_REPS (default 7) repetitions per measurement (three times as many for
# start-up, whose row is a ratio of two 45 ms medians: seven reps moved it by
# 0.03 between runs), BENCH_TORCH_REPS (default 3)
# for torchrun, which takes seconds per run, BENCH_HOOK_PAIRS (default 100) for
# the stack hook alone. Medians are reported. It also runs bench/straggler.sh
# (BENCH_STRAGGLER_RUNS runs a case, default 20: about 12 minutes) and adds its
# rows; BENCH_STRAGGLER=0 leaves them out. Prints a
# markdown table and writes the same to bench/results.md. Builds nothing.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
DLAUNCH=${1:-$REPO/build/dlaunch}
REPS=${BENCH_REPS:-7}
TORCH_REPS=${BENCH_TORCH_REPS:-3}
PY=/usr/bin/python3
TORCHRUN=${TORCHRUN311:-$REPO/../shared/tools/torchrun311.py}
RESULTS=${BENCH_RESULTS:-$HERE/results.md}

die() { echo "bench: $*" >&2; exit 1; }
note() { echo "bench: $*" >&2; }

[[ -x $DLAUNCH ]] || die "dlaunch binary '$DLAUNCH' not found; build it first (cmake --build build --target dlaunch)"
DLAUNCH=$(cd "$(dirname "$DLAUNCH")" && pwd)/$(basename "$DLAUNCH")
[[ -x $PY ]] || die "$PY is missing"
[[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time) is missing"
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPS must be a positive number, got '$REPS'"
[[ $TORCH_REPS =~ ^[0-9]+$ ]] || die "BENCH_TORCH_REPS must be a number, got '$TORCH_REPS'"
HAVE_MPI=1; command -v mpirun >/dev/null || HAVE_MPI=0
HAVE_TORCHRUN=1; [[ -f $TORCHRUN && $TORCH_REPS -gt 0 ]] || HAVE_TORCHRUN=0

T=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-bench-XXXXXX") || die "mktemp -d failed"
cleanup() {
  # Anything still running from this bench has $T in its command line.
  local pids
  pids=$(pgrep -f -- "$T" 2>/dev/null | grep -vx "$$")
  # shellcheck disable=SC2086
  [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
  rm -rf -- "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export OMP_NUM_THREADS=1  # the same for every launcher, and no notice from dlaunch
ln -s "$(command -v sleep)" "$T/sleep"   # sleeps carry $T in their command line

now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.6f", b-a}'; }
# median V...: the median of the numbers given (mean of the middle two when even).
median() {
  (($#)) || { echo nan; return; }
  printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{ if (NR%2) print v[(NR+1)/2]; else printf "%.6f\n", (v[NR/2]+v[NR/2+1])/2 }'
}
fmt() { awk -v v="$1" -v f="$2" 'BEGIN{ if (v=="nan" || v=="") print "n/a"; else printf f, v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a=="nan"||b=="nan"||a==""||b==""||b+0==0) print "nan"; else printf "%.6f", a/b }'; }
# verdict VALUE OP TARGET -> PASS / MISS / n/a
verdict() {
  awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN{
    if (v=="nan" || v=="") { print "n/a"; exit }
    ok = (op=="<=") ? v<=t : (op==">=") ? v>=t : (op==">") ? v>t : v<t
    print ok ? "PASS" : "MISS" }'
}

ERRORS=()
# run_timed VAR CMD...: runs CMD (bounded), appends its wall time to array VAR
# when it exits 0; records an error otherwise.
run_timed() {
  local -n acc=$1
  shift
  local t0 t1 rc
  t0=$(now)
  timeout -k 5 120 "$@" >/dev/null 2>"$T/last.err"
  rc=$?
  t1=$(now)
  if [[ $rc == 0 ]]; then
    acc+=("$(elapsed "$t0" "$t1")")
  else
    ERRORS+=("'$*' exited $rc: $(head -c 300 "$T/last.err" | tr '\n' ' ')")
  fi
}

floor8() {
  local i
  for i in 1 2 3 4 5 6 7 8; do "$PY" -c pass & done
  wait
}
# The floor as a launcher: a bash started the way run_timed starts every
# launcher of the table (under the same `timeout`, its output to the same
# places), running floor8's loop. The loop in this shell itself starts no
# program for the launcher and no `timeout`, about 2.5 ms of a 40 ms row on a
# machine where Python starts in 5 ms: that row is kept, for reference.
FLOOR8_BASH='for i in 1 2 3 4 5 6 7 8; do "$1" -c pass & done; wait'

BENCH_START=$(now)

# --- 1. Start-up: 8 x `python3 -c pass`, launch to exit --------------------
START_REPS=$((REPS * 3))
note "start-up: $START_REPS reps (floor, dlaunch, mpirun interleaved), $TORCH_REPS torchrun reps"
S_FLOOR=() S_SHELL=() S_DL=() S_MPI=() S_TR=() S_TRD=()
# Warm the page cache and the dynamic loader once.
floor8; timeout 60 "$DLAUNCH" --nproc-per-node 8 --no-tag -- "$PY" -c pass >/dev/null 2>&1
for ((i = 0; i < START_REPS; i++)); do
  t0=$(now); floor8; t1=$(now); S_SHELL+=("$(elapsed "$t0" "$t1")")
  run_timed S_FLOOR bash -c "$FLOOR8_BASH" floor "$PY"
  run_timed S_DL "$DLAUNCH" --nproc-per-node 8 --no-tag -- "$PY" -c pass
  ((HAVE_MPI)) && run_timed S_MPI mpirun --allow-run-as-root --oversubscribe -np 8 "$PY" -c pass
done
if ((HAVE_TORCHRUN)); then
  for ((i = 0; i < TORCH_REPS; i++)); do
    run_timed S_TR "$PY" "$TORCHRUN" --standalone --nproc_per_node 8 --monitor_interval 0.1 \
      --no_python "$PY" -c pass
    # As users run it: the default 5 s monitor interval.
    run_timed S_TRD "$PY" "$TORCHRUN" --standalone --nproc_per_node 8 --no_python "$PY" -c pass
  done
fi
m_floor=$(median "${S_FLOOR[@]}")
m_shell=$(median "${S_SHELL[@]}")
m_dl=$(median "${S_DL[@]}")
m_mpi=$(median "${S_MPI[@]}")
m_tr=$(median "${S_TR[@]}")
m_trd=$(median "${S_TRD[@]}")

# --- 1b. The stack hook alone: `python3 -c pass` with and without it ----------
# The hook as a job's workers find it (with whatever bytecode dlaunch keeps of
# it), copied out of a job; then BENCH_HOOK_PAIRS (default 100) pairs, each a
# plain run and a hooked one in alternating order, and the medians of the
# pairs' differences in wall time and in CPU time (the child's rusage).
HOOK_PAIRS=${BENCH_HOOK_PAIRS:-100}
[[ $HOOK_PAIRS =~ ^[1-9][0-9]*$ ]] || die "BENCH_HOOK_PAIRS must be a positive number, got '$HOOK_PAIRS'"
note "stack hook alone: $HOOK_PAIRS paired runs of python3 -c pass"
m_hook_wall=nan m_hook_cpu=nan
if timeout 60 "$DLAUNCH" --no-tag -- "$PY" -c 'import os, shutil, sys
shutil.copytree(os.environ["PYTHONPATH"].split(":")[0], sys.argv[1])
print(os.environ["DLAUNCH_STACKS_SIGNAL"])' "$T/hook" >"$T/hook.sig" 2>"$T/last.err"; then
  read -r m_hook_wall m_hook_cpu < <("$PY" - "$T/hook" "$(cat "$T/hook.sig")" "$HOOK_PAIRS" <<'PYEOF'
import os, statistics, sys, time
hook, sig, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.mkdir(hook + "-dumps", 0o700)
plain = dict(os.environ)
hooked = dict(plain, DLAUNCH_STACKS_DIR=hook + "-dumps", DLAUNCH_STACKS_SIGNAL=sig,
              PYTHONPATH=hook + (":" + plain["PYTHONPATH"] if plain.get("PYTHONPATH") else ""))
def run(env):
    t = time.perf_counter()
    pid = os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], env)
    _, status, ru = os.wait4(pid, 0)
    if status != 0:
        sys.exit("python3 -c pass exited with status %d" % status)
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime
run(plain), run(hooked)
wall, cpu = [], []
for i in range(n):
    p, h = (run(plain), run(hooked)) if i % 2 == 0 else reversed((run(hooked), run(plain)))
    wall.append(h[0] - p[0])
    cpu.append(h[1] - p[1])
print("%.3f %.3f" % (statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3))
PYEOF
  )
else
  ERRORS+=("the hook's copy: $(head -c 300 "$T/last.err" | tr '\n' ' ')")
fi

# --- 1c. The Python sampler's own CPU (launcher/straggler/samples.hpp) ----------
# The stack hook from the tree (what the build embeds) with its sampler at
# 100 ms, under two workers of 3 s each: a pure-Python loop that keeps the CPU
# and the GIL, and one that sleeps. The sampler's thread measures its own CPU
# time (cpu_us) and its wall time (wall_ms) into the samples file it writes at
# exit; the row is that CPU as a percentage of one core.
note "python sampler: its thread's CPU at 10 Hz, 3 s of a busy and of a sleeping worker"
m_sampler_busy=nan m_sampler_idle=nan
mkdir -p "$T/sampler-hook" "$T/sampler-dumps" && cp "$REPO/launcher/stacks/stack_hook.py" "$T/sampler-hook/sitecustomize.py"
if read -r m_sampler_busy m_sampler_idle < <("$PY" - "$T/sampler-hook" "$T/sampler-dumps" 2>"$T/last.err" <<'PYEOF'
import os, subprocess, sys
hook, dumps = sys.argv[1], sys.argv[2]
env = dict(os.environ, DLAUNCH_STACKS_DIR=dumps, DLAUNCH_SAMPLE_PERIOD_MS="100", DLAUNCH_SAMPLE_FLUSH_MS="1000",
           PYTHONPATH=hook + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
work = {"busy": "import time\nend = time.monotonic() + 3\nwhile time.monotonic() < end:\n    pass\n",
        "idle": "import time\ntime.sleep(3)\n"}
out = []
for name in ("busy", "idle"):
    p = subprocess.Popen([sys.executable, "-c", work[name]], env=env)
    p.wait()
    fields = {}
    try:
        with open("%s/%d.samples" % (dumps, p.pid)) as f:
            for line in f:
                k, _, v = line.partition(" ")
                fields[k] = v.strip()
        out.append("%.4f" % (int(fields["cpu_us"]) / 1e3 / int(fields["wall_ms"]) * 100))
    except (OSError, KeyError, ValueError, ZeroDivisionError) as e:
        sys.exit("%s worker (exit %d): no samples file read (%s)" % (name, p.returncode, e))
print(" ".join(out))
PYEOF
); then :; else
  m_sampler_busy=nan m_sampler_idle=nan
  ERRORS+=("python sampler: $(head -c 300 "$T/last.err" | tr '\n' ' ')")
fi
m_sampler_max=$(awk -v a="$m_sampler_busy" -v b="$m_sampler_idle" 'BEGIN{ if (a=="nan"||b=="nan"||a==""||b=="") print "nan"; else print (a > b ? a : b) }')

# --- 2. Peak RSS: dlaunch supervising 8 x `sleep 0.2` -------------------------
note "peak RSS: $REPS reps"
R_DL=() R_TR=()
for ((i = 0; i < REPS; i++)); do
  if timeout 60 /usr/bin/time -f %M -o "$T/rss" "$DLAUNCH" --nproc-per-node 8 --no-tag -- "$T/sleep" 0.2 \
    >/dev/null 2>"$T/last.err"; then
    R_DL+=("$(tail -n 1 "$T/rss")")
  else
    ERRORS+=("dlaunch 8 x sleep 0.2 failed: $(head -c 300 "$T/last.err" | tr '\n' ' ')")
  fi
done
if ((HAVE_TORCHRUN)); then
  for ((i = 0; i < TORCH_REPS; i++)); do
    if timeout 120 /usr/bin/time -f %M -o "$T/rss" "$PY" "$TORCHRUN" --standalone --nproc_per_node 8 \
      --monitor_interval 0.1 --no_python "$T/sleep" 0.2 >/dev/null 2>"$T/last.err"; then
      R_TR+=("$(tail -n 1 "$T/rss")")
    else
      ERRORS+=("torchrun 8 x sleep 0.2 failed: $(head -c 300 "$T/last.err" | tr '\n' ' ')")
    fi
  done
fi
# GNU time reports KiB.
m_rss_dl=$(awk -v k="$(median "${R_DL[@]}")" 'BEGIN{ if (k=="nan") print "nan"; else printf "%.2f", k/1024 }')
m_rss_tr=$(awk -v k="$(median "${R_TR[@]}")" 'BEGIN{ if (k=="nan") print "nan"; else printf "%.1f", k/1024 }')

# --- 3. Failure teardown: rank 0 fails, 7 others sleep ------------------------
# From rank 0's last timestamp to the launcher's exit as this shell sees it. That
# span holds work no launcher can skip: rank 0's shell exiting, the kernel
# ending 7 processes and this shell waking. The floor measures it in the same
# reps, interleaved: a minimal supervisor (Python, os._exit: no interpreter
# teardown) that starts the same 8 ranks in their own groups, waits for the
# first to exit, sends SIGTERM to the others' groups and reaps them. The target
# is on what dlaunch adds to that floor (bench/profile/teardown.md).
note "failure teardown: $REPS reps, each beside its floor"
cat >"$T/fail.sh" <<EOF
if [ "\$RANK" = 0 ]; then
  "$T/sleep" 0.3
  date +%s%N >"$T/failed_at"
  exit 1
fi
exec "$T/sleep" 60
EOF
cat >"$T/teardown_floor.py" <<'EOF'
import os, signal, sys
pids = []
for rank in range(8):
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        os.environ["RANK"] = str(rank)
        os.execvp("sh", ["sh", sys.argv[1]])
    pids.append(pid)
first, _ = os.wait()
for pid in pids:
    if pid != first:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
for pid in pids:
    if pid != first:
        os.waitpid(pid, 0)
os._exit(1)
EOF
# teardown_ms CMD...: runs CMD (which must exit 1) and prints the ms from rank 0's
# timestamp to CMD's exit; nothing when it did not exit 1 or wrote no timestamp.
teardown_ms() {
  rm -f "$T/failed_at"
  timeout -k 5 90 "$@" >/dev/null 2>"$T/last.err"
  local rc=$? end=$EPOCHREALTIME
  if [[ $rc == 1 && -s $T/failed_at ]]; then
    awk -v s="$(cat "$T/failed_at")" -v e="$end" 'BEGIN{ split(e, p, "."); printf "%.3f", ((p[1] - substr(s, 1, 10)) * 1e9 + (p[2] * 1000 - substr(s, 11))) / 1e6 }'
  else
    echo "teardown run: $1 exited $rc (expected 1): $(head -c 300 "$T/last.err" | tr '\n' ' ')" >&2
  fi
}
F_MS=() FF_MS=() FD_MS=()
for ((i = 0; i < REPS; i++)); do
  floor_ms=$(teardown_ms "$PY" "$T/teardown_floor.py" "$T/fail.sh" 2>>"$T/teardown.err")
  dl_ms=$(teardown_ms "$DLAUNCH" --nproc-per-node 8 --no-tag -- sh "$T/fail.sh" 2>>"$T/teardown.err")
  [[ -n $floor_ms ]] && FF_MS+=("$floor_ms")
  [[ -n $dl_ms ]] && F_MS+=("$dl_ms")
  [[ -n $floor_ms && -n $dl_ms ]] && FD_MS+=("$(awk -v a="$dl_ms" -v b="$floor_ms" 'BEGIN{printf "%.3f", a - b}')")
done
while IFS= read -r line; do ERRORS+=("$line"); done <"$T/teardown.err"
m_fail=$(median "${F_MS[@]}")
m_fail_floor=$(median "${FF_MS[@]}")
m_fail_over=$(median "${FD_MS[@]}")

# --- 4. Output throughput: N x cat of a text file, 512 MiB in all (64 MiB for one rank) ---
note "output throughput: $REPS reps of 1, 8 and 64 ranks, tagged and untagged, each beside its floor"
"$PY" - "$T/lines.txt" <<'EOF'
import sys
size = 64 << 20
with open(sys.argv[1], "w") as f:
    written, i = 0, 0
    while written < size:
        line = f"{i:09d} " + "x" * (i * 37 % 120) + "\n"
        if written + len(line) > size:
            line = "y" * (size - written - 1) + "\n"
        f.write(line)
        written += len(line)
        i += 1
EOF
FILE_BYTES=$(stat -c %s "$T/lines.txt")
# 64 ranks write an eighth of the file each (the same 512 MiB in all as 8 ranks).
head -c $((FILE_BYTES / 8)) "$T/lines.txt" >"$T/lines8.txt"
# plain_cat N FILE: N cats into one pipe, the floor. dl_cat N FILE FLAG...: the same through dlaunch.
plain_cat() {
  local i
  { for ((i = 0; i < $1; i++)); do cat "$2" & done; wait; } | cat >/dev/null
}
dl_cat() {
  local n=$1 file=$2
  shift 2
  timeout -k 5 120 "$DLAUNCH" --nproc-per-node "$n" "$@" -- cat "$file" 2>"$T/last.err" | cat >/dev/null
  return "${PIPESTATUS[0]}"
}
cat "$T/lines.txt" >/dev/null
# Each case k: OUT_N[k] ranks each write OUT_F[k] through dlaunch with the flag
# OUT_FLAG[k] (one rank is untagged unless told); the floor of its N and file
# runs beside it in each rep.
OUT_N=(8 8 1 1 64 64)
OUT_F=(lines.txt lines.txt lines.txt lines.txt lines8.txt lines8.txt)
OUT_FLAG=("" --no-tag "--tag-output=[{rank}]: " "" "" --no-tag)
declare -A O_PLAIN=()
O_DL=()
for ((i = 0; i < REPS; i++)); do
  declare -A timed=()
  for k in "${!OUT_N[@]}"; do
    n=${OUT_N[k]} f=${OUT_F[k]} flag=${OUT_FLAG[k]}
    if [[ -z ${timed[$n $f]+x} ]]; then
      timed[$n $f]=1
      t0=$(now); plain_cat "$n" "$T/$f"; t1=$(now); O_PLAIN[$n $f]+=" $(elapsed "$t0" "$t1")"
    fi
    t0=$(now); dl_cat "$n" "$T/$f" ${flag:+"$flag"}; rc=$?; t1=$(now)
    if [[ $rc == 0 ]]; then O_DL[k]+=" $(elapsed "$t0" "$t1")"; else ERRORS+=("dlaunch $n x cat $flag exited $rc"); fi
  done
  unset timed
done
# mbps N FILE SECONDS...: MB/s of N ranks each writing FILE, from the median time.
mbps() {
  local bytes=$(($(stat -c %s "$T/$2") * $1))
  shift 2
  awk -v b="$bytes" -v s="$(median "$@")" 'BEGIN{ if (s=="nan") print "nan"; else printf "%.1f", b/s/1e6 }'
}
# shellcheck disable=SC2086  # word lists of times
{
  m_out_plain=$(mbps 8 lines.txt ${O_PLAIN[8 lines.txt]})
  m_out_plain1=$(mbps 1 lines.txt ${O_PLAIN[1 lines.txt]})
  m_out_plain64=$(mbps 64 lines8.txt ${O_PLAIN[64 lines8.txt]})
  m_out_dl=$(mbps 8 lines.txt ${O_DL[0]})
  m_out_dl_nt=$(mbps 8 lines.txt ${O_DL[1]})
  m_out_dl1t=$(mbps 1 lines.txt ${O_DL[2]})
  m_out_dl1=$(mbps 1 lines.txt ${O_DL[3]})
  m_out_dl64=$(mbps 64 lines8.txt ${O_DL[4]})
  m_out_dl64_nt=$(mbps 64 lines8.txt ${O_DL[5]})
}

# --- 5. The hang watch ------------------------------------------------------------
# (a) From the silence threshold to the printed summary: 8 Python ranks print a
# line and sleep; --hang-timeout 2 --hang-action stop. The time from their last
# line to the summary's last line, less the 2 s threshold.
note "hang watch: $REPS reps of the summary latency, and a quiet job's CPU"
H_MS=()
for ((i = 0; i < REPS; i++)); do
  last_up="" summary=""
  while IFS= read -r line; do
    case $line in
      *"up"*) last_up=$EPOCHREALTIME ;;
      *"hang: full stacks in"*) summary=$EPOCHREALTIME ;;
    esac
  done < <(TMPDIR=$T timeout -k 5 60 "$DLAUNCH" --nproc-per-node 8 --hang-timeout 2 --hang-action stop -- \
             "$PY" -c 'import time; print("up", flush=True); time.sleep(60)' 2>&1 | tee "$T/hang.out")
  if [[ -n $last_up && -n $summary ]]; then
    H_MS+=("$(awk -v a="$last_up" -v b="$summary" 'BEGIN{printf "%.1f", (b - a - 2) * 1000}')")
  else
    ERRORS+=("hang watch run: no summary after the silence; it ended: $(grep -v '^\[' "$T/hang.out" | tail -n 4 | tr '\n' ' ')")
  fi
done
m_hang=$(median "${H_MS[@]}")
# (b) CPU of dlaunch per hour of a quiet 8-rank job, with the hang watch on (the
# default): its on-CPU time (schedstat, in ns) over 20 s, scaled to an hour, once
# start-up is 12 s behind it: an hour is made of the steady state, and until
# then the scans for adopted processes are still backing off from 250 ms to 4 s
# (measured from 3 s, 2026-11-26: 0.65 s an hour, against 0.28-0.31 steady).
on_cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }
"$DLAUNCH" --nproc-per-node 8 -- "$T/sleep" 40 >/dev/null 2>&1 &
q_pid=$!
sleep 12
q_a=$(on_cpu_ns "$q_pid")
sleep 20
q_b=$(on_cpu_ns "$q_pid")
kill -TERM "$q_pid" 2>/dev/null
wait "$q_pid" 2>/dev/null
m_quiet=$(awk -v a="$q_a" -v b="$q_b" 'BEGIN{ if (a == "" || b == "" || b < a) print "nan"; else printf "%.3f", (b - a) / 1e9 * 3600 / 20 }')

# --- 6. Metrics: a Prometheus scrape every second -------------------------------
# The quiet 8-rank job of 5(b) with --metrics-addr 127.0.0.1:0: dlaunch's on-CPU
# time (schedstat, ns; utime+stime from /proc/PID/stat count 10 ms ticks, too
# coarse for 2 s an hour) in windows of 10 s, alternately without a scrape and
# with GET /metrics every second on one kept-alive connection, as Prometheus
# scrapes: three of each, once the job's start-up is 12 s behind it (the scans
# for adopted processes have backed off to their quiet pace by then). Each
# window is scaled to an hour; the rows are the medians. Alternating windows
# cancel the host's drift, which one 20 s window of each did not (2026-11-26:
# 1.6 to 2.8 s an hour for one binary in five runs).
# metrics_windows PID PORT: prints "quiet scraped" (CPU s an hour) per pair of
# windows; exits non-zero when a scrape fails.
metrics_windows() {
  "$PY" - "$1" "$2" <<'PYEOF'
import glob, http.client, sys, time
pid, port = sys.argv[1], int(sys.argv[2])
def on_cpu_ns():
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        with open(path) as f:
            total += int(f.read().split()[0])
    return total
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
def scrape():
    c.request("GET", "/metrics")
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"GET /metrics: {r.status}")
scrape()  # the connection is open before the first window
for _ in range(3):
    t0, a = time.monotonic(), on_cpu_ns()
    time.sleep(10)
    t1, b = time.monotonic(), on_cpu_ns()
    for i in range(10):
        if i:
            time.sleep(1)
        scrape()
    time.sleep(1)
    t2, d = time.monotonic(), on_cpu_ns()
    print(f"{(b - a) / 1e9 * 3600 / (t1 - t0):.3f} {(d - b) / 1e9 * 3600 / (t2 - t1):.3f}")
PYEOF
}
"$DLAUNCH" --nproc-per-node 8 --metrics-addr 127.0.0.1:0 --events "$T/metrics-ev.jsonl" -- "$T/sleep" 90 >/dev/null 2>&1 &
s_pid=$!
sleep 12
s_port=$(sed -nE 's/.*"event":"metrics_listening".*"port":([0-9]+).*/\1/p' "$T/metrics-ev.jsonl" | head -n 1)
m_unscraped=nan m_scraped=nan
if [[ -n $s_port ]] && metrics_windows "$s_pid" "$s_port" >"$T/metrics-windows.txt"; then
  mapfile -t MQ < <(awk '{print $1}' "$T/metrics-windows.txt")
  mapfile -t MS < <(awk '{print $2}' "$T/metrics-windows.txt")
  m_unscraped=$(median "${MQ[@]}")
  m_scraped=$(median "${MS[@]}")
else
  ERRORS+=("metrics: no metrics_listening port, or a scrape failed")
fi
kill -TERM "$s_pid" 2>/dev/null
wait "$s_pid" 2>/dev/null

# --- 7. The native straggler sampler: one Tick over 8 ranks of 50 threads -------
# bench/proc_sample (built beside dlaunch) starts 8 processes of 50 threads, all
# asleep in a pipe read: the dearest look, which reads every thread's stat. It
# times NativeSampler::Tick beside one read of /proc/PID/stat and of one
# thread's stat, what a look costs at least per thread (medians of 500 each).
PROC_SAMPLE=${BENCH_PROC_SAMPLE:-$(dirname "$DLAUNCH")/bench/proc_sample}
m_tick=nan m_tick_thread=nan m_stat_read=nan m_task_stat_read=nan
if [[ -x $PROC_SAMPLE ]] && ps_line=$("$PROC_SAMPLE" 8 50 500); then
  ps_field() { sed -nE "s/.*(^| )$1=([0-9.]+).*/\2/p" <<<"$ps_line"; }
  m_tick=$(awk -v us="$(ps_field tick_us)" 'BEGIN{printf "%.6f", us / 1000}')
  m_tick_thread=$(ps_field per_thread_us)
  m_stat_read=$(ps_field stat_read_us)
  m_task_stat_read=$(ps_field task_stat_read_us)
else
  ERRORS+=("native sampler: $PROC_SAMPLE missing or failed (cmake --build build --target proc_sample)")
fi

# --- 7b. The straggler detector: one window of 8,192 ranks ----------------------
# bench/straggler_detect compares 8,192 ranks of 32 frames, one slow, as the
# process hosting a large job's coordinator does once a window (60 s by default).
STRAGGLER_DETECT=${BENCH_STRAGGLER_DETECT:-$(dirname "$DLAUNCH")/bench/straggler_detect}
m_detect=nan
if [[ -x $STRAGGLER_DETECT ]] && sd_line=$("$STRAGGLER_DETECT" 8192 32 5); then
  m_detect=$(sed -nE 's/.*window_ms=([0-9.]+).*/\1/p' <<<"$sd_line")
else
  ERRORS+=("straggler detector: $STRAGGLER_DETECT missing or failed (cmake --build build --target straggler_detect)")
fi

# --- 8. Straggler detection (bench/straggler.sh) ----------------------------------
# Its table's rows go into this one, its wrong runs into this run's errors.
STRAG_ROWS=()
if [[ ${BENCH_STRAGGLER:-1} != 0 ]]; then
  note "straggler detection: bench/straggler.sh --runs ${BENCH_STRAGGLER_RUNS:-20}"
  BENCH_STRAGGLER_RESULTS=$T/straggler.md bash "$HERE/straggler.sh" --runs "${BENCH_STRAGGLER_RUNS:-20}" "$DLAUNCH" \
    >/dev/null 2>"$T/straggler.err" ||
    [[ -s $T/straggler.md ]] || ERRORS+=("bench/straggler.sh: $(tail -n 3 "$T/straggler.err" | tr '\n' ' ')")
  while IFS= read -r line; do
    case $line in
      "| measurement "* | "| --- "*) ;;
      "| "*) STRAG_ROWS+=("$line") ;;
      "- "*) ERRORS+=("straggler: ${line#- }") ;;
    esac
  done <"$T/straggler.md" 2>/dev/null
fi

# --- Table ----------------------------------------------------------------------
r_dl_floor=$(ratio "$m_dl" "$m_floor")
r_tr_dl=$(ratio "$m_tr" "$m_dl")
r_trd_dl=$(ratio "$m_trd" "$m_dl")
r_mpi_dl=$(ratio "$m_mpi" "$m_dl")
r_out=$(ratio "$m_out_dl" "$m_out_plain")
TOTAL_S=$(elapsed "$BENCH_START" "$(now)")

row() { printf '| %s | %s | %s | %s |\n' "$@"; }
table() {
  echo "# dlaunch benchmark"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(getconf _NPROCESSORS_ONLN) cores, $(uname -sr); medians of $REPS reps" \
    "($START_REPS for start-up, $TORCH_REPS for torchrun); run took $(fmt "$TOTAL_S" '%.0f') s;" \
    "$("$DLAUNCH" --version 2>&1 | head -n 1). Produced by \`bench/run.sh\`."
  echo
  row "measurement" "value" "target" "result"
  row "---" "---:" "---" "---"
  row "start-up, 8 × \`python3 -c pass\`: plain floor (\`bash -c\` with \`&\` + \`wait\`, started as every launcher here is)" "$(fmt "$m_floor" '%.3f s')" "" ""
  row "… the same loop in the bench's own shell (no program started for the launcher, no \`timeout\`)" "$(fmt "$m_shell" '%.3f s')" "" ""
  row "start-up: dlaunch" "$(fmt "$m_dl" '%.3f s')" "" ""
  row "start-up: mpirun" "$(fmt "$m_mpi" '%.3f s')" "" ""
  row "start-up: torchrun 1.13, defaults (5 s monitor interval)" "$(fmt "$m_trd" '%.3f s')" "" ""
  row "start-up: torchrun 1.13 (\`--monitor_interval 0.1\`)" "$(fmt "$m_tr" '%.3f s')" "" ""
  row "start-up: dlaunch / floor" "$(fmt "$r_dl_floor" '%.2f')" "≤ 1.15" "$(verdict "$r_dl_floor" '<=' 1.15)"
  row "… dlaunch / the loop in the bench's own shell" "$(fmt "$(ratio "$m_dl" "$m_shell")" '%.2f')" "" ""
  row "start-up: the stack hook alone, per \`python3 -c pass\` (median of $HOOK_PAIRS paired differences)" \
    "$(fmt "$m_hook_wall" '%.2f ms')$([[ $m_hook_cpu == nan ]] || fmt "$m_hook_cpu" ', CPU %.2f ms')" "" ""
  row "python sampler at 10 Hz: its thread's CPU, % of a core (3 s of a busy pure-Python loop / of a sleeping worker)" \
    "$(fmt "$m_sampler_busy" '%.2f %%') / $(fmt "$m_sampler_idle" '%.2f %%')" "< 1 %" "$(verdict "$m_sampler_max" '<' 1)"
  row "start-up: torchrun (defaults) / dlaunch" "$(fmt "$r_trd_dl" '%.1f')" "≥ 20" "$(verdict "$r_trd_dl" '>=' 20)"
  row "start-up: torchrun (\`--monitor_interval 0.1\`) / dlaunch" "$(fmt "$r_tr_dl" '%.1f')" "" ""
  row "start-up: mpirun / dlaunch" "$(fmt "$r_mpi_dl" '%.2f')" "> 1" "$(verdict "$r_mpi_dl" '>' 1)"
  row "peak RSS of dlaunch (8 × \`sleep 0.2\`, GNU time %M)" "$(fmt "$m_rss_dl" '%.2f MiB')" "≤ 10 MiB" "$(verdict "$m_rss_dl" '<=' 10)"
  row "peak RSS of torchrun (same job)" "$(fmt "$m_rss_tr" '%.1f MiB')" "" ""
  row "failure teardown: rank 0 exits 1 → a minimal supervisor exits (floor; 7 ranks in \`sleep 60\`)" "$(fmt "$m_fail_floor" '%.1f ms')" "" ""
  row "failure teardown: rank 0 exits 1 → dlaunch exits (the same job)" "$(fmt "$m_fail" '%.1f ms')" "≤ 50 ms" "$(verdict "$m_fail" '<=' 50)"
  row "failure teardown: dlaunch − floor (median of paired differences)" "$(fmt "$m_fail_over" '%.1f ms')" "≤ 3 ms" "$(verdict "$m_fail_over" '<=' 3)"
  row "output: plain, 8 × \`cat\` 64 MiB into one pipe" "$(fmt "$m_out_plain" '%.0f MB/s')" "" ""
  row "output: dlaunch, 8 × \`cat\` 64 MiB, tagged \`[R]: \`" "$(fmt "$m_out_dl" '%.0f MB/s')" "" ""
  row "output: dlaunch / plain" "$(fmt "$r_out" '%.2f')" "≥ 0.7" "$(verdict "$r_out" '>=' 0.7)"
  row "output: dlaunch, 8 ranks, \`--no-tag\` / plain" "$(fmt "$(ratio "$m_out_dl_nt" "$m_out_plain")" '%.2f') ($(fmt "$m_out_dl_nt" '%.0f MB/s'))" "" ""
  row "output: plain, 1 × \`cat\` 64 MiB" "$(fmt "$m_out_plain1" '%.0f MB/s')" "" ""
  row "output: dlaunch, 1 rank, tagged / plain" "$(fmt "$(ratio "$m_out_dl1t" "$m_out_plain1")" '%.2f') ($(fmt "$m_out_dl1t" '%.0f MB/s'))" "" ""
  row "output: dlaunch, 1 rank, untagged / plain" "$(fmt "$(ratio "$m_out_dl1" "$m_out_plain1")" '%.2f') ($(fmt "$m_out_dl1" '%.0f MB/s'))" "" ""
  row "output: plain, 64 × \`cat\` 8 MiB" "$(fmt "$m_out_plain64" '%.0f MB/s')" "" ""
  row "output: dlaunch, 64 ranks, tagged / plain" "$(fmt "$(ratio "$m_out_dl64" "$m_out_plain64")" '%.2f') ($(fmt "$m_out_dl64" '%.0f MB/s'))" "" ""
  row "output: dlaunch, 64 ranks, \`--no-tag\` / plain" "$(fmt "$(ratio "$m_out_dl64_nt" "$m_out_plain64")" '%.2f') ($(fmt "$m_out_dl64_nt" '%.0f MB/s'))" "" ""
  row "hang watch: silence threshold → printed summary, 8 Python ranks" "$(fmt "$m_hang" '%.0f ms')" "< 2000 ms" "$(verdict "$m_hang" '<' 2000)"
  row "hang watch: CPU of dlaunch per hour of a quiet 8-rank job (watch on)" "$(fmt "$m_quiet" '%.2f s')" "< 1 s" "$(verdict "$m_quiet" '<' 1)"
  row "metrics: CPU of dlaunch per hour, quiet 8-rank job with \`--metrics-addr\`, no scrape (median of 3 windows of 10 s)" "$(fmt "$m_unscraped" '%.2f s')" "" ""
  row "metrics: CPU of dlaunch per hour, the same job scraped every second (GET /metrics, kept alive; 3 windows between those)" "$(fmt "$m_scraped" '%.2f s')" "< 2 s" "$(verdict "$m_scraped" '<' 2)"
  row "straggler, native sampler: one Tick over 8 processes × 50 threads, all asleep (every thread's stat read)" \
    "$(fmt "$m_tick" '%.2f ms') ($(fmt "$m_tick_thread" '%.2f µs') a thread)" "" ""
  row "… reference: one read of /proc/PID/stat (open, read, close); of one thread's /proc/PID/task/TID/stat" \
    "$(fmt "$m_stat_read" '%.2f µs'); $(fmt "$m_task_stat_read" '%.2f µs')" "" ""
  row "straggler detector: one window of 8,192 ranks × 32 frames, one slow (the host, once a window)" \
    "$(fmt "$m_detect" '%.1f ms')" "< 1% of a 60 s window (600 ms)" "$(verdict "$m_detect" '<' 600)"
  ((${#STRAG_ROWS[@]})) && printf '%s\n' "${STRAG_ROWS[@]}"
  echo
  echo "With \`--monitor_interval 0.1\`, torchrun / floor is $(fmt "$(ratio "$m_tr" "$m_floor")" '%.1f'): the most" \
    "any launcher could reach on that row, since none starts the workers faster than the floor. The 20x" \
    "target is read against torchrun as users run it, with its defaults."
  if ((${#ERRORS[@]})); then
    echo
    echo "Errors during the run:"
    printf -- '- %s\n' "${ERRORS[@]}"
  fi
  ((HAVE_MPI)) || echo "- mpirun not installed: its row is n/a"
  ((HAVE_TORCHRUN)) || echo "- torchrun ($TORCHRUN) not found or BENCH_TORCH_REPS=0: its rows are n/a"
  return 0
}
table | tee "$RESULTS"
