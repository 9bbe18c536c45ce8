#!/usr/bin/env bash
# How fast a rendezvous job gets going again without a node, with real agents
# on loopback, each case measured by its workers' own start stamps
# (bench/recovery_lib.sh) against a goal:
#
# - elastic: --nnodes 2:4, 4 agents, one worker each; SIGKILL of a non-host
#   agent's dlaunch once generation 0 runs → the last of the 3 survivors' workers
#   of generation 1 running. Goal: heartbeat_timeout + 1 s. The kernel closes
#   a killed agent's connection, so the coordinator learns of it at once; the
#   same with SIGSTOP instead (a node gone silent, its connection still open)
#   measures the heartbeat_timeout path, against the same goal.
# - spare: --nnodes 4 --spares 1, 4 agents and a fifth waiting as the spare;
#   the same SIGKILL → the spare's worker running (generation 1). Goal:
#   heartbeat_timeout + 1 s. The survivors must keep their RANKs and the spare
#   take the lost node's (bench/spare_loop.sh runs this case many times).
# - health check: --nnodes 2:3, 3 agents, one with --health-check 'sleep 0.5;
#   exit 1' started first (the others' check is `true`) → the last of the
#   other two nodes' workers running (generation 0, WORLD_SIZE 2). Goal: the
#   check's 0.5 s + last_call_timeout + 1 s.
#
#   bench/recovery.sh [PATH/TO/dlaunch]   (default: build/dlaunch)
#
# Every case uses --rdzv-conf heartbeat_timeout=3,last_call_timeout=1.
# BENCH_RECOVERY_REPS (default 7) repetitions of each; the median is judged;
# BENCH_RECOVERY_WAIT_S (default 30) the most one step of a case may take. A
# repetition where the job did not recover as it should (a wrong RANK or world
# size, a dlaunch exiting non-zero, a node that should be held out running a
# worker, processes left over) fails its row. Prints a markdown table and writes
# it to BENCH_RECOVERY_RESULTS (default bench/recovery_results.md); exits 1 when
# a row fails. bench/rdzv.sh runs this and adds the rows to its own table.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/recovery_lib.sh
source "$HERE/recovery_lib.sh"

