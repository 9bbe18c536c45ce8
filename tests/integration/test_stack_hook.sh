#!/usr/bin/env bash
# The stack hook (sitecustomize.py in every Python worker) never disturbs a
# worker, and taking stacks never endangers one (issue 18):
#   1. a Python that has no sitecustomize of its own (a Debian CPython whose
#      prefix lacks one, built here with PYTHONHOME; pyenv's, where installed):
#      no "Error in sitecustomize" in the worker or in a Python it starts, the
#      hook chains to a sitecustomize found later on PYTHONPATH, and sys.argv,
#      sys.path, warnings (-W error, -X dev) and the exit code are as without it;
#   2. Debian's own Python: its sitecustomize still runs under the hook;
#   3. a Python rank that exec()s a program which unblocks every signal is never
#      sent the stack signal (it would die: exit 190); one that exec()s `sleep`
#      (the signal still blocked, its dump file stale) gets gdb's stack; one that
#      exec()s Python again gets the new hook's stack;
#   4. Python 3.12+ (pyenv, where installed): os.fork() gives no "multi-threaded"
#      warning because of the hook's thread, and stacks are taken after forks;
#   5. a native rank in vfork() (D state) is sampled itself, not its child
#      (gdb reads it once it leaves D);
#   6. a native rank with a 1 MB symbol in its stack: dlaunch and the job live on;
#   7. a command that names no Python gets no hook, no PYTHONPATH entry and no
#      dump directory (issue 21), and its stacks still come from gdb (5, 6);
#   8. the hook is kept in this user's directory across jobs with its bytecode,
#      written by the hook itself under PYTHONDONTWRITEBYTECODE: a second job's
#      worker compiles nothing (issue 21: compiling cost each worker ~1 ms).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python
command -v gdb >/dev/null || fail "gdb is missing (scripts/install-deps.sh installs it)"

export XDG_RUNTIME_DIR=$TMP/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR"
LIVE=$XDG_RUNTIME_DIR/dlaunch
sock_of() { compgen -G "$LIVE/$1.*.sock" >/dev/null; }

