// The stack hook and the collector (stacks.hpp): the Python source the workers
// load, and taking every rank's stack through it or gdb. About 400 lines; the
// hook's source is a fifth of them.
#include "launcher/process/stacks.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "launcher/core/private_dir.hpp"
#include "launcher/core/text.hpp"
#include "launcher/process/adopted.hpp"
#include "launcher/process/process.hpp"

namespace dlaunch::launcher {

namespace fs = std::filesystem;

namespace {

// How often the collector looks for finished dumps.
constexpr std::chrono::milliseconds kPollInterval{25};

// The hook, written into the run directory. Python, because it runs inside the
// worker's interpreter; kept to what every Python 3 has.
constexpr std::string_view kPythonHook = R"PY(# dlaunch's stack hook (README: "Hangs"). It registers faulthandler on one
# real-time signal so that dlaunch can print this process's stacks when the job
# hangs, then takes itself off sys.path and imports the sitecustomize it hides.
# Turn it off with dlaunch --no-python-hook.
import os as _os
import sys as _sys


def _dlaunch_hook():
    here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    dumps = _os.environ.get("DLAUNCH_STACKS_DIR")
    try:
        signum = int(_os.environ.get("DLAUNCH_STACKS_SIGNAL", "0"))
    except ValueError:
        signum = 0
    if dumps and signum > 0:
        try:
            _dlaunch_listen(dumps, signum)
        except Exception:
            pass
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


def _dlaunch_listen(dumps, signum):
    # The C modules only: `signal` would import enum, 3.5 ms a process.
    import _signal as signal
    import _thread
    import faulthandler
    # A raw descriptor, not a file object: no encoding, no buffer, and no
    # ResourceWarning at exit. O_CLOEXEC: after an exec the process is no
    # longer this hook's, and dlaunch sees that by the descriptor named below
    # no longer being this file (stacks.cpp, HookOf).
    fd = _os.open(_os.path.join(dumps, "%d.stacks" % _os.getpid()),
                  _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT | _os.O_CLOEXEC | _os.O_NOFOLLOW, 0o600)
    _os.write(fd, b"dlaunch: main thread 0x%016x fd %d\n" % (_thread.get_ident(), fd))
    faulthandler.register(signum, file=fd, all_threads=True, chain=False)
    # The signal must never interrupt the script's own threads: a call in C++
    # underneath Python (torch's TCPStore) dies of EINTR. It is blocked here,
    # so in every thread the script starts (and in the processes it starts:
    # README, "Hangs"), and taken by one idle thread of the hook's own
    # (_thread: threading never lists it); faulthandler dumps every thread
    # from there.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
    watcher = []  # [lock that ends it, lock it releases when ending, native id]
    native_id = getattr(_thread, "get_native_id", int)  # 3.8+; used by 3.12+ only

    def watch(stop, ended):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        watcher.append(native_id())
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
    # Late in finalization faulthandler puts the signal's default action back,
    # which kills; a rank still exiting (libtorch's destructors) when a hang is
    # suspected must not die of it. Registered first, so it runs after the
    # script's own atexit functions.
    def ignore():
        faulthandler.unregister(signum)
        signal.signal(signum, signal.SIG_IGN)

    import atexit
    atexit.register(ignore)
    if _sys.version_info >= (3, 12) and hasattr(_os, "register_at_fork"):
        _dlaunch_fork_hooks(watcher, start)


def _dlaunch_fork_hooks(watcher, start):
    # Python 3.12+ warns at os.fork() in a process with more than one thread,
    # and counts the process's threads (/proc/self/stat) after the fork. The
    # hook's thread ends before each fork and comes back after it, and in
    # 3.13+, which counts after the after_in_parent hooks, only once the
    # caller of os.fork() runs its next instruction (sys.monitoring, on that
    # one code object). The child has no hook thread; its signal stays blocked.
    os, sys = _os, _sys  # the module's names are deleted once it has run
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


_dlaunch_hook()
del _dlaunch_hook, _dlaunch_listen, _dlaunch_fork_hooks, _os, _sys
)PY";

// The most of a dump file dlaunch reads: the worker writes it.
constexpr size_t kMaxDumpRead = 16 * kMaxStackRaw;

std::string ReadFrom(const std::string& path, size_t offset) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  f.seekg(static_cast<std::streamoff>(offset));
  std::string out(kMaxDumpRead, '\0');
  f.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(f.gcount()));
  return out;
}

