"""The stack hook (launcher/stacks/stack_hook.py), the sitecustomize.py that
dlaunch puts first on every Python worker's PYTHONPATH.

The hook changes the process it runs in (sys.path, sys.modules, the signal
mask, faulthandler, a thread of its own), so every test runs it in a fresh
interpreter, as a worker would: the file from the tree, byte for byte, as
DIR/sitecustomize.py with DIR on PYTHONPATH. Each test runs under every
interpreter of PYTHONS: the one running pytest (Debian's /usr/bin/python3 under
ctest, whose sitecustomize the hook must chain to), that one over a prefix with
no sitecustomize at all, the python3 first on PATH where it is another one, and
those named in DLAUNCH_TEST_PYTHONS (colon-separated, e.g. pyenv's 3.6 to 3.13).

Waits are bounded loops on an event (a line, a file's text, /proc), never a
measure of time.
"""
import atexit
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time

import pytest

HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "launcher", "stacks",
                    "stack_hook.py")
HOOK = os.path.normpath(HOOK)
# launcher/stacks/stacks.cpp: StackSignal().
SIGNUM = signal.SIGRTMAX - 2
HEADER = re.compile(r"dlaunch: main thread 0x([0-9a-f]{16}) fd ([0-9]+)\n")
WAIT_STEPS = 2000  # of 5 ms: 10 s at most for any one event

Python = collections.namedtuple("Python", "name exe env version")


def _version(exe, env=None):
    out = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if out.returncode != 0:
        return None, None
    version, real = out.stdout.split("\n")[:2]
    return tuple(int(x) for x in version.split(".")), real


def _nosite_prefix():
    # This interpreter over a prefix that links every entry of its standard
    # library but sitecustomize.py (what tests/integration/test_stack_hook.sh
    # builds too). None where the library is not where PYTHONHOME would look.
    stdlib = sysconfig.get_paths()["stdlib"]
    tag = "python%d.%d" % sys.version_info[:2]
    if os.path.normpath(stdlib) != os.path.join(sys.base_prefix, "lib", tag):
        return None
    root = tempfile.mkdtemp(prefix="dlaunch-nosite-")
    atexit.register(shutil.rmtree, root, True)
    lib = os.path.join(root, "lib", tag)
    os.makedirs(lib)
    for name in os.listdir(stdlib):
        if name != "sitecustomize.py":
            os.symlink(os.path.join(stdlib, name), os.path.join(lib, name))
    return root


def _pythons():
    found = [Python("this", sys.executable, {}, sys.version_info[:2])]
    seen = {os.path.realpath(sys.executable)}
    prefix = _nosite_prefix()
    if prefix:
        found.append(Python("nosite", sys.executable, {"PYTHONHOME": prefix}, sys.version_info[:2]))
    candidates = [("path", shutil.which("python3"))]
    candidates += [("extra", p) for p in os.environ.get("DLAUNCH_TEST_PYTHONS", "").split(":") if p]
    for name, exe in candidates:
        if not exe:
            continue
        version, real = _version(exe)
        if version and os.path.realpath(real) not in seen:
            seen.add(os.path.realpath(real))
            found.append(Python("%s-%d.%d" % ((name,) + version), real, {}, version))
    return found


PYTHONS = _pythons()


def _has_sitecustomize(py):
    out = subprocess.run([py.exe, "-c", "import importlib.util as u; print(u.find_spec('sitecustomize') is not None)"],
                         env=dict(_clean_env(), **py.env), stdout=subprocess.PIPE, universal_newlines=True)
    return out.stdout.strip() == "True"


def _clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DLAUNCH_"))}


@pytest.fixture(params=PYTHONS, ids=[p.name for p in PYTHONS])
def py(request):
    return request.param


