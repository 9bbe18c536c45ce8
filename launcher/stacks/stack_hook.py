# dlaunch's stack hook (docs/hangs.md). It registers faulthandler on one
# real-time signal so that dlaunch can print this process's stacks when the job
# hangs, and, when dlaunch asks (launcher/straggler/samples.hpp), samples where
# the main thread spends its time; then it takes itself off sys.path and imports
# the sitecustomize it hides. Every Python worker runs it at start, so it does
# as little as it can; dlaunch's launcher/stacks/stacks.cpp says why. Turn it
# off with dlaunch --no-python-hook.
import os as _os
import sys as _sys


def _dlaunch_hook(code):
    here = _os.path.dirname(__file__)
    kept = []  # the hook's thread, which ends before os.fork(): (stop, start, forget)
    listening = sampling = None
    try:
        listening = _dlaunch_listen()
    except Exception:
        pass
    # One thread takes the stack signal: the sampler's when it runs, else an
    # idle one. A thread costs each worker a third of a millisecond.
    try:
        sampling = _dlaunch_sample(kept, listening)
    except Exception:
        pass
    if listening and not sampling:
        _dlaunch_idle(kept, listening)
    try:
        if kept and _sys.version_info >= (3, 12) and hasattr(_os, "register_at_fork"):
            _dlaunch_fork_safe(kept)
    except Exception:
        pass
    if listening:
        # Last: dlaunch signals this process only once this line names the
        # descriptor, so it never finds the hook half set up.
        signum, fd, get_ident = listening
        try:
            _os.write(fd, b"dlaunch: main thread 0x%016x fd %d\n" % (get_ident(), fd))
        except Exception:
            pass
    try:
        _dlaunch_cache(here, code)
    except Exception:
        pass
    # site.py made every entry absolute before importing this, and the finder
    # named this file after its entry: no abspath needed.
    _sys.path[:] = [p for p in _sys.path if p != here]
    # Python imports the first sitecustomize on sys.path, this file; the one
    # it hides (Debian ships one) is imported here. When there is none, this
    # module stays sitecustomize: the import that runs this file takes it
    # back out of sys.modules when it ends, as site.py's import does.
    me = _sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401
    except ImportError as e:
        if getattr(e, "name", "sitecustomize") != "sitecustomize":
            raise  # the hidden one's own error, reported by site.py as without dlaunch
    finally:
        if "sitecustomize" not in _sys.modules and me is not None:
            _sys.modules["sitecustomize"] = me


def _dlaunch_listen():
    # Registers faulthandler on the stack signal and blocks the signal in the
    # main thread, and so in every thread the script starts: a signal would cut
    # short a system call of theirs (EINTR) that C code may not retry. The
    # thread that takes it comes next. Returns (signal, descriptor, get_ident).
    dumps = _os.environ.get("DLAUNCH_STACKS_DIR")
    signum = int(_os.environ.get("DLAUNCH_STACKS_SIGNAL", "0"))
    if not dumps or signum <= 0:
        return None
    # The C modules only: `signal` would import enum, 3.5 ms a process.
    import _signal as signal
    import _thread
    import atexit
    import faulthandler
    # A raw descriptor: no encoding, no buffer, no ResourceWarning at exit.
    # O_CLOEXEC: after an exec the process is no longer this hook's.
    fd = _os.open("%s/%d.stacks" % (dumps, _os.getpid()),
                  _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT | _os.O_CLOEXEC | _os.O_NOFOLLOW, 0o600)
    faulthandler.register(signum, file=fd, all_threads=True, chain=False)
    # Late in finalization faulthandler puts the signal's default action back,
    # which kills: at exit it is ignored instead (atexit runs these last to
    # first, after the script's own).
    atexit.register(signal.signal, signum, signal.SIG_IGN)
    atexit.register(faulthandler.unregister, signum)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
    return signum, fd, _thread.get_ident


def _dlaunch_idle(kept, listening):
    # The thread that takes the stack signal when no sampler runs.
    import _signal as signal
    import _thread
    signum = listening[0]
    try:
        if _sys.version_info >= (3, 12) and hasattr(_os, "register_at_fork"):
            return _dlaunch_watch(signal, _thread, signum, kept)
        # It waits in C on a lock nobody releases: no Python code of its own.
        # It is started with the signal unblocked, and inherits that.
        stop = _thread.allocate_lock()
        stop.acquire()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        try:
            _thread.start_new_thread(stop.acquire, ())
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
    except Exception:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})  # no thread: the main thread takes it