size_t FileSize(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

bool Gone(int pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// The hook of `pid`, when it is alive: DUMPS/PID.stacks names, in its last
// header (a Python that exec()s Python appends one), a descriptor that `pid`
// still holds open on that very file. The hook opens it O_CLOEXEC, so an exec
// into anything else (which may unblock the signal and die of it), a stale
// file of an earlier process with the same pid, and a forked child that never
// ran the hook all fail this, and are never sent the signal.
std::optional<HookHeader> LiveHook(const std::string& dumps_dir, int pid) {
  std::string file = fmt::format("{}/{}.stacks", dumps_dir, pid);
  struct stat st {};
  if (lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > kMaxDumpRead)
    return std::nullopt;
  std::string text = ReadFrom(file, 0);
  std::optional<HookHeader> last;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.find('\n', pos), text.size());
    if (std::optional<HookHeader> h = ParseHookHeader(std::string_view(text).substr(pos, end - pos))) last = h;
    pos = end + 1;
  }
  struct stat held {};
  if (!last || stat(fmt::format("/proc/{}/fd/{}", pid, last->fd).c_str(), &held) != 0 || held.st_dev != st.st_dev ||
      held.st_ino != st.st_ino)
    return std::nullopt;
  return last;
}

// The process of a worker's tree that gdb reads: the last one (`sh -c 'exec
// ...'` has become it already), unless one before it is in D state: a process
// in vfork() waits in D for its child to exec, and the rank is the parent.
int GdbTarget(const std::vector<ProcStat>& table, const std::vector<int>& tree) {
  for (int pid : tree) {
    auto it = std::find_if(table.begin(), table.end(), [&](const ProcStat& s) { return s.pid == pid; });
    if (it != table.end() && it->state == 'D') return pid;
  }
  return tree.back();
}

}  // namespace

int StackSignal() { return SIGRTMAX - 2; }

Status WritePythonHook(const std::string& hook_dir, const std::string& dumps_dir) {
  // Python imports whatever it finds in hook_dir as root's code would be: only
  // a directory of ours that nobody else can write (private_dir.hpp).
  if (Status s = EnsureOwnDir(hook_dir); !s.ok()) return s;
  if (Status s = EnsureOwnDir(dumps_dir); !s.ok()) return s;
  return WriteFile(hook_dir + "/sitecustomize.py", kPythonHook);
}

void AddPythonHook(envmap::EnvMap& env, const std::string& hook_dir, const std::string& dumps_dir) {
  auto it = env.find("PYTHONPATH");
  env["PYTHONPATH"] = it == env.end() || it->second.empty() ? hook_dir : hook_dir + ":" + it->second;
  env["DLAUNCH_STACKS_DIR"] = dumps_dir;
  env["DLAUNCH_STACKS_SIGNAL"] = std::to_string(StackSignal());
}


struct StackCollector::Pending {
  RankStack result;
  std::string file;   // the dump file
  size_t offset = 0;  // its size before the signal
  size_t seen = 0;    // its size at the last poll
  std::string main_ident;  // the hook's "main thread" line, for ParseFaulthandler
  int gdb = -1;       // gdb's pid
  bool done = false;
};

StackCollector::StackCollector(boost::asio::io_context& io, std::string dumps_dir, std::chrono::milliseconds limit)
    : io_(io), dumps_dir_(std::move(dumps_dir)), limit_(limit), timer_(io) {}

StackCollector::~StackCollector() {
  for (Pending& p : pending_)
    if (p.gdb > 0 && !p.done) kill(p.gdb, SIGKILL);
}

