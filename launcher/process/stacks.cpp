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
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <tuple>

#include <boost/json/array.hpp>
#include <boost/json/string.hpp>
#include <fmt/format.h>

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
            # The C modules: `signal` would import enum, 3.5 ms a process.
            import _signal as signal
            import _thread
            import faulthandler
            import time
            f = open(_os.path.join(dumps, "%d.stacks" % _os.getpid()), "a")
            f.write("dlaunch: main thread 0x%016x\n" % _thread.get_ident())
            f.flush()
            faulthandler.register(signum, file=f, all_threads=True, chain=False)
            _sys.modules[__name__]._dlaunch_file = f  # open for the process's life
            # The signal must never interrupt the script's own threads: a call
            # in C++ underneath Python (torch's TCPStore) dies of EINTR. It is
            # blocked here, so in every thread the script starts, and taken by
            # one idle thread of the hook's own (_thread: threading never
            # lists it); faulthandler dumps every thread from there.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signum})

            def _watch():
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
                while True:
                    time.sleep(86400)

            try:
                _thread.start_new_thread(_watch, ())
            except Exception:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})  # the main thread takes it

            # Late in finalization faulthandler puts the signal's default action
            # back, which kills; a rank still exiting (libtorch's destructors)
            # when a hang is suspected must not die of it. Registered first, so
            # it runs after the script's own atexit functions.
            def _ignore():
                faulthandler.unregister(signum)
                signal.signal(signum, signal.SIG_IGN)

            import atexit
            atexit.register(_ignore)
        except Exception:
            pass
    del _sys.modules["sitecustomize"]
    try:
        import sitecustomize  # noqa: F401  the one this file hides, if any
    except ImportError:
        pass


_dlaunch_hook()
del _dlaunch_hook, _os, _sys
)PY";

std::string Base(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string ReadFrom(const std::string& path, size_t offset) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  f.seekg(static_cast<std::streamoff>(offset));
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t FileSize(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

bool Gone(int pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// "dlaunch: main thread 0x..." (the hook's first line): the main thread's
// ident as faulthandler prints it, or "" when the file has no such line.
std::string MainThreadOf(const std::string& dump_file) {
  std::ifstream f(dump_file);
  std::string line;
  constexpr std::string_view kTag = "dlaunch: main thread ";
  if (!std::getline(f, line) || !line.starts_with(kTag)) return {};
  return line.substr(kTag.size());
}

}  // namespace

int StackSignal() { return SIGRTMAX - 2; }

Status WritePythonHook(const std::string& hook_dir, const std::string& dumps_dir) {
  std::error_code ec;
  fs::create_directories(hook_dir, ec);
  if (!ec) fs::create_directories(dumps_dir, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot create ({})", ec ? hook_dir : dumps_dir, ec.message()));
  std::string path = hook_dir + "/sitecustomize.py";
  std::ofstream f(path, std::ios::trunc);
  f << kPythonHook;
  if (!f) return Status::Io(fmt::format("{}: cannot write", path));
  return Status::Ok();
}

void AddPythonHook(envmap::EnvMap& env, const std::string& hook_dir, const std::string& dumps_dir) {
  auto it = env.find("PYTHONPATH");
  env["PYTHONPATH"] = it == env.end() || it->second.empty() ? hook_dir : hook_dir + ":" + it->second;
  env["DLAUNCH_STACKS_DIR"] = dumps_dir;
  env["DLAUNCH_STACKS_SIGNAL"] = std::to_string(StackSignal());
}

std::string Frame::Render() const {
  if (file.empty()) return function;
  if (line <= 0) return fmt::format("{} ({})", function, file);
  return fmt::format("{} ({}:{})", function, file, line);
}

std::vector<ThreadStack> ParseFaulthandler(std::string_view text, std::string_view main_ident) {
  std::vector<ThreadStack> threads;
  static const std::regex kFrame(R"re(^\s+File "(.*)", line (\d+) in (.*)$)re");
  std::istringstream in{std::string(text)};
  std::string line;
  bool skipping = false;  // the hook's own thread, which ran the dump
  while (std::getline(in, line)) {
    bool current = line.starts_with("Current thread ");
    if (line.starts_with("Thread ") || current) {
      ThreadStack t;
      t.name = line.substr(0, line.find(" (most recent call first)"));
      std::string_view ident = std::string_view(t.name).substr(t.name.rfind(' ') + 1);
      t.main = main_ident.empty() ? current : ident == main_ident;
      skipping = !main_ident.empty() && current && !t.main;
      if (!skipping) threads.push_back(std::move(t));
      continue;
    }
    std::smatch m;
    if (!skipping && !threads.empty() && std::regex_match(line, m, kFrame))
      threads.back().frames.push_back(Frame{m[3], Base(m[1].str()), std::stoi(m[2])});
  }
  return threads;
}

std::vector<ThreadStack> ParseGdb(std::string_view text, int pid) {
  std::vector<ThreadStack> threads;
  static const std::regex kThread(R"re(^Thread \d+ \(.*LWP (\d+)\).*$)re");
  // "#2  0x... in step (x=1) at train.c:12", "#0  clock_nanosleep () from /lib/libc.so.6"
  static const std::regex kFrame(R"re(^#\d+\s+(?:0x[0-9a-f]+ in )?([^ (]+) \(.*?\)(?: at (\S+):(\d+)| from (\S+))?\s*$)re");
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, kThread)) {
      ThreadStack t;
      t.name = line.substr(0, line.find(':'));
      t.main = std::stoi(m[1]) == pid;
      threads.push_back(std::move(t));
    } else if (std::regex_match(line, m, kFrame)) {
      if (threads.empty()) threads.push_back(ThreadStack{"Thread 1", true, {}});
      Frame f{m[1], m[2].matched ? Base(m[2].str()) : m[4].matched ? Base(m[4].str()) : "", 0};
      if (m[3].matched) f.line = std::stoi(m[3]);
      threads.back().frames.push_back(std::move(f));
    }
  }
  return threads;
}

