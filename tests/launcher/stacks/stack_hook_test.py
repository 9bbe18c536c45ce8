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
    # Without its variables, no sampler: no thread (above), no file.
    assert [n for n in os.listdir(job.dumps) if not n.endswith(".stacks")] == []


@pytest.mark.parametrize("sampler", [False, True], ids=["idle-thread", "sampler-thread"])
def test_signal_dumps_every_thread_and_interrupts_none(tmp_path, py, sampler):
    # Without a sampler an idle thread takes the signal; with one, the
    # sampler's thread does, and there is no idle thread.
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
    report(main=threading.get_ident(), worker=t.ident, worker_tid=getattr(t, "native_id", None),
           tasks=len(os.listdir("/proc/self/task")))
    def waiting_here():
        return sys.stdin.readline()
    waiting_here()
    report(woke=woke, alive=t.is_alive())
    """), **(sampling(period=20) if sampler else {}))
    try:
        main, _ = header(job, proc.pid)
        got = reported(proc.stdout.readline() + proc.stdout.readline() + proc.stdout.readline() +
                       proc.stdout.readline())
        assert got["main"] == main
        assert got["tasks"] == 3  # the main thread, the script's and the hook's one
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


# The sampler (launcher/straggler/samples.hpp): DUMPS/<pid>.samples.
SAMPLE_FIELDS = ("period_ms", "ticks", "late", "late_ms", "max_late_ms", "cpu_us", "wall_ms")
OTHER_FRAMES, NO_USER_FRAME = "(other frames)", "(no user frame)"


def parse_samples(data):
    """ParseSamples (launcher/straggler/samples.cpp), rule for rule, on the
    file's bytes: a dict of the fields, and "user" and "top" {key: ticks}.
    Fails the test naming the line it refuses."""
    assert len(data) <= 64 * 1024, "%d bytes, over the cap" % len(data)

    def count(text):
        assert text and len(text) <= 18 and not text.strip("0123456789"), text
        return int(text)

    out = dict.fromkeys(SAMPLE_FIELDS, 0)
    out.update(user={}, top={})
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    assert lines and lines[0] == b"dlaunch-samples 1", data[:100]
    for number, line in enumerate(lines[1:], 2):
        if not line:
            continue
        name, _, rest = line.partition(b" ")
        name = name.decode("ascii", "replace")
        if name in ("user", "top"):
            n, sep, key = rest.partition(b" ")
            assert sep and key and len(key) <= 256 and all(c >= 0x20 and c != 0x7f for c in key), \
                "line %d: expected '%s N KEY', got %r" % (number, name, line)
            key = key.decode("utf-8")  # the hook writes UTF-8 (ParseSamples takes any bytes)
            hist = out[name]
            assert key in hist or len(hist) < 64, "line %d: more than 64 '%s' keys" % (number, name)
            hist[key] = hist.get(key, 0) + count(n.decode("ascii", "replace"))
        elif name in SAMPLE_FIELDS:
            out[name] = count(rest.decode("ascii", "replace"))
    return out


def pids_in(job):
    """The pids that left a file in the dump directory."""
    return sorted({int(name.split(".")[0]) for name in os.listdir(job.dumps)})


def samples_file(job, pid):
    return os.path.join(job.dumps, "%d.samples" % pid)


def samples(job, pid):
    with open(samples_file(job, pid), "rb") as f:
        s = parse_samples(f.read())
    # Each tick is attributed once in each histogram, or counted late.
    assert s["ticks"] == sum(s["user"].values()) + s["late"] == sum(s["top"].values()) + s["late"], s
    return s


def sampling(period=20, flush=60000):
    return {"DLAUNCH_SAMPLE_PERIOD_MS": str(period), "DLAUNCH_SAMPLE_FLUSH_MS": str(flush)}


def line_of(path, text):
    with open(path) as f:
        return [i for i, line in enumerate(f, 1) if text in line][0]


def test_sampler_counts_where_the_main_thread_waits(tmp_path, py):
    job = Job(tmp_path, py)
    lib = os.path.join(job.tmp, "lib", "python3", "site-packages", "pkg")
    os.makedirs(lib)
    open(os.path.join(lib, "__init__.py"), "w").close()
    job.script("import time\ndef wait(t):\n    time.sleep(t)\n", name="lib/python3/site-packages/pkg/mod.py")
    script = job.script(PROBE + """
    import time
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "python3", "site-packages"))
    import pkg.mod
    def napping():
        time.sleep(0.2)  # napping
    def in_library():
        pkg.mod.wait(0.2)  # in_library
    def in_stdlib():
        threading.Event().wait(0.2)  # in_stdlib
    report(env=sorted(k for k in os.environ if k.startswith("DLAUNCH_SAMPLE")),
           tasks=len(os.listdir("/proc/self/task")), threads=threading.active_count())
    napping()
    in_library()
    in_stdlib()
    """)
    r = job.run(script, **sampling(period=20))
    assert (r.returncode, r.stderr) == (0, "")
    # The main thread and the sampler, which also takes the stack signal;
    # threading knows of none but the first. The variables are gone.
    assert reported(r.stdout) == {"env": [], "tasks": 2, "threads": 1}
    # Written once, at exit (the flush period is a minute), 0600, no temporary left.
    [pid] = pids_in(job)
    assert sorted(os.listdir(job.dumps)) == ["%d.samples" % pid, "%d.stacks" % pid]
    assert os.stat(samples_file(job, pid)).st_mode & 0o777 == 0o600
    s = samples(job, pid)
    assert s["period_ms"] == 20 and s["wall_ms"] >= 600 and s["ticks"] >= 20
    nap = "worker.py:%d napping" % line_of(script, "# napping")
    lib_user = "worker.py:%d in_library" % line_of(script, "# in_library")
    std_user = "worker.py:%d in_stdlib" % line_of(script, "# in_stdlib")
    user, top = s["user"], s["top"]
    # About 10 ticks each; a loaded host may wake the sampler late for a few.
    for key in (nap, lib_user, std_user):
        assert user.get(key, 0) >= 4, (key, s)
    assert user[nap] + user[lib_user] + user[std_user] > sum(user.values()) / 2, s
    # Innermost overall: the script's frame where it sleeps in C, else the
    # library's, named by its path below site-packages or the standard library.
    assert top.get(nap, 0) == user[nap]
    assert top.get("pkg/mod.py:3 wait", 0) >= 4, s
    std_top = [k for k in top if re.fullmatch(r"threading\.py:[0-9]+ wait", k)]
    assert len(std_top) == 1 and top[std_top[0]] >= 4, s
    assert not any(k.startswith(("sitecustomize", "/")) for k in list(user) + list(top)), s


def test_sampler_counts_a_wake_that_found_the_gil_held_as_late(tmp_path, py):
    # sum() over a range runs in C and never lets go of the GIL: the sampler
    # wakes only once it ends, and cannot know where the time went.
    job = Job(tmp_path, py)
    script = job.script(PROBE + """
    import time
    def napping():
        time.sleep(0.06)
    def hold():
        return sum(range(30000000))  # hold
    napping()  # the sampler is running
    hold()
    napping()
    report(gil=getattr(sys, "_is_gil_enabled", lambda: True)())
    """)
    r = job.run(script, **sampling(period=20))
    assert (r.returncode, r.stderr) == (0, "")
    if not reported(r.stdout)["gil"]:
        pytest.skip("%s: no GIL" % py.name)
    s = samples(job, pids_in(job)[0])
    assert s["late"] >= 2 and s["max_late_ms"] >= 40 and s["late_ms"] >= s["max_late_ms"], s
    hold = "worker.py:%d hold" % line_of(script, "# hold")
    assert s["user"].get(hold, 0) <= 1 and s["top"].get(hold, 0) <= 1, s


def test_sampler_that_never_ticked_writes_no_file(tmp_path, py):
    # A worker that ends within its first period leaves no file, which dlaunch
    # reads as it reads a file of no ticks: nothing sampled.
    job = Job(tmp_path, py)
    r = job.run(job.script(PROBE + """
    report(tasks=len(os.listdir("/proc/self/task")), blocked=sigmask_has("SigBlk"))
    """), **sampling(period=60000))
    assert (r.returncode, r.stderr) == (0, "")
    assert reported(r.stdout) == {"tasks": 2, "blocked": True}
    [pid] = pids_in(job)
    assert os.listdir(job.dumps) == ["%d.stacks" % pid]


def test_sampler_flushes_while_running_and_children_do_not_sample(tmp_path, py):
    job = Job(tmp_path, py)
    child = job.script(PROBE + """
    import time
    time.sleep(0.1)
    report(child_env=sorted(k for k in os.environ if k.startswith("DLAUNCH_SAMPLE")),
           child_tasks=len(os.listdir("/proc/self/task")), child=os.getpid())
    """, name="child.py")
    script = job.script(PROBE + """
    import subprocess, time
    mine = "%s/%d.samples" % (os.environ["DLAUNCH_STACKS_DIR"], os.getpid())
    for _ in range(2000):  # the first flush, 60 ms in
        if os.path.exists(mine):
            break
        time.sleep(0.005)
    report(flushed=open(mine).read().startswith("dlaunch-samples 1\\n"))
    sys.stdout.write(subprocess.run([sys.executable, sys.argv[1]], stdout=subprocess.PIPE,
                                    universal_newlines=True).stdout)
    """)
    r = job.run(script, args=[child], **sampling(period=20, flush=60))
    assert (r.returncode, r.stderr) == (0, "")
    got = reported(r.stdout)
    assert got["flushed"] and got["child_env"] == [] and got["child_tasks"] == 2
    [parent] = [pid for pid in pids_in(job) if pid != got["child"]]
    # The child's hook ran, without a sampler.
    assert sorted(os.listdir(job.dumps)) == sorted(["%d.stacks" % got["child"], "%d.stacks" % parent,
                                                    "%d.samples" % parent])


@pytest.mark.parametrize("case", ["zero", "negative", "fraction", "plus", "underscore", "empty", "too-big",
                                  "other-digits", "flush-zero", "period-alone", "no-dir", "dir-missing"])
def test_bad_sampler_values_start_nothing(tmp_path, py, case):
    job = Job(tmp_path, py)
    period, flush = "20", "20"
    extra = {}
    if case in ("zero", "negative", "fraction", "plus", "underscore", "empty", "too-big", "other-digits"):
        period = {"zero": "0", "negative": "-20", "fraction": "20.5", "plus": "+20", "underscore": "2_0", "empty": "",
                  "too-big": "100000000", "other-digits": "\u0662\u0660"}[case]
    elif case == "flush-zero":
        flush = "0"
    elif case == "period-alone":
        flush = None
    elif case == "no-dir":
        extra = {"DLAUNCH_STACKS_DIR": None}
    elif case == "dir-missing":
        extra = {"DLAUNCH_STACKS_DIR": job.dumps + "/gone"}
    # A sampler would be running by now, and would write its file at exit.
    script = job.script(PROBE + """
    report(env=sorted(k for k in os.environ if k.startswith("DLAUNCH_SAMPLE")),
           tasks=len(os.listdir("/proc/self/task")))
    """)
    r = job.run(script, DLAUNCH_SAMPLE_PERIOD_MS=period, DLAUNCH_SAMPLE_FLUSH_MS=flush, **extra)
    assert (r.returncode, r.stderr) == (0, "")
    # No thread but the signal's (none where the dump directory is bad too),
    # no file, and the variables gone all the same.
    assert reported(r.stdout) == {"env": [], "tasks": 1 if extra else 2}
    assert not [n for n in os.listdir(job.dumps) if ".samples" in n]


# A library module (in a site-packages) for the script of the test below.
TICKS = """
import time
def attributed(path):
    try:
        with open(path, "rb") as f:
            text = f.read()
    except (IOError, OSError):
        return None
    n = {}
    for line in text.split(b"\\n"):
        name, _, value = line.partition(b" ")
        if name in (b"ticks", b"late"):
            n[name] = int(value)
    return n.get(b"ticks", 0) - n.get(b"late", 0)