bool StackCollector::Collect(std::vector<Target> targets, std::function<void(std::vector<RankStack>)> done) {
  if (busy_) return false;
  busy_ = true;
  done_ = std::move(done);
  pending_.clear();
  std::vector<ProcStat> table = ReadProcessTable();
  for (const Target& t : targets) {
    Pending p;
    p.result.rank = t.rank;
    p.result.pid = t.pid;
    // A Python process of this worker whose hook ran: the worker itself, else
    // the first descendant (a shell or a launcher in between).
    std::vector<int> tree = {t.pid};
    for (int d : Descendants(table, t.pid)) tree.push_back(d);
    int python = -1;
    std::optional<HookHeader> hook;
    for (int pid : tree) {
      if ((hook = LiveHook(dumps_dir_, pid))) {
        python = pid;
        break;
      }
    }
    if (python > 0) {
      p.result.pid = python;
      p.result.how = "python";
      p.file = fmt::format("{}/{}.stacks", dumps_dir_, python);
      p.main_ident = hook->main_ident;
      p.offset = p.seen = FileSize(p.file);
      // To the process: only the hook's own thread leaves the signal unblocked,
      // so no thread of the script is interrupted (kPythonHook).
      if (kill(python, StackSignal()) != 0) {
        p.result.error = fmt::format("signal: {}", std::strerror(errno));
        p.done = true;
      }
    } else {
      // Not Python, or Python without a live hook: gdb.
      int pid = GdbTarget(table, tree);
      p.result.pid = pid;
      p.result.how = "gdb";
      p.file = fmt::format("{}/gdb-{}.txt", dumps_dir_, pid);
      int fd = open(p.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      Result<std::string> gdb = ResolveCommand("gdb");
      if (fd < 0 || !gdb.ok()) {
        p.result.error = fd < 0 ? fmt::format("{}: {}", p.file, std::strerror(errno))
                                : "gdb is not installed";
        p.done = true;
        if (fd >= 0) close(fd);
      } else {
        SpawnSpec spec;
        spec.exe = *gdb;
        spec.args = {"-nx", "-batch", "-p", std::to_string(pid), "-ex", "thread apply all bt"};
        spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
        spec.stdout_fd = fd;
        spec.stderr_fd = fd;
        Result<int> started = SpawnWorker(spec);
        close(fd);
        if (!started.ok()) {
          p.result.error = started.status().message();
          p.done = true;
        } else {
          p.gdb = *started;
        }
      }
    }
    pending_.push_back(std::move(p));
  }
  deadline_ = std::chrono::steady_clock::now() + limit_;
  Poll();
  return true;
}

void StackCollector::Poll() {
  bool late = std::chrono::steady_clock::now() >= deadline_;
  bool all = true;
  for (Pending& p : pending_) {
    if (p.done) continue;
    if (p.result.how == "python") {
      // faulthandler writes the whole dump from its signal handler: once the
      // file has grown and then stood still for a poll, it is complete.
      size_t size = FileSize(p.file);
      if (size > p.offset && size == p.seen) {
        p.result.raw = ReadFrom(p.file, p.offset);
        p.result.threads = ParseFaulthandler(p.result.raw, p.main_ident);
        p.done = true;
      }
      p.seen = size;
    } else if (Gone(p.gdb)) {
      p.result.raw = ReadFrom(p.file, 0);
      p.result.threads = ParseGdb(p.result.raw, p.result.pid);
      if (p.result.threads.empty() || p.result.Main() == nullptr || p.result.Main()->frames.empty()) {
        std::string first = p.result.raw.substr(0, p.result.raw.find('\n'));
        p.result.error = fmt::format("gdb: {}", first.empty() ? "no stack" : first);
      }
      p.done = true;
    }
    if (!p.done && late) {
      p.result.error = fmt::format("no stack within {:.1f}s", std::chrono::duration<double>(limit_).count());
      if (p.gdb > 0) kill(p.gdb, SIGKILL);
      p.done = true;
    }
    all = all && p.done;
  }
  if (all) return Finish();
  timer_.expires_after(kPollInterval);
  timer_.async_wait([this, alive = life_.token()](boost::system::error_code ec) {
    if (!ec && !alive.expired()) Poll();
  });
}

void StackCollector::Finish() {
  std::vector<RankStack> out;
  for (Pending& p : pending_) out.push_back(std::move(p.result));
  std::sort(out.begin(), out.end(), [](const RankStack& a, const RankStack& b) { return a.rank < b.rank; });
  pending_.clear();
  busy_ = false;
  auto done = std::move(done_);
  done(std::move(out));
}

}  // namespace dlaunch::launcher