def _dlaunch_cache(here, code):
    # Python caches this module's bytecode beside it unless told not to
    # (PYTHONDONTWRITEBYTECODE, -B). Compiling it costs a worker about a
    # millisecond (the first compile() of a process sets up every AST type),
    # and the directory is dlaunch's own, kept across jobs: it is cached then
    # too, as Python's own import would.
    cached = __cached__
    if not _sys.dont_write_bytecode or not cached.startswith(here + "/__pycache__/") or _os.path.exists(cached):
        return
    import _frozen_importlib_external as bootstrap
    st = _os.stat(__file__)
    data = bootstrap._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size)
    __loader__._cache_bytecode(__file__, cached, data)


def _dlaunch_watch(signal, _thread, signum, kept):
    # Python 3.12+ warns at os.fork() in a process with more than one thread
    # (_dlaunch_fork_safe): the idle thread that takes the signal is one that
    # can end before a fork and start again after it. The child has no such
    # thread; its signal stays blocked, as in the main thread.
    watcher = []  # [lock that ends it, lock it releases when ending, native id]

    def watch(stop, ended):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        watcher.append(_thread.get_native_id())
        stop.acquire()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signum})  # one arriving now waits for the next
        ended.release()

    def start():
        if watcher:
            return
        stop, ended = _thread.allocate_lock(), _thread.allocate_lock()
        stop.acquire()
        ended.acquire()
        watcher[:] = [stop, ended]
        try:
            _thread.start_new_thread(watch, (stop, ended))
        except Exception:
            watcher[:] = []
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})  # the main thread takes it

    def stop():
        if not watcher:
            return None
        stop, ended = watcher[:2]
        stop.release()
        ended.acquire()  # it has run, so it has written its id
        tid = watcher[2]
        del watcher[:]
        return tid

    def forget():
        del watcher[:]

    start()
    kept.append((stop, start, forget))


def _dlaunch_fork_safe(kept):
    # Python 3.12+ warns at os.fork() in a process with more than one thread,
    # and counts the process's threads (/proc/self/stat) after the fork. The
    # hook's threads end before each fork (each stop() returns the native id
    # of the thread it ended, None when none ran) and come back after it, and
    # in 3.13+, which counts after the after_in_parent hooks, only once the
    # caller of os.fork() runs its next instruction (sys.monitoring, on that
    # one code object). The child has none of them.
    os, sys = _os, _sys  # the module's names are deleted once it has run
    monitoring = sys.monitoring
    hooked = os.getpid()  # a forked child keeps these hooks but has no hook thread
    stopped = []  # the start() of each thread ended for this fork

    def before():
        tids = []
        for stop, start, forget in kept:
            try:
                tid = stop()
            except Exception:
                continue
            if tid is not None:
                stopped.append(start)
                tids.append(tid)
        if not tids:
            return
        import time
        for tid in tids:
            task = "/proc/self/task/%d" % tid
            for _ in range(1000):  # until the kernel no longer counts it; 0.1 s at most
                if not os.path.exists(task):
                    break
                time.sleep(0.0001)

    def child():
        del stopped[:]
        for stop, start, forget in kept:
            forget()

    def parent():
        if not stopped or os.getpid() != hooked:
            return  # none was stopped, or this is a forked child forking
        starts = stopped[:]
        del stopped[:]

        def restart():
            for start in starts:
                try:
                    start()  # each starts nothing when its thread runs
                except Exception:
                    pass

        try:
            caller = sys._getframe(1).f_code
        except ValueError:
            return restart()
        for tool in (4, 3):  # the ids sys.monitoring leaves free of debuggers and profilers
            if monitoring.get_tool(tool) is None:
                break
        else:
            return restart()
        events = monitoring.events.INSTRUCTION

        def resume(code, offset):
            if monitoring.get_tool(tool) == "dlaunch":
                monitoring.set_local_events(tool, caller, 0)
                monitoring.register_callback(tool, events, None)
                monitoring.free_tool_id(tool)
            restart()
            return monitoring.DISABLE

        monitoring.use_tool_id(tool, "dlaunch")
        monitoring.register_callback(tool, events, resume)
        monitoring.set_local_events(tool, caller, events)

    os.register_at_fork(before=before, after_in_child=child, after_in_parent=parent)


