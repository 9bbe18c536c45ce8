// Stacks of running workers, taken without stopping, killing or changing them:
// what a hung job is doing (--hang-timeout).
//
// Python workers: dlaunch puts a small sitecustomize.py (python_hook.hpp: where
// it lies, which workers get it) first on the workers' PYTHONPATH. In
// each Python process it registers faulthandler on one real-time signal
// (StackSignal(), not SIGUSR1/SIGUSR2, which NCCL and submitit use), writing to
// DUMPS/<pid>.stacks, then takes itself off sys.path and imports the
// sitecustomize it hides (Debian ships one), so the script's sys.argv,
// __main__, sys.path, output and exit code are its own. faulthandler dumps from
// its C signal handler, so a thread stuck in C (a collective) is still shown.
// The signal is blocked in the script's threads and taken by the hook's one
// thread (the straggler sampler's, else an idle one): a signal handler run in a thread that is inside C++ code
// under Python makes its sleep, poll or connect fail with EINTR, and torch's
// TCPStore dies of that ("Interrupted system call").
// A real-time signal kills a process that has no handler for it, so only a pid
// whose hook is alive is ever sent one: the hook's dump file names, in a header
// line it writes once all is set up, the descriptor (O_CLOEXEC) it holds open
// on it, and /proc/PID/fd/N must be that file (not after an exec, not a stale
// file of a reused pid).
//
// Other workers (and Python without the hook): `gdb -p PID -batch`, which
// stops the process for the moment it reads it. A worker that cannot be
// sampled is named as such.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "envmap/layout.hpp"
#include "base/status.hpp"
#include "launcher/core/event_loop.hpp"
#include "launcher/core/text.hpp"  // RankRanges