class Job:
    """A hooked Python's surroundings: the hook in hook_dir, its dumps in dumps."""

    def __init__(self, tmp_path, py):
        self.py = py
        self.tmp = str(tmp_path)
        self.hook_dir = os.path.join(self.tmp, "hook")
        self.dumps = os.path.join(self.tmp, "dumps")
        os.mkdir(self.hook_dir, 0o700)
        os.mkdir(self.dumps, 0o700)
        shutil.copyfile(HOOK, os.path.join(self.hook_dir, "sitecustomize.py"))

    def env(self, hook=True, **extra):
        env = _clean_env()
        env.update(self.py.env)
        if hook:
            env.update(PYTHONPATH=self.hook_dir, DLAUNCH_STACKS_DIR=self.dumps, DLAUNCH_STACKS_SIGNAL=str(SIGNUM))
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def script(self, text, name="worker.py"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def argv(self, script, flags=(), args=()):
        return [self.py.exe] + list(flags) + [script] + list(args)

    def run(self, script, flags=(), args=(), hook=True, **extra):
        return subprocess.run(self.argv(script, flags, args), env=self.env(hook, **extra), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, cwd=self.tmp, timeout=60)

    def start(self, script, flags=(), hook=True, **extra):
        return subprocess.Popen(self.argv(script, flags), env=self.env(hook, **extra), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, cwd=self.tmp)

    def dump_file(self, pid):
        return os.path.join(self.dumps, "%d.stacks" % pid)

    def text(self, pid):
        try:
            with open(self.dump_file(pid)) as f:
                return f.read()
        except FileNotFoundError:
            return ""


def wait_for(what, check):
    for _ in range(WAIT_STEPS):
        got = check()
        if got:
            return got
        time.sleep(0.005)
    pytest.fail("no %s within %d tries" % (what, WAIT_STEPS))


def header(job, pid):
    text = wait_for("hook header in %s" % job.dump_file(pid), lambda: job.text(pid))
    m = HEADER.match(text)
    assert m, "the dump file starts %r" % text[:200]
    return int(m.group(1), 16), int(m.group(2))


def threads_of(dump):
    """{ident: (current, text)} of a faulthandler dump: one block a thread."""
    out = {}
    for m in re.finditer(r"^(Current thread|Thread) 0x([0-9a-f]+) \(most recent call first\):\n((?:  .*\n)*)",
                         dump, re.M):
        out[int(m.group(2), 16)] = (m.group(1) == "Current thread", m.group(3))
    return out


def stacks_once_in(job, pid, main, func):
    """Signals `pid` until one dump finds its main thread in `func` (the script
    may not have reached it at the first); returns that dump alone and how many
    signals were sent. Each signal must bring a whole dump."""
    for sent in range(1, 51):
        start = len(job.text(pid))
        os.kill(pid, SIGNUM)
        dump = wait_for("dump %d of %s" % (sent, job.dump_file(pid)), lambda: "<module>" in threads_of(
            job.text(pid)[start:]).get(main, (0, ""))[1] and job.text(pid)[start:])
        if "in %s\n" % func in threads_of(dump)[main][1]:
            return dump, sent
    pytest.fail("%s: the main thread never seen in %s" % (job.dump_file(pid), func))


def signal_mask(pid, tid, field):
    with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    return 0


def delivered(pid):
    # The signal left the process's shared pending set: a thread took it.
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("ShdPnd:"):
                return not int(line.split()[1], 16) >> (SIGNUM - 1) & 1
    return False


def finish(proc, stdin_text="go\n"):
    out, err = proc.communicate(stdin_text, timeout=60)
    return proc.returncode, out, err


# The script's side of the tests: what a worker sees, reported as key=value lines.
PROBE = """
    import json, os, sys, threading
    def report(**kv):
        for k, v in kv.items():
            print("%s=%s" % (k, json.dumps(v)))
        sys.stdout.flush()
    def sigmask_has(field):  # of the calling thread
        with open("/proc/thread-self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return bool(int(line.split()[1], 16) >> ({signum} - 1) & 1)
""".replace("{signum}", str(SIGNUM))


def reported(out):
    return {k: json.loads(v) for k, v in (line.split("=", 1) for line in out.splitlines() if "=" in line)}


def test_hook_sets_up_and_writes_its_header(tmp_path, py):
    job = Job(tmp_path, py)
    r = job.run(job.script(PROBE + """
    import _thread, fcntl, stat
    path = "%s/%d.stacks" % (os.environ["DLAUNCH_STACKS_DIR"], os.getpid())
    head = open(path).read()
    fd = int(head.split()[-1])
    st = os.fstat(fd)
    report(head=head, ident=_thread.get_ident(), same_file=st.st_ino == os.stat(path).st_ino,
           mode=stat.S_IMODE(st.st_mode), cloexec=bool(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC),
           append=bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND), tasks=len(os.listdir("/proc/self/task")),
           threads=threading.active_count(), blocked=sigmask_has("SigBlk"), caught=sigmask_has("SigCgt"),
           path=sys.path)
    """))
    assert (r.returncode, r.stderr) == (0, "")
    got = reported(r.stdout)
    m = HEADER.fullmatch(got["head"])
    assert m, got["head"]
    assert int(m.group(1), 16) == got["ident"]  # the main thread's ident, as faulthandler prints it
    assert got["same_file"] and got["mode"] == 0o600 and got["cloexec"] and got["append"]
    # One idle thread of its own, which threading does not list; the script's
    # main thread blocks the signal, and a handler is installed for it.
    assert got["tasks"] == 2 and got["threads"] == 1
    assert got["blocked"] and got["caught"]
    assert job.hook_dir not in got["path"]


def test_signal_dumps_every_thread_and_interrupts_none(tmp_path, py):
    job = Job(tmp_path, py)
    proc = job.start(job.script(PROBE + """
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    woke = []
    started = threading.Event()
    def in_pause():
        started.set()
        woke.append(libc.pause())  # returns only once a handler runs in this thread
    t = threading.Thread(target=in_pause, daemon=True)
    t.start()
    started.wait()
    report(main=threading.get_ident(), worker=t.ident, worker_tid=getattr(t, "native_id", None))
    def waiting_here():
        return sys.stdin.readline()
    waiting_here()
    report(woke=woke, alive=t.is_alive())
    """))
    try:
        main, _ = header(job, proc.pid)
        got = reported(proc.stdout.readline() + proc.stdout.readline() + proc.stdout.readline())
        assert got["main"] == main
        if got["worker_tid"]:
            # In pause() (sleeping), and with the signal blocked like the main thread.
            wait_for("worker thread asleep", lambda: "State:\tS" in open(
                "/proc/%d/task/%d/status" % (proc.pid, got["worker_tid"])).read())
            assert signal_mask(proc.pid, got["worker_tid"], "SigBlk") >> (SIGNUM - 1) & 1
        dump, sent = stacks_once_in(job, proc.pid, main, "waiting_here")
    finally:
        rc, out, err = finish(proc)
    threads = threads_of(dump)
    assert "in waiting_here" in threads[main][1]
    assert "in in_pause" in threads[got["worker"]][1]
    # The signal was taken by the hook's own thread (faulthandler marks it
    # "Current thread" once that thread has started running Python's side):
    # neither the main thread nor the script's ran the handler, so neither was
    # interrupted, and pause() never returned.
    assert not threads[main][0] and not threads[got["worker"]][0]
    assert (rc, err) == (0, "")
    assert reported(out) == {"woke": [], "alive": True}


def test_signal_after_the_script_closed_the_hooks_fd(tmp_path, py):
    job = Job(tmp_path, py)
    proc = job.start(job.script("""
    import os, sys
    head = open("%s/%d.stacks" % (os.environ["DLAUNCH_STACKS_DIR"], os.getpid())).read()
    os.close(int(head.split()[-1]))
    print("closed")
    sys.stdout.flush()
    sys.stdin.readline()
    print("alive")
    """))
    try:
        header(job, proc.pid)
        assert proc.stdout.readline() == "closed\n"
        before = job.text(proc.pid)
        os.kill(proc.pid, SIGNUM)
        wait_for("the signal taken", lambda: delivered(proc.pid))
    finally:
        rc, out, err = finish(proc)
    assert (rc, out, err) == (0, "alive\n", "")
    assert job.text(proc.pid) == before  # faulthandler's writes failed (EBADF), quietly


@pytest.mark.parametrize("case", ["no-dir", "dir-empty", "dir-missing", "dir-is-file", "signal-word", "signal-empty",
                                  "signal-zero", "signal-negative", "signal-out-of-range", "dump-is-link"])
def test_bad_environment_leaves_the_worker_alone(tmp_path, py, case):
    job = Job(tmp_path, py)
    target = os.path.join(job.tmp, "target")
    with open(target, "w") as f:
        f.write("mine\n")
    extra = {
        "no-dir": {"DLAUNCH_STACKS_DIR": None},
        "dir-empty": {"DLAUNCH_STACKS_DIR": ""},
        "dir-missing": {"DLAUNCH_STACKS_DIR": job.dumps + "/gone"},
        "dir-is-file": {"DLAUNCH_STACKS_DIR": target},
        "signal-word": {"DLAUNCH_STACKS_SIGNAL": "SIGRTMAX"},
        "signal-empty": {"DLAUNCH_STACKS_SIGNAL": ""},
        "signal-zero": {"DLAUNCH_STACKS_SIGNAL": "0"},
        "signal-negative": {"DLAUNCH_STACKS_SIGNAL": "-5"},
        "signal-out-of-range": {"DLAUNCH_STACKS_SIGNAL": "4096"},
        "dump-is-link": {},
    }[case]
    script = job.script(PROBE + """
    report(argv=sys.argv[1:], path=sys.path, tasks=len(os.listdir("/proc/self/task")), caught=sigmask_has("SigCgt"),
           blocked=sigmask_has("SigBlk"))
    sys.exit(5)
    """)
    if case == "dump-is-link":
        # The dump's name taken by a link (the pid is the shell's, which execs Python).
        argv = ["sh", "-c", 'ln -s "$0" "$DLAUNCH_STACKS_DIR/$$.stacks" && exec "$@"', target] + job.argv(script,
                                                                                                       args=["a b"])
        r = subprocess.run(argv, env=job.env(**extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
    else:
        r = job.run(script, args=["a b"], **extra)
    assert (r.returncode, r.stderr) == (5, "")
    got = reported(r.stdout)
    assert got["argv"] == ["a b"] and job.hook_dir not in got["path"]
    # No header anywhere: dlaunch never signals this worker. No thread, no
    # handler and no blocked signal are left behind, except where faulthandler
    # refused the number after the file was opened.
    for name in os.listdir(job.dumps):
        if os.path.islink(os.path.join(job.dumps, name)):
            continue  # the planted link, still one (its target is read below)
        with open(os.path.join(job.dumps, name)) as f:
            assert f.read() == ""
    with open(target) as f:
        assert f.read() == "mine\n"
    assert got["tasks"] == 1 and not got["caught"] and not got["blocked"]


@pytest.mark.parametrize("missing", ["faulthandler", "atexit", "_thread.start_new_thread"])
def test_missing_modules(tmp_path, py, missing):
    """The hook imported directly (python -S: no site, so the script imports it
    after taking a module away)."""
    job = Job(tmp_path, py)
    if missing == "_thread.start_new_thread":
        take = "import _thread\ndef refused(*a): raise RuntimeError('can\\'t start new thread')\n" \
               "_thread.start_new_thread = refused\n"
    else:
        take = "sys.modules[%r] = None\n" % missing
    proc = job.start(job.script("import os, sys, _thread\n" + take + textwrap.dedent("""
    import sitecustomize
    print("ran %d" % len(os.listdir("/proc/self/task")))
    sys.stdout.flush()
    def waiting_here():
        return sys.stdin.readline()
    waiting_here()
    """)), flags=["-S"])
    try:
        assert proc.stdout.readline() == "ran 1\n"  # no thread of the hook's
        if missing == "_thread.start_new_thread":
            # No idle thread: the main thread takes the signal itself.
            main, _ = header(job, proc.pid)
            dump, sent = stacks_once_in(job, proc.pid, main, "waiting_here")
            assert threads_of(dump)[main][0] and "in waiting_here" in threads_of(dump)[main][1]
    finally:
        rc, out, err = finish(proc)
    assert (rc, out, err) == (0, "", "")
    if missing != "_thread.start_new_thread":
        assert os.listdir(job.dumps) == []  # it stopped before opening the file


def test_imported_twice_dumps_once(tmp_path, py):
    job = Job(tmp_path, py)
    script = job.script(PROBE + """
    import importlib.util
    before = sys.modules["sitecustomize"].__file__
    spec = importlib.util.spec_from_file_location("sitecustomize", os.path.join(sys.argv[1], "sitecustomize.py"))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    report(same=sys.modules["sitecustomize"].__file__ == before, path=sys.path, threads=threading.active_count())
    def waiting_here():
        return sys.stdin.readline()
    waiting_here()
    """)
    proc = subprocess.Popen(job.argv(script, args=[job.hook_dir]), env=job.env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    try:
        got = reported(proc.stdout.readline() + proc.stdout.readline() + proc.stdout.readline())
        heads = job.text(proc.pid).splitlines(True)
        assert len(heads) == 2 and all(HEADER.fullmatch(h) for h in heads), heads
        main = int(HEADER.match(heads[0]).group(1), 16)
        dump, sent = stacks_once_in(job, proc.pid, main, "waiting_here")
    finally:
        rc, out, err = finish(proc)
    assert (rc, err) == (0, "")
    assert got["same"] and job.hook_dir not in got["path"] and got["threads"] == 1
    # One handler for the signal, however often registered: one dump a signal.
    # (A thread just started may still carry its creator's ident: count the
    # main thread's bottom frame, not its ident.)
    assert len(re.findall(r"^  File .* in <module>$", job.text(proc.pid), re.M)) == sent
    assert dump.count("in waiting_here") == 1


def test_python_started_by_a_hooked_one_takes_the_signal(tmp_path, py):
    # The child inherits the signal blocked (the parent's main thread blocks
    # it); its own hook unblocks it in its own idle thread.
    job = Job(tmp_path, py)
    child = job.script("""
    import sys
    print("child up")
    sys.stdout.flush()
    def child_waits():
        return sys.stdin.readline()
    child_waits()
    """, name="child.py")
    proc = subprocess.Popen(job.argv(job.script("""
    import subprocess, sys
    c = subprocess.Popen([sys.executable, sys.argv[1]], stdout=subprocess.PIPE, universal_newlines=True)
    print(c.pid, c.stdout.readline().strip())
    sys.stdout.flush()
    sys.exit(c.wait())
    """, name="parent.py"), args=[child]), env=job.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True)
    try:
        pid, up = proc.stdout.readline().split(" ", 1)
        pid = int(pid)
        assert up == "child up\n"
        main, _ = header(job, pid)
        assert header(job, proc.pid)  # the parent's hook is its own
        dump, sent = stacks_once_in(job, pid, main, "child_waits")
    finally:
        rc, out, err = finish(proc)
    assert "in child_waits" in threads_of(dump)[main][1]
    assert (rc, err) == (0, "")


def test_at_exit_the_signal_is_ignored(tmp_path, py):
    # Once the atexit handlers have run, faulthandler has let go of the signal;
    # its default action would kill the worker, so the hook ignores it then.
    job = Job(tmp_path, py)
    r = job.run(job.script("""
    import atexit, os, sys
    atexit._run_exitfuncs()
    os.kill(os.getpid(), %d)
    print("alive")
    sys.exit(3)
    """ % SIGNUM))
    assert (r.returncode, r.stdout, r.stderr) == (3, "alive\n", "")


def test_hidden_sitecustomize_runs_as_without_the_hook(tmp_path, py):
    job = Job(tmp_path, py)
    later = os.path.join(job.tmp, "later")
    os.mkdir(later)
    with open(os.path.join(later, "sitecustomize.py"), "w") as f:
        f.write("import os\nos.environ['CHAINED'] = 'yes'\n")
    script = job.script("""
    import os, sys, sitecustomize
    print(sitecustomize.__file__, os.environ.get("CHAINED", "-"), sys.argv[1] in sys.path)
    """)

    def run(hook=True, **env):  # prints which sitecustomize, whether it ran, whether the hook is on sys.path
        return job.run(script, args=[job.hook_dir], hook=hook, **env)

    r = run(PYTHONPATH=job.hook_dir + ":" + later)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == "%s yes False\n" % os.path.join(later, "sitecustomize.py")
    # None further on: the one the interpreter has (Debian's), else the hook
    # itself stays sitecustomize.
    r, without = run(), run(hook=False)
    assert (r.returncode, r.stderr) == (0, "")
    if _has_sitecustomize(py):
        assert r.stdout == without.stdout
    else:
        assert r.stdout == "%s - False\n" % os.path.join(job.hook_dir, "sitecustomize.py")
    # The hidden one's own ImportError is reported by site.py, as without the hook.
    with open(os.path.join(later, "sitecustomize.py"), "w") as f:
        f.write("import no_such_module_of_dlaunch\n")
    r, without = run(PYTHONPATH=job.hook_dir + ":" + later), run(hook=False, PYTHONPATH=later)
    assert "no_such_module_of_dlaunch" in without.stderr
    assert (r.returncode, r.stdout, r.stderr) == (without.returncode, without.stdout, without.stderr)


@pytest.mark.parametrize("flags", [[], ["-W", "error"], ["-X", "dev"], ["-B"]], ids=["plain", "W-error", "X-dev", "B"])
def test_the_worker_sees_what_it_would_without_the_hook(tmp_path, py, flags):
    job = Job(tmp_path, py)
    script = job.script("""
    import os, subprocess, sys, threading, warnings
    child = subprocess.run([sys.executable, "-c", "print('child ok')"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    print(sys.argv, sys.path, warnings.filters, child.stdout, child.stderr, threading.active_count(), sys.flags)
    sys.exit(4)
    """)
    r = job.run(script, flags, ["a", "b c"])
    without = job.run(script, flags, ["a", "b c"], hook=False)
    assert (r.returncode, r.stderr) == (4, "")
    assert (r.returncode, r.stdout, r.stderr) == (without.returncode, without.stdout, without.stderr)


def test_bytecode_is_cached_even_when_python_is_told_not_to(tmp_path, py):
    # The hook's directory is dlaunch's, kept across jobs: a second worker
    # loads the bytecode the first one wrote, and compiles nothing.
    job = Job(tmp_path, py)
    script = job.script("import sys\n")
    cache = os.path.join(job.hook_dir, "__pycache__")
    r = job.run(script, PYTHONDONTWRITEBYTECODE="1")
    assert (r.returncode, r.stderr) == (0, "")
    if py.version < (3, 7):
        # No importlib._code_to_timestamp_pyc: the hook leaves it to Python.
        assert not os.path.exists(cache)
        return
    pycs = os.listdir(cache)
    assert len(pycs) == 1 and pycs[0].startswith("sitecustomize.")
    st = os.stat(os.path.join(cache, pycs[0]))
    r = job.run(script, ["-v"], PYTHONDONTWRITEBYTECODE="1")
    assert "code object from '%s'" % os.path.join(cache, pycs[0]) in r.stderr
    assert os.stat(os.path.join(cache, pycs[0])).st_mtime_ns == st.st_mtime_ns
    # The script's own directory keeps Python's rule: nothing is written there.
    assert not os.path.exists(os.path.join(job.tmp, "__pycache__"))


def test_fork_gives_no_thread_warning_and_stacks_still_come(tmp_path, py):
    if py.version < (3, 12):
        pytest.skip("%s: Python %d.%d has no warning at os.fork() in a threaded process" % ((py.name,) + py.version))
    job = Job(tmp_path, py)
    proc = job.start(job.script("""
    import os, sys
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        os.waitpid(pid, 0)
    print("forked")
    sys.stdout.flush()
    def waiting_here():
        return sys.stdin.readline()
    waiting_here()
    """), flags=["-W", "always::DeprecationWarning"])  # as an error os.fork() drops it unseen
    try:
        main, _ = header(job, proc.pid)
        assert proc.stdout.readline() == "forked\n"
        dump, sent = stacks_once_in(job, proc.pid, main, "waiting_here")
    finally:
        rc, out, err = finish(proc)
    assert "in waiting_here" in threads_of(dump)[main][1]
    assert (rc, out, err) == (0, "", "")