const ThreadStack* RankStack::Main() const {
  for (const ThreadStack& t : threads)
    if (t.main) return &t;
  return threads.empty() ? nullptr : &threads.front();
}

std::string RankRanges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

namespace {

struct Group {
  std::string where;  // the innermost frames, rendered
  std::vector<int> ranks;
};

std::string Where(const RankStack& s, int depth) {
  const ThreadStack* t = s.Main();
  if (t == nullptr || t->frames.empty()) return "(no frames)";
  std::string out;
  for (int i = 0; i < depth && i < static_cast<int>(t->frames.size()); ++i) {
    if (i > 0) out += " <- ";
    out += t->frames[static_cast<size_t>(i)].Render();
  }
  return out;
}

// The sampled ranks grouped by where they are, the largest group first (ties:
// the group of the lowest rank first).
std::vector<Group> Groups(const std::vector<RankStack>& stacks, int depth) {
  std::vector<Group> groups;
  for (const RankStack& s : stacks) {
    if (!s.error.empty()) continue;
    std::string where = Where(s, depth);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.where == where; });
    if (it == groups.end()) groups.push_back(Group{where, {s.rank}});
    else it->ranks.push_back(s.rank);
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return a.ranks.size() > b.ranks.size();
  });
  return groups;
}

std::string RanksWord(const std::vector<int>& ranks) {
  return fmt::format("{} {} ({})", ranks.size() == 1 ? "rank" : "ranks", RankRanges(ranks), ranks.size());
}

}  // namespace

std::vector<int> OddRanks(const std::vector<RankStack>& stacks, int depth) {
  std::vector<Group> groups = Groups(stacks, depth);
  if (groups.size() < 2) return {};
  // The smallest group, when it is the only one that small.
  if (groups[groups.size() - 1].ranks.size() == groups[groups.size() - 2].ranks.size()) return {};
  return groups.back().ranks;
}

