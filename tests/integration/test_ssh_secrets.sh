#!/usr/bin/env bash
# The values of -x and of a job spec's environment_variables reach the workers
# of a head launch without ever standing on a command line, against real sshd
# daemons in network namespaces (lib.sh's ssh_hosts): HEAD (.1) runs the head
# dlaunch, A (.2) and B (.3) an sshd each.
#   1. -x NAME (the value from the head's environment) over ssh, one worker on
#      A and one on B, each holding until told to end. While they run, `nobody`
#      reads every /proc/*/cmdline, every /proc/*/environ it may, and `ps -eo
#      args`: neither of the value's two marked parts shows anywhere (a control:
#      the same scan does show the workers' own command lines). Each worker
#      then has the value byte for byte: spaces, quotes, a backslash, '=', '%',
#      a newline inside and at the end, non-ASCII.
#   2. The same through `dlaunch job SPEC -H A,B`, the value in the spec's
#      environment_variables (a YAML double-quoted string).
#   2b. The same for a TensorFlow role's environment_variables (the ps role's
#      only; the worker task must not get it).
#   2c. Several programs, each group on its own host: the rollout group's -x
#      value travels inside DLAUNCH_PROGRAMS over stdin; the trainer on the
#      other host must not get it.
#   3. --remote pdsh (when installed): pdsh forwards no stdin, so the values go
#      inline; dlaunch says so in one line, and the workers still get them.
#
# Needs root, `ip netns`, sshd, ssh, ssh-keygen and setpriv; skipped otherwise.
# shellcheck source=tests/integration/lib.sh
# shellcheck disable=SC2317  # functions called through wait_for
source "$(dirname "$0")/lib.sh"
lib_init "$@"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"

ssh_hosts "dlsec$$-" 3
NS_HEAD=${NS_HOSTS[0]}
ADDR_A=$NET.2 ADDR_B=$NET.3
unset DLAUNCH_RDZV_TOKEN SSH_AUTH_SOCK 2>/dev/null

# Two marked parts, so a value cut at its newline is still found.
M1=mark1-$$-$RANDOM M2=mark2-$$-$RANDOM
export DLTEST_SECRET="$M1 a b 'sq' \"dq\" k=v=w back\\slash \\n %s
$M2 grüß ✓ 🔑
"
printf '%s' "$DLTEST_SECRET" >"$TMP/want"

# The worker: writes its two variables to files, says it is ready, and holds
# until $TMP/stop.CASE exists (at most 60 s).
cat >"$TMP/secret_rank.sh" <<EOF
#!/bin/sh
printf '%s' "\$DLTEST_SECRET" >"$TMP/got.\$1.x.\$RANK"
printf '%s' "\$DLTEST_SPEC" >"$TMP/got.\$1.spec.\$RANK"
: >"$TMP/ready.\$1.\$RANK"
i=0
while [ ! -e "$TMP/stop.\$1" ] && [ \$i -lt 600 ]; do "$TMP/bin/sleep" 0.1; i=\$((i + 1)); done
EOF
chmod +x "$TMP/secret_rank.sh"

both_ready() { [[ -e $TMP/ready.$1.0 && -e $TMP/ready.$1.1 ]]; }

# scan_as_nobody CASE: what another local user sees while the job runs.
scan_as_nobody() {
  # (a clean environment: the scanner must not find the value in its own)
  env -i PATH=/usr/bin:/bin setpriv --reuid=nobody --regid=nogroup --clear-groups /bin/sh -c '
    for f in /proc/[0-9]*/cmdline; do tr "\0" " " <"$f" 2>/dev/null; echo; done
    for f in /proc/[0-9]*/environ; do tr "\0" "\n" <"$f" 2>/dev/null; done
    ps -eo args' >"$TMP/scan.$1" 2>/dev/null
  grep -q "secret_rank.sh $1" "$TMP/scan.$1" ||
    fail "case $1: the scan as nobody does not even show the workers' command lines (the check itself is broken)"
  if grep -qF -e "$M1" -e "$M2" "$TMP/scan.$1"; then
    grep -F -e "$M1" -e "$M2" "$TMP/scan.$1" | cut -c1-300 >&2
    fail "case $1: another user (nobody) can read the secret value (lines above)"
  fi
}

# check_values CASE KIND: both workers got the value of KIND (x or spec) intact.
check_values() {
  local r
  for r in 0 1; do
    cmp -s "$TMP/want" "$TMP/got.$1.$2.$r" || {
      od -c "$TMP/got.$1.$2.$r" | head -n 10 >&2
      fail "case $1: rank $r's value differs from the one given (od -c above; want $(od -c "$TMP/want" | head -n 3))"
    }
  done
}

