# dlaunch's stack hook (docs/hangs.md). It registers faulthandler on one
# real-time signal so that dlaunch can print this process's stacks when the job
# hangs, then takes itself off sys.path and imports the sitecustomize it hides.
# Every Python worker runs it at start, so it does as little as it can; dlaunch's
# launcher/stacks/stacks.cpp says why. Turn it off with dlaunch --no-python-hook.
import os as _os
import sys as _sys


def _dlaunch_hook(code):
    here = _os.path.dirname(__file__)
    try:
        _dlaunch_listen()
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
    dumps = _os.environ.get("DLAUNCH_STACKS_DIR")
    signum = int(_os.environ.get("DLAUNCH_STACKS_SIGNAL", "0"))
    if not dumps or signum <= 0:
        return
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
    if _sys.version_info >= (3, 12) and hasattr(_os, "register_at_fork"):
        _dlaunch_fork_safe(signal, _thread, signum)
    else:
        try:
            # One idle thread takes the signal; the main thread, and so every
            # thread the script starts, blocks it. The thread waits in C on a
            # lock nobody releases: no Python code of its own. It is unblocked
            # here first, as a Python started by a hooked one inherits it blocked.
            stop = _thread.allocate_lock()
            stop.acquire()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
            _thread.start_new_thread(stop.acquire, ())
            signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
        except Exception:
            pass  # no thread: the main thread takes the signal
    # Last: dlaunch signals this process only once this line names the
    # descriptor, so it never finds the hook half set up.
    _os.write(fd, b"dlaunch: main thread 0x%016x fd %d\n" % (_thread.get_ident(), fd))


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


def _dlaunch_fork_safe(signal, _thread, signum):
    # Python 3.12+ warns at os.fork() in a process with more than one thread,
    # and counts the process's threads (/proc/self/stat) after the fork. The
    # hook's thread ends before each fork and comes back after it, and in
    # 3.13+, which counts after the after_in_parent hooks, only once the
    # caller of os.fork() runs its next instruction (sys.monitoring, on that
    # one code object). The child has no hook thread; its signal stays blocked.
    os, sys = _os, _sys  # the module's names are deleted once it has run
    signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
    watcher = []  # [lock that ends it, lock it releases when ending, native id]

    def watch(stop, ended):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        watcher.append(_thread.get_native_id())
        stop.acquire()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signum})  # one arriving now waits for the next
        ended.release()

    def start():
        stop, ended = _thread.allocate_lock(), _thread.allocate_lock()
        stop.acquire()
        ended.acquire()
        watcher[:] = [stop, ended]
        try:
            _thread.start_new_thread(watch, (stop, ended))
        except Exception:
            watcher[:] = []
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})  # the main thread takes it

    start()
    monitoring = sys.monitoring
    hooked = os.getpid()  # a forked child keeps these hooks but has no hook thread

    def before():
        if not watcher:
            return
        stop, ended = watcher[:2]
        stop.release()
        ended.acquire()  # it has run, so it has written its id
        tid = watcher[2]
        del watcher[:]
        import time
        task = "/proc/self/task/%d" % tid
        for _ in range(1000):  # until the kernel no longer counts it; 0.1 s at most
            if not os.path.exists(task):
                break
            time.sleep(0.0001)

    def child():
        del watcher[:]

    def parent():
        if watcher or os.getpid() != hooked:
            return  # it was never stopped, or this is a forked child forking
        try:
            caller = sys._getframe(1).f_code
        except ValueError:
            return start()
        for tool in (4, 3):  # the ids sys.monitoring leaves free of debuggers and profilers
            if monitoring.get_tool(tool) is None:
                break
        else:
            return start()
        events = monitoring.events.INSTRUCTION

        def resume(code, offset):
            if monitoring.get_tool(tool) == "dlaunch":
                monitoring.set_local_events(tool, caller, 0)
                monitoring.register_callback(tool, events, None)
                monitoring.free_tool_id(tool)
            if not watcher:
                start()
            return monitoring.DISABLE

        monitoring.use_tool_id(tool, "dlaunch")
        monitoring.register_callback(tool, events, resume)
        monitoring.set_local_events(tool, caller, events)

    os.register_at_fork(before=before, after_in_child=child, after_in_parent=parent)


_dlaunch_hook(_sys._getframe().f_code)
del _dlaunch_hook, _dlaunch_listen, _dlaunch_cache, _dlaunch_fork_safe, _os, _sys
