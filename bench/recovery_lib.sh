# shellcheck shell=bash
# Real agents on loopback that lose a node, for bench/recovery.sh and
# bench/spare_loop.sh (sourced by both; runs nothing by itself).
#
# Every worker stamps its own start: "RANK WORLD_SIZE EPOCHREALTIME" into
# $RUN/NODE.gG, G its TORCHELASTIC_RESTART_COUNT, written whole (a rename), so
# "workers running" is read from the workers, not from a log line. A worker then
# waits for $RUN/go and exits 0; with SLEEP_GEN0=1 a generation-0 worker sleeps
# instead (until it is torn down), so that the teardown before a restart is one
# signal to one `sleep`.
#
# rec_init DLAUNCH   makes $T (removed at exit, with anything still running from
#                    it), the worker and the helpers below
# rec_spare_case TAG VICTIM   the 4 + 1 case; see there
#
# The rendezvous settings of every case are $REC_CONF.

REC_HEARTBEAT_TIMEOUT=3
REC_LAST_CALL_TIMEOUT=1
REC_CONF="heartbeat_timeout=$REC_HEARTBEAT_TIMEOUT,last_call_timeout=$REC_LAST_CALL_TIMEOUT"
REC_WAIT_S=${BENCH_RECOVERY_WAIT_S:-30} # the most one step of a case may take before it counts as failed

rec_die() { echo "bench: $*" >&2; exit 1; }
rec_note() { echo "bench: $*" >&2; }

rec_init() {
  DLAUNCH=$1
  [[ -x $DLAUNCH ]] || rec_die "dlaunch binary '$DLAUNCH' not found; build it first (cmake --build build --target dlaunch)"
  DLAUNCH=$(cd "$(dirname "$DLAUNCH")" && pwd)/$(basename "$DLAUNCH")
  command -v ss >/dev/null || rec_die "ss (iproute2) is missing"
  [[ $REC_WAIT_S =~ ^[1-9][0-9]*$ ]] || rec_die "BENCH_RECOVERY_WAIT_S must be a positive number of seconds, got '$REC_WAIT_S'"
  T=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-recovery-bench-XXXXXX") || rec_die "mktemp -d failed"
  trap rec_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  unset DLAUNCH_RDZV_TOKEN # loopback: no token, no warning, the same for every run
  export OMP_NUM_THREADS=1
  # Workers and agents carry $T in their command line, so that the cleanup and
  # rec_settle find them.
  ln -s "$(type -P sleep)" "$T/sleep"
  cat >"$T/worker.sh" <<EOF
#!/bin/bash
g=\$TORCHELASTIC_RESTART_COUNT
printf '%s %s %s\n' "\$RANK" "\$WORLD_SIZE" "\$EPOCHREALTIME" >"\$REC/\$NODE_NAME.g\$g.tmp"
mv "\$REC/\$NODE_NAME.g\$g.tmp" "\$REC/\$NODE_NAME.g\$g"
if [[ \$g == 0 && -n \${SLEEP_GEN0:-} ]]; then exec "$T/sleep" 120; fi
i=0
while [[ ! -e \$REC/go ]] && ((i < 1200)); do "$T/sleep" 0.1; i=\$((i + 1)); done
EOF
  chmod +x "$T/worker.sh"
}

rec_cleanup() {
  local pids
  pids=$(pgrep -f -- "$T/" 2>/dev/null | grep -vx "$$")
  # shellcheck disable=SC2086  # one pid a word
  [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
  rm -rf -- "$T"
}

# rec_free_port: a loopback TCP port nobody listens on, below the ephemeral range.
rec_free_port() {
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + RANDOM % 12000))
    [[ -z $(ss -Htan "sport = :$p" 2>/dev/null) ]] && { echo "$p"; return 0; }
  done
  rec_die "no free port found in 20000-31999"
}

# rec_new_run TAG: a fresh $RUN directory for one case; forgets the last one's agents.
declare -A PID RC
rec_new_run() {
  RUN=$T/$1
  rm -rf -- "$RUN"
  mkdir -p "$RUN"
  PID=() RC=()
}