namespace dlaunch::launcher {

// The real-time signal the hook listens on: SIGRTMAX - 2.
int StackSignal();

struct Frame {
  std::string function;
  std::string file;  // base name; empty when unknown (a library without symbols)
  int line = 0;
  // "step (train.py:88)", "clock_nanosleep (libc.so.6)", "main"
  std::string Render() const;
};

struct ThreadStack {
  std::string name;           // "Thread 0x7f..." or "Thread 2 (LWP 4243)"
  bool main = false;          // the thread the signal ran on / the process's own
  std::vector<Frame> frames;  // innermost first
};

// Python 3.11 faulthandler's dump: "Thread 0x... (most recent call first):"
// blocks of "  File "x", line N in f" lines. `main_ident` ("0x00007f..."), the
// ident the hook wrote for the main thread, marks that thread as main and
// leaves out the "Current thread" that ran the dump (the hook's own). Without
// it, "Current thread" is main (a hook that had to let the main thread take
// the signal).
std::vector<ThreadStack> ParseFaulthandler(std::string_view text, std::string_view main_ident = {});
// `gdb -batch -ex 'thread apply all bt'`: the thread whose LWP is `pid` is main.
// Both parsers read text the worker controls: linear, by hand (stack_parse.cpp),
// every field cut to kMaxStackText; lines that are not frames are skipped.
std::vector<ThreadStack> ParseGdb(std::string_view text, int pid);

// The hook's header line in a dump file, "dlaunch: main thread 0x... fd N": the
// main thread's ident as faulthandler prints it, and the descriptor the hook
// holds the file open on. nullopt for any other line.
struct HookHeader {
  std::string main_ident;
  int fd = -1;
};
std::optional<HookHeader> ParseHookHeader(std::string_view line);

struct RankStack {
  int rank = 0;
  int pid = 0;
  std::string how;    // "python" or "gdb"; empty when not sampled
  std::string error;  // why it could not be sampled; empty when it was
  std::vector<ThreadStack> threads;
  std::string raw;  // the dump as taken
  const ThreadStack* Main() const;
};

// Bounds of a RankStack on the wire (`dlaunch stacks`, and between nodes):
// ToJson cuts to them, RankStackFromJson refuses what exceeds them.
inline constexpr size_t kMaxStackThreads = 1024;
inline constexpr size_t kMaxStackFrames = 512;           // per thread
inline constexpr size_t kMaxStackText = 4096;            // a name, function, file, how or error
inline constexpr size_t kMaxStackRaw = size_t{1} << 20;  // the dump as taken

// {"rank", "pid", "how", "error", "threads": [{"name", "main", "frames": [{"function",
// "file", "line"}]}], "raw"}. Strings are made valid UTF-8 (SafeUtf8: raw keeps
// its newlines) and cut to the bounds above, so RankStackFromJson always takes it.
boost::json::object ToJson(const RankStack& stack);
// The inverse. Never throws and never allocates past the bounds above, whatever
// `v` holds (it comes from another process or node): InvalidArgument naming the
// first field that is missing, of the wrong type, out of range or too long.
// Bounding the document's own size and depth is the parser's job (the caller's).
Result<RankStack> RankStackFromJson(const boost::json::value& v);

// The grouped summary (without "dlaunch: "): ranks grouped by the innermost
// `depth` frames of their main thread, the largest group first; when there are
// several groups, the smallest is marked as the odd one out.
//   hang: ranks 0-2,4-7 (7) wait in all_reduce (distributed_c10d.py:1536) <- step (train.py:88) <- ...
//   hang: rank 3 (1) is elsewhere: load_batch (data.py:42) <- ...   <- odd one out
//   hang: rank 5: not sampled (gdb: ptrace: Operation not permitted)
// `label` starts each line ("hang", or "at SIGKILL" for the workers that outlived
// a failure's shutdown timeout).
std::vector<std::string> HangSummary(const std::vector<RankStack>& stacks, int depth = 3,
                                     std::string_view label = "hang");
// The ranks of the odd group (empty when all agree or there is one group).
std::vector<int> OddRanks(const std::vector<RankStack>& stacks, int depth = 3);
// Every rank's full dump, for the stacks file.
std::string FullStacks(const std::vector<RankStack>& stacks);

// Takes the stacks of workers on `io` without blocking it: sends the signal or
// starts gdb, then polls for the dumps with a timer. Every call happens on the
// io_context's thread; gdb is reaped by whoever reaps this process's children
// (the runner's Reaper), which the collector notices as the pid going away.
// Taking the running ranks' stacks, behind an interface that a test fakes.
class StackTaker {
 public:
  struct Target {
    int rank = 0;
    int pid = 0;  // the worker: the leader of its process group
  };
  virtual ~StackTaker() = default;
  // Collects each target's stack and calls `done` once with them, by rank.
  // One collection at a time: a call while one runs returns false.
  virtual bool Collect(std::vector<Target> targets, std::function<void(std::vector<RankStack>)> done) = 0;
};

class StackCollector final : public StackTaker {
 public:
  StackCollector(boost::asio::io_context& io, std::string dumps_dir, std::chrono::milliseconds limit);
  ~StackCollector();
  StackCollector(const StackCollector&) = delete;
  StackCollector& operator=(const StackCollector&) = delete;

  // StackTaker. The dumps directory is made (0700) on the first call: a job
  // never asked for stacks, or whose workers are not Python, never has one.
  bool Collect(std::vector<Target> targets, std::function<void(std::vector<RankStack>)> done) override;
  bool busy() const { return busy_; }

 private:
  struct Pending;
  void Poll();
  void Finish();

  boost::asio::io_context& io_;
  std::string dumps_dir_;
  std::chrono::milliseconds limit_;
  boost::asio::steady_timer timer_;
  std::vector<Pending> pending_;
  std::chrono::steady_clock::time_point deadline_;
  std::function<void(std::vector<RankStack>)> done_;
  bool busy_ = false;
  Lifetime life_;  // last: expires first
};

}  // namespace dlaunch::launcher