# A CPython with no sitecustomize anywhere: Debian's interpreter over a prefix
# that links every entry of its standard library but sitecustomize.py.
pyver=$("$PY" -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
mkdir -p "$TMP/nosite/lib/$pyver"
for e in "/usr/lib/$pyver"/*; do
  [[ $(basename "$e") == sitecustomize.py ]] || ln -s "$e" "$TMP/nosite/lib/$pyver/"
done
cat >"$TMP/nosite/python3" <<SH
#!/bin/sh
PYTHONHOME='$TMP/nosite' exec '$PY' "\$@"
SH
chmod +x "$TMP/nosite/python3"
[[ $("$TMP/nosite/python3" -c 'import importlib.util as u; print(u.find_spec("sitecustomize"))') == None ]] ||
  fail "the prefix built in $TMP/nosite still has a sitecustomize"
PYTHONS=("$TMP/nosite/python3")
for v in 3.11.7 3.12.1 3.13.0; do
  p=${PYENV_ROOT:-$HOME/.pyenv}/versions/$v/bin/python3
  [[ -x $p ]] && PYTHONS+=("$p")
done
log "Pythons without a sitecustomize: ${PYTHONS[*]}"

# What a worker sees, printed on one line: without the hook it must be the same.
cat >"$TMP/sees.py" <<'PYEOF'
import os, subprocess, sys, warnings
child = subprocess.run([sys.executable, "-c", "print('child ok')"], capture_output=True, text=True)
print("sees argv=%r path=%r filters=%r child=%r/%r chain=%s" % (
    sys.argv, sys.path, warnings.filters, child.stdout, child.stderr, os.environ.get("CHAINED", "-")))
sys.exit(int(os.environ.get("EXIT", "0")))
PYEOF
mkdir -p "$TMP/later"
cat >"$TMP/later/sitecustomize.py" <<'PYEOF'
import os
os.environ["CHAINED"] = "yes"
PYEOF

# 1. Pythons with no sitecustomize; 2. Debian's.
for py in "${PYTHONS[@]}" "$PY"; do
  variants=("")
  [[ $py == "${PYTHONS[0]}" || $py == "$PY" ]] && variants+=("-W error" "-X dev")
  for flags in "${variants[@]}"; do
    # shellcheck disable=SC2086
    PYTHONPATH=$TMP/later EXIT=3 run_dl 60 --nproc-per-node 2 -- "$py" $flags "$TMP/sees.py" a 'b c'
    expect_rc 3 "$py $flags: the worker's exit code"
    if grep -v " sees " "$OUT" | grep -qE "sitecustomize|Traceback|Warning" || grep -qE "sitecustomize|Traceback|Warning" "$ERR"; then
      fail_run "$py $flags: the hook wrote to the worker's output"
    fi
    grep -h " sees " "$OUT" | sed 's/^\[[0-9]\]: //' | sort -u >"$TMP/with"
    # shellcheck disable=SC2086
    PYTHONPATH=$TMP/later EXIT=3 run_dl 60 --nproc-per-node 2 --no-python-hook -- "$py" $flags "$TMP/sees.py" a 'b c'
    expect_rc 3 "$py $flags --no-python-hook"
    grep -h " sees " "$OUT" | sed 's/^\[[0-9]\]: //' | sort -u >"$TMP/without"
    [[ $(wc -l <"$TMP/with") == 1 ]] && cmp -s "$TMP/with" "$TMP/without" ||
      fail "$py $flags: the worker saw '$(cat "$TMP/with")' with the hook, '$(cat "$TMP/without")' without"
    assert_contains "$(cat "$TMP/with")" "child='child ok\n'/'' chain=yes" "$py $flags: the child and the chained sitecustomize"
  done
done
run_dl 60 -- "$PY" -c 'import sitecustomize, sys; print("debian", sitecustomize.__file__)'
expect_rc 0 "Debian's Python"
assert_file_matches "$OUT" "^(\[0\]: )?debian /usr/lib/$pyver/sitecustomize.py$" "Debian's sitecustomize runs under the hook"

# A job in the background, waited on until its socket is there and ARG appears.
start_job() {
  local name=$1 ready=$2
  shift 2
  start_dl "$name" 60 --rdzv-id "$name" "$@"
  wait_for 15 sock_of "$name" || { show_nodes "$name"; fail "$name: no socket in $LIVE within 15s"; }
  wait_for 15 file_has "$TMP/$name.out" "$ready" || { cat "$TMP/$name.out" "$TMP/$name.err" >&2; fail "$name: never printed '$ready'"; }
}

# 3. exec() out of the hooked Python.
cat >"$TMP/unblock.py" <<'PYEOF'
import signal, time
signal.pthread_sigmask(signal.SIG_SETMASK, [])  # as many native programs do
print("unblocked", flush=True)
time.sleep(float(__import__("os").environ.get("RUN_S", "8")))
print("lived", flush=True)
PYEOF
start_job ex1 unblocked -- "$PY" -c "import os, sys; os.execv(sys.executable, [sys.executable, '-S', '$TMP/unblock.py'])"
run_dl 30 stacks ex1
expect_rc 0 "stacks of a rank that exec()ed a program with the signal unblocked"
assert_file_matches "$OUT" "^=== rank 0 \(pid [0-9]+\), by gdb$" "ex1: read by gdb, not signalled"
wait_dl ex1
expect_rc 0 "ex1: the rank lives on after stacks"
assert_file_matches "$OUT" "^(\[0\]: )?lived$" "ex1: the rank's last line"

start_job ex2 execing -- "$PY" -c "import os; print('execing', flush=True); os.execv('$TMP/bin/sleep', ['$TMP/bin/sleep', '8'])"
wait_for 5 eval "pgrep -fx '$TMP/bin/sleep 8' >/dev/null" || fail "ex2: the rank never became sleep"
run_dl 30 stacks ex2
expect_rc 0 "stacks of a rank that exec()ed sleep"
assert_file_matches "$OUT" "^=== rank 0 \(pid [0-9]+\), by gdb$" "ex2: read by gdb (the dump file is stale)"
assert_file_matches "$OUT" "^stacks: rank 0 \(1\) wait in .*nanosleep" "ex2: gdb's stack of sleep"
wait_dl ex2
expect_rc 0 "ex2: sleep ends on its own"

cat >"$TMP/again.py" <<'PYEOF'
import os, sys, time
def second_life():
    print("second life", flush=True)
    time.sleep(float(os.environ.get("RUN_S", "8")))
if len(sys.argv) == 1:
    os.execv(sys.executable, [sys.executable, sys.argv[0], "again"])
second_life()
PYEOF
start_job ex3 "second life" -- "$PY" "$TMP/again.py"
run_dl 30 stacks ex3
expect_rc 0 "stacks of a rank that exec()ed Python again"
assert_file_matches "$OUT" "^stacks: rank 0 \(1\) wait in second_life \(again.py:[0-9]+\)" "ex3: the new hook's stack"
wait_dl ex3
expect_rc 0 "ex3: the rank ends on its own"

# 4. os.fork() under Python 3.12+.
cat >"$TMP/forks.py" <<'PYEOF'
import os, time
def fork_one():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
for _ in range(3):
    fork_one()
def after_forks():
    print("forked", flush=True)
    time.sleep(float(os.environ.get("RUN_S", "8")))
after_forks()
PYEOF
for py in "${PYTHONS[@]}"; do
  [[ $("$py" -c 'import sys; print(sys.version_info >= (3, 12))') == True ]] || continue
  start_job fork forked -- "$py" -W default::DeprecationWarning "$TMP/forks.py"
  run_dl 30 stacks fork
  expect_rc 0 "$py: stacks after os.fork()"
  assert_file_matches "$OUT" "^stacks: rank 0 \(1\) wait in after_forks \(forks.py:[0-9]+\)" "$py: the stack after forks"
  wait_dl fork
  expect_rc 0 "$py: the forking rank"
  if grep -q "multi-threaded" "$OUT" "$ERR"; then fail_run "$py: os.fork() warned of the hook's thread"; fi
done

# 5. A native rank waiting in vfork() for a child that has not exec()ed yet. The
# child stays until the rank is traced (gdb attached: it stops the rank as soon
# as the rank leaves D), so the rank is still in vfork however slow gdb starts.
if command -v cc >/dev/null; then
  cat >"$TMP/vfork.c" <<'CEOF'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
  char path[64], status[4096];
  snprintf(path, sizeof path, "/proc/%d/status", (int)getpid());
  printf("parent %d\n", (int)getpid());
  fflush(stdout);
  pid_t child = vfork();
  if (child == 0) {
    /* The parent waits in D state meanwhile. Only system calls here. */
    for (int i = 0; i < 600; i++) { /* 60 s at most */
      int fd = open(path, O_RDONLY);
      ssize_t n = fd < 0 ? -1 : read(fd, status, sizeof status - 1);
      if (fd >= 0) close(fd);
      if (n <= 0) break;
      status[n] = 0;
      char *t = strstr(status, "TracerPid:");
      if (t && strtol(t + 10, NULL, 10) != 0) break;
      usleep(100000);
    }
    _exit(0);
  }
  waitpid(child, NULL, 0);
  sleep(1);
  return 0;
}
CEOF
  cc -g -O0 -o "$TMP/vfork" "$TMP/vfork.c" || fail "cc failed on $TMP/vfork.c"
  start_job vf "parent " -- "$TMP/vfork"
  parent=$(sed -nE 's/^(\[0\]: )?parent ([0-9]+)$/\2/p' "$TMP/vf.out")
  wait_for 5 eval "[[ \$(awk '{print \$3}' /proc/$parent/stat) == D ]]" || fail "vf: the parent $parent is not in D state"
  # gdb stops the parent once it leaves D (its child exits when it sees gdb).
  run_dl 30 stacks vf
  expect_rc 0 "stacks of a rank in vfork()"
  assert_file_matches "$OUT" "^=== rank 0 \(pid $parent\), by gdb$" "vf: the rank itself is sampled, not its vfork child"
  assert_file_matches "$OUT" "^stacks: rank 0 \(1\) wait in [^ ]*vfork .*<- main \(vfork.c:[0-9]+\)$" "vf: the rank's own stack"
  wait_dl vf
  expect_rc 0 "vf: the rank ends on its own"