# rec_start NAME [ENV=V...] -- DLAUNCH_FLAGS...: one agent in the background, its
# output in $RUN/NAME.out and .err; PID[NAME] is dlaunch's own pid (env execs it).
rec_start() {
  local name=$1 envs=()
  shift
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  env REC="$RUN" NODE_NAME="$name" "${envs[@]}" "$DLAUNCH" "$@" -- "$T/worker.sh" \
    >"$RUN/$name.out" 2>"$RUN/$name.err" </dev/null &
  PID[$name]=$!
}

# rec_count G: how many workers of generation G have started.
rec_count() { find "$RUN" -maxdepth 1 -name "*.g$1" 2>/dev/null | wc -l; }

# rec_wait_gen G N: until N workers of generation G started (at most REC_WAIT_S).
rec_wait_gen() {
  local i
  for ((i = 0; i < REC_WAIT_S * 20; i++)); do
    (($(rec_count "$1") >= $2)) && return 0
    "$T/sleep" 0.05
  done
  return 1
}

# rec_wait_grep FILE ERE: until FILE has a line matching ERE (at most REC_WAIT_S).
rec_wait_grep() {
  local i
  for ((i = 0; i < REC_WAIT_S * 20; i++)); do
    grep -Eq -- "$2" "$1" 2>/dev/null && return 0
    "$T/sleep" 0.05
  done
  return 1
}

# rec_field NODE G FIELD(1 rank, 2 world size, 3 start): from NODE's stamp of generation G.
rec_field() { awk -v f="$3" '{print $f}' "$RUN/$1.g$2" 2>/dev/null; }

# rec_since T0 NODE... G: seconds from T0 to the last of these nodes' workers of
# generation G starting.
rec_since() {
  local t0=$1 g=${*: -1} n last=0 s
  for n in "${@:2:$# - 2}"; do
    s=$(rec_field "$n" "$g" 3)
    [[ -n $s ]] || { echo nan; return; }
    last=$(awk -v a="$last" -v b="$s" 'BEGIN{print (b > a) ? b : a}')
  done
  awk -v a="$t0" -v b="$last" 'BEGIN{printf "%.6f", b - a}'
}

# rec_finish NAME...: lets the workers end ($RUN/go) and waits for these agents
# (SIGKILL after REC_WAIT_S); RC[NAME] is each one's exit code. It polls rather
# than arm a watchdog: one that the agents outrun may not have started its sleep
# yet when it is called off, and then waits out its whole time.
rec_finish() {
  local n i alive
  touch "$RUN/go"
  for ((i = 0; i < REC_WAIT_S * 20; i++)); do
    alive=0
    for n in "$@"; do rec_running "${PID[$n]:-}" && alive=1; done
    ((alive)) || break
    "$T/sleep" 0.05
  done
  for n in "$@"; do
    RC[$n]=none
    [[ -n ${PID[$n]:-} ]] || continue
    rec_running "${PID[$n]}" && kill -KILL "${PID[$n]}" 2>/dev/null
    wait "${PID[$n]}" 2>/dev/null
    RC[$n]=$?
  done
  return 0
}

# rec_running PID: PID is a child of this shell that has not exited (not a zombie).
rec_running() {
  [[ -n $1 ]] && kill -0 "$1" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]
}

# rec_settle: until nothing started from $T runs any more (the agents' watchdogs
# and a killed node's workers are not this shell's children); after REC_WAIT_S
# kills what is left and returns 1 with LEFTOVER naming it.
LEFTOVER=""
rec_settle() {
  local i pids
  LEFTOVER=""
  for ((i = 0; i < REC_WAIT_S * 10; i++)); do
    pids=$(pgrep -f -- "$T/" 2>/dev/null | grep -vx "$$")
    [[ -z $pids ]] && return 0
    "$T/sleep" 0.1
  done
  LEFTOVER=$(for p in $pids; do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done | head -c 400)
  # shellcheck disable=SC2086  # one pid a word
  kill -KILL $pids 2>/dev/null
  return 1
}