def waiter(path, more=2, tries=2500):
    # A function that says True until the sampler's file shows `more` ticks
    # attributed since its first call (then one of them was taken after that
    # call); False after `tries` calls whatever the file says.
    state = [None, tries]
    def waiting():
        state[1] -= 1
        now = attributed(path)
        if state[0] is None:
            state[0] = now
            return state[1] > 0
        return state[1] > 0 and (now is None or now < state[0] + more)
    return waiting
"""


def test_sampler_keys_are_bounded_and_clean(tmp_path, py):
    job = Job(tmp_path, py)
    os.makedirs(os.path.join(job.tmp, "lib", "site-packages"))
    job.script(TICKS, name="lib/site-packages/ticks.py")
    # A module whose file name holds a tab and whose function's name is over
    # 256 bytes of UTF-8 (two bytes a letter).
    long_name = "f" + "\u00e9" * 200
    job.script("import time\ndef %s(waiting):\n    while waiting(): time.sleep(0.002)\n" % long_name,
               name="we\tird.py")
    # 72 functions, each of them sampled before the next runs: one line each,
    # where it waits until its own samples show in the file.
    calls = "".join("    def f%d(waiting):\n        while waiting(): time.sleep(0.002)\n" % i for i in range(72))
    script = job.script(PROBE + """
    import importlib.util, time
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib", "site-packages"))
    import ticks
    mine = "%s/%d.samples" % (os.environ["DLAUNCH_STACKS_DIR"], os.getpid())
    spec = importlib.util.spec_from_file_location("weird", os.path.join(os.path.dirname(__file__), "we\\tird.py"))
    weird = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(weird)
    getattr(weird, sys.argv[1])(ticks.waiter(mine))