else
  log "no C compiler: the vfork case is left out"
fi

# 6. A native rank whose frame names a 1 MB symbol (C++ templates reach this):
# dlaunch parsed gdb's line with std::regex and died of SIGSEGV, the job with it.
if command -v cc >/dev/null; then
  "$PY" -c '
import sys
name = "f" + "A" * (1 << 20)
open(sys.argv[1], "w").write("#include <stdio.h>\n#include <unistd.h>\n"
    "__attribute__((noinline)) void %s(void) { puts(\"long\"); fflush(stdout); sleep(8); }\n"
    "int main(void) { %s(); return 0; }\n" % (name, name))' "$TMP/long.c"
  cc -g -O0 -o "$TMP/long" "$TMP/long.c" || fail "cc failed on $TMP/long.c"
  start_job long "long" -- "$TMP/long"
  run_dl 30 stacks long
  expect_rc 0 "stacks of a rank with a 1 MB symbol"
  assert_file_matches "$OUT" "^stacks: rank 0 \(1\) wait in .*nanosleep" "long: the summary"
  assert_file_matches "$OUT" "^#[0-9]+ +0x[0-9a-f]+ in fAAAA" "long: the frame of the long symbol in the full stack"
  wait_dl long
  expect_rc 0 "long: the job lives on after stacks"