# rec_spare_case TAG VICTIM(a|b|c): 4 agents (host, a, b, c; host hosts the
# coordinator) with --nnodes 4 --spares 1, a fifth (spare) that waits as the
# spare; SIGKILL of VICTIM's dlaunch once generation 0 runs on the four. Sets
#   CASE_ERR       empty when the job recovered, else what went wrong: the next
#                  generation not on 4 nodes, a survivor's RANK changed, the spare
#                  not on the lost node's RANK, a third generation, any dlaunch
#                  but the victim's exiting non-zero, processes left over
#   CASE_SPARE_S   SIGKILL → the spare's worker running (seconds)
#   CASE_ALL_S     SIGKILL → every worker of the next generation running
# The run's files stay in $RUN until the next rec_new_run.
rec_spare_case() {
  local tag=$1 victim=$2 port n t_kill common nodes=(host a b c) survivors=()
  CASE_ERR="" CASE_SPARE_S=nan CASE_ALL_S=nan
  rec_new_run "$tag"
  port=$(rec_free_port)
  common=(--nnodes 4 --spares 1 --max-restarts 2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port"
    --rdzv-id "$tag")
  rec_start host SLEEP_GEN0=1 -- "${common[@]}" --rdzv-conf "is_host=1,$REC_CONF" --events "$RUN/events.jsonl"
  for n in a b c; do rec_start "$n" SLEEP_GEN0=1 -- "${common[@]}" --rdzv-conf "is_host=0,$REC_CONF"; done
  for n in "${nodes[@]}"; do [[ $n == "$victim" ]] || survivors+=("$n"); done
  if ! rec_wait_gen 0 4; then
    CASE_ERR+="generation 0 did not start on 4 nodes within ${REC_WAIT_S}s ($(rec_count 0) did); "
  else
    rec_start spare SLEEP_GEN0=1 -- "${common[@]}" --rdzv-conf "is_host=0,$REC_CONF"
    rec_wait_grep "$RUN/events.jsonl" '"event":"spare_waiting"' ||
      CASE_ERR+="the fifth agent did not wait as a spare within ${REC_WAIT_S}s; "
  fi
  if [[ -z $CASE_ERR ]]; then
    t_kill=$EPOCHREALTIME
    kill -KILL "${PID[$victim]}"
    wait "${PID[$victim]}" 2>/dev/null
    RC[$victim]=$?
    if ! rec_wait_gen 1 4; then
      CASE_ERR+="generation 1 did not start on 4 nodes within ${REC_WAIT_S}s of the SIGKILL ($(rec_count 1) did); "
    else
      # shellcheck disable=SC2034  # read by the callers
      CASE_SPARE_S=$(rec_since "$t_kill" spare 1)
      # shellcheck disable=SC2034
      CASE_ALL_S=$(rec_since "$t_kill" "${survivors[@]}" spare 1)
      for n in "${survivors[@]}"; do
        [[ $(rec_field "$n" 1 1) == "$(rec_field "$n" 0 1)" ]] ||
          CASE_ERR+="node $n's RANK changed: $(rec_field "$n" 0 1) → $(rec_field "$n" 1 1); "
      done
      [[ $(rec_field spare 1 1) == "$(rec_field "$victim" 0 1)" ]] ||
        CASE_ERR+="the spare took RANK $(rec_field spare 1 1), the lost node $victim had $(rec_field "$victim" 0 1); "
      [[ -e $RUN/$victim.g1 ]] && CASE_ERR+="the killed node $victim ran a worker of generation 1; "
    fi
  fi
  if [[ -n ${RC[$victim]:-} ]]; then
    rec_finish "${survivors[@]}" spare
    for n in "${survivors[@]}" spare; do
      [[ ${RC[$n]} == 0 ]] || CASE_ERR+="$n's dlaunch exited ${RC[$n]}; "
    done
  else
    rec_finish "${!PID[@]}" # it failed before the SIGKILL: end what runs
  fi
  # Not before the go: a generation-1 worker still waits for it then.
  (($(rec_count 2) == 0)) || CASE_ERR+="$(rec_count 2) workers of a generation 2; "
  rec_settle || CASE_ERR+="processes left after the job: $LEFTOVER; "
  CASE_ERR=${CASE_ERR%; }
}