def _dlaunch_sample(kept, listening):
    # The sampler of launcher/straggler/samples.hpp, which holds the file's
    # contract. Its variables leave os.environ here, so that the worker's own
    # children (DataLoader workers, subprocesses) do not sample; a bad value
    # starts nothing. Its thread also takes the stack signal (listening, from
    # _dlaunch_listen); returns whether it started.
    os, sys = _os, _sys
    env = os.environ
    texts = [env.pop(name) if name in env else None for name in ("DLAUNCH_SAMPLE_PERIOD_MS", "DLAUNCH_SAMPLE_FLUSH_MS")]
    if texts[0] is None or texts[1] is None:
        return False
    # Decimal digits alone, up to a day: no sign, space, "_" or other digits int() takes.
    ms = [int(t) if t and len(t) <= 8 and not t.strip("0123456789") else 0 for t in texts]
    dumps = env.get("DLAUNCH_STACKS_DIR")
    if not (0 < ms[0] <= 86400000 and 0 < ms[1] <= 86400000 and dumps and os.path.isdir(dumps)):
        return False
    import _signal as signal
    import _thread
    import atexit
    import time
    period, flush = ms[0] / 1000.0, ms[1] / 1000.0
    clock = time.monotonic
    cpu = getattr(time, "thread_time", None)
    if cpu is None and hasattr(time, "CLOCK_THREAD_CPUTIME_ID"):  # before 3.7
        def cpu(gettime=time.clock_gettime, which=time.CLOCK_THREAD_CPUTIME_ID):
            return gettime(which)
    native_id = getattr(_thread, "get_native_id", lambda: None)
    frames_of = sys._current_frames
    main = _thread.get_ident()  # the hook runs in the main thread
    pid = os.getpid()
    path = "%s/%d.samples" % (dumps, pid)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    me = __file__
    # Library code: the standard library (where os.py lies, and the prefixes'
    # lib/pythonX.Y, cheaper than sysconfig) and anything in site- or
    # dist-packages; its PATH is what lies below that directory.
    stdlib = ["%s/" % os.path.dirname(os.__file__)]
    tag = "python%d.%d/" % sys.version_info[:2]
    for name in ("prefix", "base_prefix", "exec_prefix", "base_exec_prefix"):
        prefix = getattr(sys, name, None)
        if prefix and "%s/lib/%s" % (prefix, tag) not in stdlib:
            stdlib += ["%s/lib/%s" % (prefix, tag), "%s/lib64/%s" % (prefix, tag)]
    other, no_user = "(other frames)", "(no user frame)"
    user, top = {}, {}  # ticks by key
    places = {}  # code object: (whether user code, "PATH:"), None for the hook's own
    keys = {}  # (code object, line): key
    # [ticks, late, seconds late, most seconds late, CPU seconds of ended threads]
    counts = [0, 0, 0.0, 0.0, 0.0]
    began = clock()
    running = []  # [lock that ends it, lock it releases when ending, native id]
    ended_for_good = []  # the process exits, or is a forked child

    def clean(text):
        # At most 256 bytes of UTF-8, no control character.
        data = text.encode("utf-8", "replace")[:256]
        text = data.decode("utf-8", "ignore")
        if any(c < " " or c == "\x7f" for c in text):
            text = "".join("?" if c < " " or c == "\x7f" else c for c in text)
        return text

    def place(code):
        name = code.co_filename
        if name == me:
            return None
        if name.startswith("<"):
            return False, name
        for lib in ("/site-packages/", "/dist-packages/"):
            at = name.rfind(lib)
            if at >= 0:
                return False, name[at + len(lib):]
        for lib in stdlib:
            if name.startswith(lib):
                return False, name[len(lib):]
        return True, name[name.rfind("/") + 1:]

    def count(hist, key):
        n = hist.get(key)
        if n is None and len(hist) >= 63:  # 64 keys at most, this one included
            key, n = other, hist.get(other)
        hist[key] = (n or 0) + 1

    def sample():
        frame = frames_of().get(main)
        found = top_key = None
        while frame is not None:
            code = frame.f_code
            where = places.get(code, 0)
            if where == 0:
                if len(places) >= 4096:
                    places.clear()
                where = places[code] = place(code)
            if where is not None:
                line = frame.f_lineno or 0
                key = keys.get((code, line))
                if key is None:
                    if len(keys) >= 4096:
                        keys.clear()
                    key = keys[(code, line)] = clean("%s:%d %s" % (where[1], line, code.co_name))
                if top_key is None:
                    top_key = key
                if where[0]:
                    found = key
                    break
            frame = frame.f_back
        frame = None
        count(user, found or no_user)
        count(top, top_key or no_user)

    def write(cpu_s):
        text = ["dlaunch-samples 1\nperiod_ms %d\nticks %d\nlate %d\nlate_ms %d\nmax_late_ms %d\ncpu_us %d\n"
                "wall_ms %d\n" % (ms[0], counts[0], counts[1], counts[2] * 1000 + 0.5, counts[3] * 1000 + 0.5,
                                  cpu_s * 1e6, (clock() - began) * 1000)]
        for kind, hist in (("user", user), ("top", top)):
            for key, n in hist.items():
                text.append("%s %d %s\n" % (kind, n, key))
        data = "".join(text).encode("utf-8")
        try:
            fd = os.open(path + ".tmp", flags, 0o600)
            try:
                while data:
                    data = data[os.write(fd, data):]
            finally:
                os.close(fd)
            os.replace(path + ".tmp", path)
        except Exception:
            pass  # the next flush tries again

    def loop(stop, ended, now):
        # Waits for each period on `stop`, which start() holds and stop()
        # releases; a wake more than half a period late counts the periods it
        # missed as late, and the schedule skips them. The schedule starts when
        # start() ran: a thread that waited for the GIL to run at all is late.
        try:
            if listening:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {listening[0]})
            running.append(native_id())
            tick, flush_at = now + period, now + flush
            while not stop.acquire(True, max(0.0, tick - clock())):
                now = clock()
                late = now - tick
                if late > period / 2:
                    missed = int(late // period) + 1
                    counts[0] += missed
                    counts[1] += missed
                    counts[2] += late
                    counts[3] = max(counts[3], late)
                    tick += missed * period
                else:
                    sample()
                    counts[0] += 1
                    tick += period
                if now >= flush_at:
                    write(counts[4] + (cpu() if cpu else 0))
                    flush_at += flush * (int((now - flush_at) // flush) + 1)
        except BaseException:
            pass
        finally:
            try:
                if listening:  # one arriving now waits for the next thread
                    signal.pthread_sigmask(signal.SIG_BLOCK, {listening[0]})
                counts[4] += cpu() if cpu else 0
            finally:
                ended.release()

    def start():
        if running or ended_for_good:
            return
        stop, ended = _thread.allocate_lock(), _thread.allocate_lock()
        stop.acquire()
        ended.acquire()
        running[:] = [stop, ended]
        try:
            _thread.start_new_thread(loop, (stop, ended, clock()))
        except Exception:
            running[:] = []
            if listening:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {listening[0]})  # the main thread takes it

    def stop(wait=1.0):
        # The native id of the thread it ended; None when none ran or it did
        # not end within `wait` seconds (a write that hangs: it is left to end
        # alone, and no sampler starts again).
        if not running:
            return None
        if running[0].locked():  # not when told once already
            running[0].release()
        if not running[1].acquire(True, wait):
            return None
        tid = running[2]
        del running[:]
        return tid

    def forget():
        del running[:]
        ended_for_good.append(True)

    def at_exit():
        # Once, cheaply: the thread ends (a flush it is writing completes
        # first), then the last counts are written.
        if os.getpid() != pid or ended_for_good:
            return
        ended_for_good.append(True)
        try:
            stop()
            if not running and counts[0]:  # nothing counted: no file, as none is read as nothing
                write(counts[4])
        except Exception:
            pass

    start()
    if not running:
        return False
    atexit.register(at_exit)
    kept.append((stop, start, forget))
    return True


_dlaunch_hook(_sys._getframe().f_code)
del _dlaunch_hook, _dlaunch_listen, _dlaunch_cache, _dlaunch_watch, _dlaunch_fork_safe, _dlaunch_sample, _os, _sys