# run_case CASE ARGS...: a head launch in HEAD's namespace; scans while the
# workers hold, then lets them end; the head must exit 0.
run_case() {
  local name=$1
  shift
  # The other case's variable stays out: each value comes from one place only.
  local other=DLTEST_SPEC
  [[ $name == spec ]] && other=DLTEST_SECRET
  start_dl_wrapped "$name" 60 "ip netns exec $NS_HEAD env -u $other" "$@"
  wait_for 30 both_ready "$name" || {
    wait_dl "$name"
    fail_run "case $name: the 2 workers did not start within 30s"
  }
  scan_as_nobody "$name"
  : >"$TMP/stop.$name"
  wait_dl "$name"
  expect_rc 0 "case $name: the head launch"
}

# ---------------------------------------------------------------------------
# 1. -x NAME over ssh.
run_case ssh -H "$ADDR_A:1,$ADDR_B:1" "${SSH_FLAGS[@]}" -x DLTEST_SECRET -- "$TMP/secret_rank.sh" ssh
check_values ssh x
log "case 1 (-x over ssh): the value arrived intact and showed in no process list"

# ---------------------------------------------------------------------------
# 2. A job spec's environment_variables.
yaml_value=$(printf '%s' "$DLTEST_SECRET" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | awk 'NR > 1 {printf "\\n"} {printf "%s", $0}')
cat >"$TMP/job.yml" <<EOF
command: $TMP/secret_rank.sh spec
environment_variables:
  DLTEST_SPEC: "$yaml_value\\n"
distribution:
  type: pytorch
  process_count_per_instance: 1
resources:
  instance_count: 2
EOF
run_case spec job "$TMP/job.yml" -H "$ADDR_A,$ADDR_B" "${SSH_FLAGS[@]}"
check_values spec spec
log "case 2 (job spec environment_variables): the value arrived intact and showed in no process list"

# ---------------------------------------------------------------------------
# 2b. A TensorFlow role's environment_variables (seed 000's ps role): they reach
# the agents as --role-env values, over stdin too. The worker task must not get
# the ps role's value at all.
cat >"$TMP/role.yml" <<EOF
command: $TMP/secret_rank.sh role
distributed:
  tensorflow:
    worker:
      count: 1
    parameter_server:
      count: 1
      environment_variables:
        DLTEST_SPEC: "$yaml_value\\n"
EOF
run_case role job "$TMP/role.yml" -H "$ADDR_A:1,$ADDR_B:1" "${SSH_FLAGS[@]}"
cmp -s "$TMP/want" "$TMP/got.role.spec.1" || {
  od -c "$TMP/got.role.spec.1" | head -n 10 >&2
  fail "case role: the ps task's value differs from the one given (od -c above)"
}
[[ ! -s $TMP/got.role.spec.0 ]] || fail "case role: the worker task got the ps role's value"
log "case 2b (a TF role's environment_variables): the ps task got it intact, the worker none, and it showed in no process list"

# ---------------------------------------------------------------------------
# 2c. A group's own -x, the groups on hosts of their own (A the trainer, B the
# rollout): the head sends the groups in DLAUNCH_PROGRAMS, over stdin.
run_case groups -H "$ADDR_A:1" "${SSH_FLAGS[@]}" --role trainer -- "$TMP/secret_rank.sh" groups : \
  -H "$ADDR_B:1" --role rollout -x DLTEST_SECRET -- "$TMP/secret_rank.sh" groups
cmp -s "$TMP/want" "$TMP/got.groups.x.1" || {
  od -c "$TMP/got.groups.x.1" | head -n 10 >&2
  fail "case groups: the rollout's value differs from the one given (od -c above)"
}
[[ ! -s $TMP/got.groups.x.0 ]] || fail "case groups: the trainer got the rollout group's -x value"
log "case 2c (a group's -x, groups on their own hosts): only that group got it, intact, in no process list"

# ---------------------------------------------------------------------------
# 3. pdsh: inline, and said so.
if command -v pdsh >/dev/null; then
  start_dl_wrapped pdsh 60 "ip netns exec $NS_HEAD env -u DLTEST_SPEC" -H "$ADDR_A:1,$ADDR_B:1" --remote pdsh "${SSH_FLAGS[@]}" \
    -x DLTEST_SECRET -- "$TMP/secret_rank.sh" pdsh
  wait_for 30 both_ready pdsh || {
    wait_dl pdsh
    fail_run "case pdsh: the 2 workers did not start within 30s"
  }
  : >"$TMP/stop.pdsh"
  wait_dl pdsh
  expect_rc 0 "case pdsh: the head launch through pdsh"
  check_values pdsh x
  assert_file_matches "$ERR" "^dlaunch: --remote pdsh: pdsh forwards no stdin, so the -x values go on the command line" \
    "case pdsh: the warning that the values are visible"
  log "case 3 (--remote pdsh): the value arrived intact, inline, and dlaunch said so"
else
  log "case 3 skipped: pdsh is not installed"
fi

stop_sshds
wait_for 5 no_marked_processes
assert_no_leftovers "at the end"
pass