""" + calls + """
    for i in range(72):
        globals()["f%d" % i](ticks.waiter(mine))
    """)
    r = job.run(script, args=[long_name], **sampling(period=5, flush=5))
    assert (r.returncode, r.stderr) == (0, "")
    s = samples(job, pids_in(job)[0])
    user, top = s["user"], s["top"]
    # 64 keys at most, "(other frames)" among them: once 63 frames have a key
    # of their own, every new one counts there.
    assert len(user) == 64 and len(top) == 64 and top.get(OTHER_FRAMES, 0) > 0, s
    weird = [k for k in user if k.startswith("we?ird.py:3 f\u00e9")]
    assert len(weird) == 1 and len(weird[0].encode("utf-8")) in (255, 256), user
    # Besides the module's own lines and Python's start (the first keys), the
    # functions that kept a key are the first ones, and each later one counted
    # in "(other frames)".
    funcs = sorted(int(m.group(1)) for m in (re.fullmatch(r"worker\.py:[0-9]+ f([0-9]+)", k) for k in user) if m)
    assert funcs == list(range(len(funcs))) and len(funcs) >= 40, user
    assert user.get(OTHER_FRAMES, 0) >= 72 - len(funcs), user
    rest = set(user) - {weird[0], OTHER_FRAMES, NO_USER_FRAME}
    assert all(re.fullmatch(r"worker\.py:[0-9]+ (f[0-9]+|<module>)", k) for k in rest), user


def test_sampler_across_fork(tmp_path, py):
    # Python 3.12+ warns at os.fork() in a threaded process: the sampler ends
    # before each fork and starts again after it in the parent. A child never
    # samples, nor writes a file at its exit.
    job = Job(tmp_path, py)
    script = job.script(PROBE + """
    import time
    time.sleep(0.1)
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            time.sleep(0.02)
            sys.exit(0)  # atexit runs
        os.waitpid(pid, 0)
    def after_fork():
        time.sleep(0.15)  # after_fork
    after_fork()
    report(tasks=len(os.listdir("/proc/self/task")))
    """)
    r = job.run(script, ["-W", "always::DeprecationWarning"], **sampling(period=20))
    assert (r.returncode, r.stderr) == (0, "")
    got = reported(r.stdout)
    assert got["tasks"] == 2  # the sampler is back, and no other thread of the hook's
    [pid] = pids_in(job)  # the children's hooks never ran
    assert sorted(os.listdir(job.dumps)) == ["%d.samples" % pid, "%d.stacks" % pid]
    s = samples(job, pid)
    assert s["user"].get("worker.py:%d after_fork" % line_of(script, "# after_fork"), 0) >= 3, s