fi

# 7. A command that runs no Python: `sh -c` text that names none. A shell
# script, which may start Python, gets the hook (and its Python, stacks).
cat >"$TMP/native.sh" <<'SH'
v=PYT; v=${v}HONPATH
echo "seen hook=$(printenv "$v" || echo none) dumps=${DLAUNCH_STACKS_DIR:-none}"
ls -A "${TORCHELASTIC_ERROR_FILE%/*}"
SH
grep -qi python "$TMP/native.sh" && fail "$TMP/native.sh names Python"
run_dl 30 --nproc-per-node 2 -- sh -c "$(cat "$TMP/native.sh")"
expect_rc 0 "sh -c"
assert_file_matches "$OUT" "^\[[01]\]: seen hook=none dumps=none$" "sh -c's environment has no hook"
if grep -qE "^\[[01]\]: (py|stacks)$" "$OUT"; then fail_run "sh -c's job made a hook or dump directory"; fi
run_dl 30 --nproc-per-node 1 -- bash "$TMP/native.sh"
expect_rc 0 "bash SCRIPT"
assert_file_matches "$OUT" "^(\[0\]: )?seen hook=/[^ ]+ dumps=/[^ ]+$" "a shell script gets the hook"
run_dl 30 --nproc-per-node 1 -- "$PY" -c 'import os; print("seen", os.environ["PYTHONPATH"].split(":")[0] != "", os.path.isdir(os.environ["DLAUNCH_STACKS_DIR"]))'
expect_rc 0 "python3 -c"
assert_file_matches "$OUT" "^(\[0\]: )?seen True True$" "a Python command gets the hook and its dump directory"

# 8. The hook's bytecode, kept across jobs even where Python writes none.
hook_dirs=("$LIVE"/hook-*)
[[ ${#hook_dirs[@]} == 1 && -f ${hook_dirs[0]}/sitecustomize.py ]] || fail "no single hook directory in $LIVE: ${hook_dirs[*]}"
[[ $(stat -c '%a %u' "${hook_dirs[0]}") == "700 $(id -u)" ]] || fail "${hook_dirs[0]}: not 0700 and this user's"
rm -rf "${hook_dirs[0]}/__pycache__"
tag=$("$PY" -c 'import sys; print(sys.implementation.cache_tag)')
PYTHONDONTWRITEBYTECODE=1 run_dl 30 --nproc-per-node 1 -- "$PY" -c 'print("first")'
expect_rc 0 "the first job after the bytecode went"
[[ -f ${hook_dirs[0]}/__pycache__/sitecustomize.$tag.pyc ]] || fail "the hook did not keep its bytecode under PYTHONDONTWRITEBYTECODE"
PYTHONDONTWRITEBYTECODE=1 PYTHONVERBOSE=1 run_dl 30 --nproc-per-node 1 -- "$PY" -c 'print("second")'
expect_rc 0 "the second job"
assert_file_matches "$ERR" "code object from '?${hook_dirs[0]}/__pycache__/sitecustomize\.$tag\.pyc" "the second job's worker loads the hook's bytecode"
if grep -q "${hook_dirs[0]}/__pycache__/sitecustomize\.$tag\.pyc.*\(bad\|stale\|mismatch\)" "$ERR"; then fail_run "the kept bytecode was refused"; fi

wait_for 10 no_marked_processes
assert_no_leftovers "at the end"
pass