std::vector<std::string> HangSummary(const std::vector<RankStack>& stacks, int depth, std::string_view label) {
  std::vector<std::string> lines;
  std::vector<Group> groups = Groups(stacks, depth);
  std::vector<int> odd = OddRanks(stacks, depth);
  for (size_t i = 0; i < groups.size(); ++i) {
    const Group& g = groups[i];
    std::string verb = i == 0 ? "wait in" : g.ranks.size() == 1 ? "is elsewhere:" : "are elsewhere:";
    std::string mark = !odd.empty() && g.ranks == odd ? "   <- odd one out" : "";
    lines.push_back(fmt::format("{}: {} {} {}{}", label, RanksWord(g.ranks), verb, g.where, mark));
  }
  for (const RankStack& s : stacks)
    if (!s.error.empty())
      lines.push_back(fmt::format("{}: rank {} (pid {}): not sampled ({})", label, s.rank, s.pid, s.error));
  return lines;
}

std::string FullStacks(const std::vector<RankStack>& stacks) {
  std::string out;
  for (const RankStack& s : stacks) {
    out += fmt::format("=== rank {} (pid {}){}\n", s.rank, s.pid,
                       s.error.empty() ? fmt::format(", by {}", s.how) : fmt::format(": not sampled ({})", s.error));
    out += s.raw;
    if (!s.raw.empty() && s.raw.back() != '\n') out += '\n';
    out += '\n';
  }
  return out;
}

namespace {

std::string Cut(std::string_view s, size_t max, bool keep_newlines) {
  return SafeUtf8(s.substr(0, max), keep_newlines);
}

// Field readers for RankStackFromJson: each fails naming `where`.
Result<std::string> TextField(const boost::json::object& o, std::string_view key, const std::string& where,
                              size_t max) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr) return std::string();
  const boost::json::string* s = v->if_string();
  if (s == nullptr) return Status::InvalidArgument(fmt::format("{}.{}: not a string", where, key));
  if (s->size() > max)
    return Status::InvalidArgument(fmt::format("{}.{}: {} bytes, more than {}", where, key, s->size(), max));
  return std::string(s->data(), s->size());
}

Result<int> IntField(const boost::json::object& o, std::string_view key, const std::string& where, int lo) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr) return Status::InvalidArgument(fmt::format("{}.{}: missing", where, key));
  std::optional<int64_t> n;
  if (const int64_t* i = v->if_int64()) n = *i;
  else if (const uint64_t* u = v->if_uint64(); u != nullptr && *u <= uint64_t{INT32_MAX}) n = static_cast<int64_t>(*u);
  if (!n || *n < lo || *n > INT32_MAX)
    return Status::InvalidArgument(fmt::format("{}.{}: not an integer from {} to {}", where, key, lo, INT32_MAX));
  return static_cast<int>(*n);
}

const boost::json::array* ArrayField(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  return v == nullptr ? nullptr : v->if_array();
}

}  // namespace

boost::json::object ToJson(const RankStack& stack) {
  boost::json::array threads;
  for (size_t t = 0; t < stack.threads.size() && t < kMaxStackThreads; ++t) {
    const ThreadStack& ts = stack.threads[t];
    boost::json::array frames;
    for (size_t f = 0; f < ts.frames.size() && f < kMaxStackFrames; ++f) {
      const Frame& fr = ts.frames[f];
      frames.push_back(boost::json::object{{"function", Cut(fr.function, kMaxStackText, false)},
                                           {"file", Cut(fr.file, kMaxStackText, false)},
                                           {"line", std::max(fr.line, 0)}});
    }
    threads.push_back(boost::json::object{
        {"name", Cut(ts.name, kMaxStackText, false)}, {"main", ts.main}, {"frames", std::move(frames)}});
  }
  return boost::json::object{{"rank", std::max(stack.rank, 0)},
                             {"pid", std::max(stack.pid, 0)},
                             {"how", Cut(stack.how, kMaxStackText, false)},
                             {"error", Cut(stack.error, kMaxStackText, false)},
                             {"threads", std::move(threads)},
                             {"raw", Cut(stack.raw, kMaxStackRaw, true)}};
}