REPS=${BENCH_RECOVERY_REPS:-7}
RESULTS=${BENCH_RECOVERY_RESULTS:-$HERE/recovery_results.md}
CHECK_S=0.5 # how long the failing health check takes
[[ $REPS =~ ^[1-9][0-9]*$ ]] || rec_die "BENCH_RECOVERY_REPS must be a positive number, got '$REPS'"
(($# <= 1)) || rec_die "usage: bench/recovery.sh [PATH/TO/dlaunch]"
rec_init "${1:-$HERE/../build/dlaunch}"
BENCH_START=$EPOCHREALTIME
LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg)

GOAL_LOST_S=$((REC_HEARTBEAT_TIMEOUT + 1))
GOAL_HEALTH_S=$(awk -v c="$CHECK_S" -v l="$REC_LAST_CALL_TIMEOUT" 'BEGIN{print c + l + 1}')

# rec_elastic_case TAG VICTIM(a|b|c) SIGNAL(KILL|STOP): 4 agents, --nnodes 2:4;
# SIGNAL to VICTIM's dlaunch once generation 0 runs on the four (a stopped one
# is killed once the others run again). Sets CASE_ERR and CASE_S (the signal →
# the last survivor's worker of generation 1 running).
rec_elastic_case() {
  local tag=$1 victim=$2 sig=$3 port n t_kill common survivors=()
  CASE_ERR="" CASE_S=nan
  rec_new_run "$tag"
  port=$(rec_free_port)
  common=(--nnodes 2:4 --max-restarts 2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "$tag")
  rec_start host SLEEP_GEN0=1 -- "${common[@]}" --rdzv-conf "is_host=1,$REC_CONF"
  for n in a b c; do rec_start "$n" SLEEP_GEN0=1 -- "${common[@]}" --rdzv-conf "is_host=0,$REC_CONF"; done
  for n in host a b c; do [[ $n == "$victim" ]] || survivors+=("$n"); done
  if ! rec_wait_gen 0 4; then
    CASE_ERR+="generation 0 did not start on 4 nodes within ${REC_WAIT_S}s ($(rec_count 0) did); "
    rec_finish host a b c
  else
    [[ $(rec_field host 0 2) == 4 ]] || CASE_ERR+="generation 0 formed with WORLD_SIZE $(rec_field host 0 2), not 4; "
    t_kill=$EPOCHREALTIME
    kill "-$sig" "${PID[$victim]}"
    # Reaped here, bash says nothing of the kill.
    [[ $sig == KILL ]] && wait "${PID[$victim]}" 2>/dev/null
    if ! rec_wait_gen 1 3; then
      CASE_ERR+="generation 1 did not start on the 3 survivors within ${REC_WAIT_S}s of the SIG$sig ($(rec_count 1) did); "
    else
      CASE_S=$(rec_since "$t_kill" "${survivors[@]}" 1)
      for n in "${survivors[@]}"; do
        [[ $(rec_field "$n" 1 2) == 3 ]] || CASE_ERR+="node $n's worker of generation 1 has WORLD_SIZE $(rec_field "$n" 1 2), not 3; "
      done
    fi
    kill -KILL "${PID[$victim]}" 2>/dev/null
    wait "${PID[$victim]}" 2>/dev/null
    rec_finish "${survivors[@]}"
    for n in "${survivors[@]}"; do [[ ${RC[$n]} == 0 ]] || CASE_ERR+="$n's dlaunch exited ${RC[$n]}; "; done
  fi
  (($(rec_count 2) == 0)) || CASE_ERR+="$(rec_count 2) workers of a generation 2; "
  rec_settle || CASE_ERR+="processes left after the job: $LEFTOVER; "
  CASE_ERR=${CASE_ERR%; }
}

# rec_health_case TAG: --nnodes 2:3; "bad" (its check: sleep CHECK_S; exit 1)
# starts first, then host and a (check `true`). Sets CASE_ERR and CASE_S (bad's
# start → the last of host's and a's workers running).
rec_health_case() {
  local tag=$1 port n t0 common
  CASE_ERR="" CASE_S=nan
  rec_new_run "$tag"
  port=$(rec_free_port)
  common=(--nnodes 2:3 --max-restarts 0 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "$tag")
  t0=$EPOCHREALTIME
  rec_start bad -- "${common[@]}" --rdzv-conf "is_host=0,join_timeout=60,$REC_CONF" \
    --health-check "$T/sleep $CHECK_S; exit 1"
  rec_start host -- "${common[@]}" --rdzv-conf "is_host=1,$REC_CONF" --health-check true
  rec_start a -- "${common[@]}" --rdzv-conf "is_host=0,$REC_CONF" --health-check true
  if ! rec_wait_gen 0 2; then
    CASE_ERR+="the job did not start on 2 nodes within ${REC_WAIT_S}s ($(rec_count 0) did); "
  else
    CASE_S=$(rec_since "$t0" host a 0)
    for n in host a; do
      [[ $(rec_field "$n" 0 2) == 2 ]] || CASE_ERR+="node $n's worker has WORLD_SIZE $(rec_field "$n" 0 2), not 2; "
    done
  fi
  rec_wait_grep "$RUN/bad.err" "health check .*exited with code 1.*held out" ||
    CASE_ERR+="the failing node never said its check held it out; "
  rec_finish host a
  for n in host a; do [[ ${RC[$n]} == 0 ]] || CASE_ERR+="$n's dlaunch exited ${RC[$n]}; "; done
  [[ -e $RUN/bad.g0 ]] && CASE_ERR+="the node whose check failed ran a worker; "
  # Held out, it would wait for its join timeout: SIGTERM ends it at once.
  kill -TERM "${PID[bad]}" 2>/dev/null
  rec_finish bad
  [[ ${RC[bad]} == 143 ]] || CASE_ERR+="the held-out node exited ${RC[bad]} on SIGTERM, not 143; "
  rec_settle || CASE_ERR+="processes left after the job: $LEFTOVER; "
  CASE_ERR=${CASE_ERR%; }
}

median() {
  (($#)) || { echo nan; return; }
  printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{ if (NR%2) print v[(NR+1)/2]; else printf "%.6f\n", (v[NR/2]+v[NR/2+1])/2 }'
}
worst() { (($#)) && printf '%s\n' "$@" | sort -g | tail -n 1 || echo nan; }
secs() { awk -v v="$1" 'BEGIN{ if (v=="nan" || v=="") print "n/a"; else printf "%.3f s", v }'; }
# judge MEDIAN GOAL FAILED_REPS: PASS when every rep recovered and the median is within the goal.
judge() {
  if (($3)) || [[ $1 == nan ]]; then echo FAIL; return; fi
  awk -v v="$1" -v g="$2" 'BEGIN{ print (v <= g) ? "PASS" : "FAIL" }'
}

ERRORS=()
victims=(a b c)
E_S=() Q_S=() S_S=() S_ALL=() H_S=() E_BAD=0 Q_BAD=0 S_BAD=0 H_BAD=0
rec_note "recovery: $REPS reps each of the elastic (killed, silent), spare and health-check cases"
for ((i = 0; i < REPS; i++)); do
  v=${victims[$((i % 3))]}
  rec_elastic_case "elastic-$i" "$v" KILL
  if [[ -z $CASE_ERR ]]; then E_S+=("$CASE_S"); else E_BAD=$((E_BAD + 1)) && ERRORS+=("elastic, rep $((i + 1)) ($v killed): $CASE_ERR"); fi
  rec_elastic_case "silent-$i" "$v" STOP
  if [[ -z $CASE_ERR ]]; then Q_S+=("$CASE_S"); else Q_BAD=$((Q_BAD + 1)) && ERRORS+=("elastic, silent node, rep $((i + 1)) ($v stopped): $CASE_ERR"); fi
  rec_spare_case "spare-$i" "$v"
  if [[ -z $CASE_ERR ]]; then
    S_S+=("$CASE_SPARE_S") S_ALL+=("$CASE_ALL_S")
  else
    S_BAD=$((S_BAD + 1)) && ERRORS+=("spare, rep $((i + 1)) ($v killed): $CASE_ERR")
  fi
  rec_health_case "health-$i"
  if [[ -z $CASE_ERR ]]; then H_S+=("$CASE_S"); else H_BAD=$((H_BAD + 1)) && ERRORS+=("health check, rep $((i + 1)): $CASE_ERR"); fi
done
m_e=$(median "${E_S[@]}") m_q=$(median "${Q_S[@]}") m_s=$(median "${S_S[@]}") m_all=$(median "${S_ALL[@]}") m_h=$(median "${H_S[@]}")
r_e=$(judge "$m_e" "$GOAL_LOST_S" "$E_BAD")
r_q=$(judge "$m_q" "$GOAL_LOST_S" "$Q_BAD")
r_s=$(judge "$m_s" "$GOAL_LOST_S" "$S_BAD")
r_h=$(judge "$m_h" "$GOAL_HEALTH_S" "$H_BAD")
TOTAL_S=$(awk -v a="$BENCH_START" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b - a}')

# value MEDIAN WORST BAD: "0.012 s (worst 0.020 s)", with how many reps failed.
value() {
  local v
  v="$(secs "$1") (worst $(secs "$2"))"
  (($3)) && v+=" ($3 of $REPS reps did not recover)"
  echo "$v"
}
row() { printf '| %s | %s | %s | %s |\n' "$@"; }
table() {
  echo "# dlaunch recovery benchmark"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(getconf _NPROCESSORS_ONLN) cores, $(uname -sr); medians of $REPS reps;" \
    "run took $TOTAL_S s; $("$DLAUNCH" --version 2>&1 | head -n 1); load average at the start $LOAD_AT_START," \
    "at the end $(cut -d' ' -f1-3 /proc/loadavg); real agents on 127.0.0.1, one worker each," \
    "\`--rdzv-conf heartbeat_timeout=$REC_HEARTBEAT_TIMEOUT,last_call_timeout=$REC_LAST_CALL_TIMEOUT\`;" \
    "times from the workers' own start stamps. Produced by \`bench/recovery.sh\`."
  echo
  row "measurement" "value" "target" "result"
  row "---" "---:" "---" "---"
  row "recovery, elastic (\`--nnodes 2:4\`, 4 agents): SIGKILL of a non-host node's dlaunch → the 3 survivors' workers running (next generation)" \
    "$(value "$m_e" "$(worst "${E_S[@]}")" "$E_BAD")" "≤ $GOAL_LOST_S s (heartbeat_timeout $REC_HEARTBEAT_TIMEOUT s + 1 s)" "$r_e"
  row "recovery, elastic, a silent node (SIGSTOP of its dlaunch: its connection stays open) → the same" \
    "$(value "$m_q" "$(worst "${Q_S[@]}")" "$Q_BAD")" "≤ $GOAL_LOST_S s (heartbeat_timeout $REC_HEARTBEAT_TIMEOUT s + 1 s)" "$r_q"
  row "recovery, spare (\`--nnodes 4 --spares 1\`, 5 agents): SIGKILL of a non-host node's dlaunch → the spare's worker running, on the lost node's RANK" \
    "$(value "$m_s" "$(worst "${S_S[@]}")" "$S_BAD")" "≤ $GOAL_LOST_S s (heartbeat_timeout $REC_HEARTBEAT_TIMEOUT s + 1 s)" "$r_s"
  row "… every worker of the next generation running (the survivors on their own RANKs)" \
    "$(value "$m_all" "$(worst "${S_ALL[@]}")" 0)" "" ""
  row "health check fails at the first join (\`--nnodes 2:3\`, 3 agents; \`sleep $CHECK_S; exit 1\`): its node's start → the other 2 nodes' workers running" \
    "$(value "$m_h" "$(worst "${H_S[@]}")" "$H_BAD")" "≤ $GOAL_HEALTH_S s (the check's $CHECK_S s + last_call_timeout $REC_LAST_CALL_TIMEOUT s + 1 s)" "$r_h"
  if ((${#ERRORS[@]})); then
    echo
    echo "Errors during the run:"
    printf -- '- %s\n' "${ERRORS[@]}"
  fi
  return 0
}
table | tee "$RESULTS"
rec_note "recovery: elastic $(secs "$m_e") / $GOAL_LOST_S s $r_e; silent node $(secs "$m_q") / $GOAL_LOST_S s $r_q; spare $(secs "$m_s") / $GOAL_LOST_S s $r_s;" \
  "health check $(secs "$m_h") / $GOAL_HEALTH_S s $r_h"
[[ $r_e == PASS && $r_q == PASS && $r_s == PASS && $r_h == PASS ]]
