// The collector (stacks.hpp): taking every rank's stack through the Python hook
// (python_hook.cpp) or gdb.
#include "launcher/stacks/stacks.hpp"

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
#include "launcher/core/spawn.hpp"
#include "launcher/core/text.hpp"
#include "launcher/watchdog/proc_table.hpp"

namespace dlaunch::launcher {

namespace fs = std::filesystem;

namespace {

// How often the collector looks for finished dumps.
constexpr std::chrono::milliseconds kPollInterval{25};

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

struct StackCollector::Pending {
  RankStack result;
  std::string file;        // the dump file
  size_t offset = 0;       // its size before the signal
  size_t seen = 0;         // its size at the last poll
  std::string main_ident;  // the hook's "main thread" line, for ParseFaulthandler
  int gdb = -1;            // gdb's pid
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
  // Python hooks made it already (python_hook.hpp); gdb's files need it too.
  Status dir = EnsureOwnDir(dumps_dir_);
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
      int fd = dir.ok() ? open(p.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644) : -1;
      int err = errno;
      Result<std::string> gdb = ResolveCommand("gdb");
      if (fd < 0 || !gdb.ok()) {
        p.result.error = !dir.ok() ? dir.message()
                         : fd < 0  ? fmt::format("{}: {}", p.file, std::strerror(err))
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