Result<RankStack> RankStackFromJson(const boost::json::value& v) {
  const boost::json::object* o = v.if_object();
  if (o == nullptr) return Status::InvalidArgument("stack: not an object");
  RankStack out;
  Result<int> rank = IntField(*o, "rank", "stack", 0);
  if (!rank.ok()) return rank.status();
  out.rank = *rank;
  std::string where = fmt::format("stack of rank {}", out.rank);
  Result<int> pid = IntField(*o, "pid", where, 0);
  if (!pid.ok()) return pid.status();
  out.pid = *pid;
  for (auto [key, field, max] : {std::tuple{"how", &out.how, kMaxStackText},
                                 std::tuple{"error", &out.error, kMaxStackText},
                                 std::tuple{"raw", &out.raw, kMaxStackRaw}}) {
    Result<std::string> text = TextField(*o, key, where, max);
    if (!text.ok()) return text.status();
    *field = std::move(*text);
  }
  const boost::json::array* threads = ArrayField(*o, "threads");
  if (threads == nullptr) return Status::InvalidArgument(fmt::format("{}.threads: not an array", where));
  if (threads->size() > kMaxStackThreads)
    return Status::InvalidArgument(fmt::format("{}.threads: {}, more than {}", where, threads->size(), kMaxStackThreads));
  for (size_t t = 0; t < threads->size(); ++t) {
    std::string tw = fmt::format("{}.threads[{}]", where, t);
    const boost::json::object* to = (*threads)[t].if_object();
    if (to == nullptr) return Status::InvalidArgument(tw + ": not an object");
    ThreadStack ts;
    Result<std::string> name = TextField(*to, "name", tw, kMaxStackText);
    if (!name.ok()) return name.status();
    ts.name = std::move(*name);
    if (const boost::json::value* m = to->if_contains("main")) {
      const bool* b = m->if_bool();
      if (b == nullptr) return Status::InvalidArgument(tw + ".main: not a boolean");
      ts.main = *b;
    }
    const boost::json::array* frames = ArrayField(*to, "frames");
    if (frames == nullptr) return Status::InvalidArgument(tw + ".frames: not an array");
    if (frames->size() > kMaxStackFrames)
      return Status::InvalidArgument(fmt::format("{}.frames: {}, more than {}", tw, frames->size(), kMaxStackFrames));
    for (size_t f = 0; f < frames->size(); ++f) {
      std::string fw = fmt::format("{}.frames[{}]", tw, f);
      const boost::json::object* fo = (*frames)[f].if_object();
      if (fo == nullptr) return Status::InvalidArgument(fw + ": not an object");
      Frame fr;
      Result<std::string> function = TextField(*fo, "function", fw, kMaxStackText);
      if (!function.ok()) return function.status();
      Result<std::string> file = TextField(*fo, "file", fw, kMaxStackText);
      if (!file.ok()) return file.status();
      fr.function = std::move(*function);
      fr.file = std::move(*file);
      if (fo->contains("line")) {
        Result<int> line = IntField(*fo, "line", fw, 0);
        if (!line.ok()) return line.status();
        fr.line = *line;
      }
      ts.frames.push_back(std::move(fr));
    }
    out.threads.push_back(std::move(ts));
  }
  return out;
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
    for (int pid : tree) {
      if (access(fmt::format("{}/{}.stacks", dumps_dir_, pid).c_str(), F_OK) == 0) {
        python = pid;
        break;
      }
    }
    if (python > 0) {
      p.result.pid = python;
      p.result.how = "python";
      p.file = fmt::format("{}/{}.stacks", dumps_dir_, python);
      p.main_ident = MainThreadOf(p.file);
      p.offset = p.seen = FileSize(p.file);
      // To the process: only the hook's own thread leaves the signal unblocked,
      // so no thread of the script is interrupted (kPythonHook).
      if (kill(python, StackSignal()) != 0) {
        p.result.error = fmt::format("signal: {}", std::strerror(errno));
        p.done = true;
      }
    } else {
      // Not Python, or Python without the hook: gdb, on the worker's last
      // process in line (`sh -c 'exec ...'` has become it already).
      int pid = tree.back();
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
