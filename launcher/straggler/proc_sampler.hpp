// Where a process's threads are, read from /proc: how dlaunch samples a native
// rank (--straggler-native), which has no hook inside it to count its own
// frames (samples.hpp). Nothing here is particular to native ranks: it applies
// to any pid, so it is also the "where it waits" of a Python rank whose hook
// wrote no samples file.
//
// A look reads /proc/PID/task/PID/stat (the main thread), then, unless that
// thread is running, the other threads' stat files until one is, and at most
// one wchan file. It says:
//   - running:   some thread is in state R (running or waiting for a CPU);
//   - disk-wait: else some thread is in D, with that thread's wchan;
//   - sleeping:  else (S, T, t, I, ...), with the main thread's wchan;
//   - zombie:    every thread read has exited (Z, X) but the pid is not reaped;
//   - gone:      there is no such process (the main thread's files are gone).
// The comm field of a stat line is the worker's to set, spaces and parentheses
// included, so the state is read after the line's last ')'. Every file is
// opened O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC, must be a regular file (a FIFO or a
// device is refused, never waited on) and is read into a fixed buffer: a file
// over its cap is refused, not cut. A thread whose file cannot be read (it
// exited between the listing and the read, or the file is junk) is skipped.
// At most kMaxLookThreads stat files are read per look, so a look's cost and
// memory are bounded whatever the process does.
//
// Every function may be called from any thread; NativeSampler is not
// thread-safe (the event loop owns it).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/straggler/samples.hpp"

namespace dlaunch::launcher {

inline constexpr std::size_t kMaxLookThreads = 4096;  // stat files read per look
inline constexpr std::size_t kMaxStatFile = 4096;     // a real one is under 1.2 KiB
inline constexpr std::size_t kMaxWchan = 64;          // bytes of a wchan kept in a key
inline constexpr std::string_view kUnknownWchan = "unknown";

enum class ProcessState {
  kGone,        // no such process: nothing to count, ever again
  kUnreadable,  // the main thread's stat could not be read or parsed (EMFILE, EACCES, junk): no tick
  kZombie,      // exited, not yet reaped: no tick
  kRunning,
  kDiskWait,
  kSleeping,
};

struct ProcessLook {
  ProcessState state = ProcessState::kGone;
  // kDiskWait: the first D thread's wchan; kSleeping: the main thread's.
  // Printable ASCII without spaces, at most kMaxWchan bytes; kUnknownWchan
  // when the file is missing, unreadable, empty or "0" (the kernel says "0"
  // to whoever may not know). Empty in the other states.
  std::string wchan;
  // The main thread's start time (field 22: clock ticks after boot), which
  // tells a reused pid from the process first seen; 0 when not read.
  std::uint64_t start_time = 0;
  int running_tid = 0;           // the thread found running (kRunning), for the next look's first_tid
  std::size_t threads_read = 0;  // stat files read and parsed, the main thread's included
  bool capped = false;           // the listing had more threads than the look may read
};

// The fields of one stat line that a look uses.
struct TaskStat {
  char state = 0;  // R, S, D, Z, T, t, X, x, K, W, P or I
  std::uint64_t start_time = 0;
};

// The text of /proc/PID/task/TID/stat, or nullopt when it is not one: no ')',
// an unknown state letter, fewer than 22 fields, a start time that is not a
// decimal number.
std::optional<TaskStat> ParseTaskStat(std::string_view text);

// One look at process `pid` under `proc_root` ("/proc", or a fake tree in a
// test), reading at most `max_threads` stat files. `first_tid`, when not 0,
// is read right after the main thread: the last look's running_tid, since a
// thread that ran then likely runs now, and a look ends at the first thread
// it finds running.
ProcessLook LookAtProcess(const std::string& proc_root, int pid, std::size_t max_threads = kMaxLookThreads,
                          int first_tid = 0);

// The top key a look counts under: "running", "disk-wait in WCHAN" or
// "sleeping in WCHAN"; empty for a look that counts no tick (gone,
// unreadable, zombie).
std::string LookKey(const ProcessLook& look);

// Counts `look` into `samples` as one tick: ticks + 1 and one more under its
// top key, or under kOtherFrames once `top` holds kMaxSampleKeys - 1 other
// keys (so a file written from it stays within kMaxSampleKeys). Touches
// neither `user` (a /proc look has no user frame) nor period_ms or wall_ms.
// Returns false, changing nothing, for a look that counts no tick.
bool CountLook(const ProcessLook& look, RankSamples& samples);

// The samples of a set of processes, one look per process per Tick. It reads
// no clock: the caller calls Tick every `period` (a timer on the event loop)
// and passes the time. Cost: about one small read per thread per Tick, or one
// when the main thread is running (bench/results.md has the figure).
class NativeSampler {
 public:
  // `proc_root`: "/proc", or a fake tree in a test. `period` is written into
  // every RankSamples as period_ms.
  NativeSampler(std::string proc_root, std::chrono::milliseconds period);

  // Starts counting `pid` from zero, dropping anything counted for an earlier
  // process of that pid: call it once per process, when it is spawned.
  void Watch(int pid);
  // Stops counting `pid` and drops its samples (call it once the pid is reaped).
  void Forget(int pid);

  // One look at every watched pid, each counted as one tick. A pid that is
  // gone, or whose start time differs from the one its first look read (the
  // pid now names another process), is forgotten; a zombie or an unreadable
  // look counts nothing. wall_ms becomes `now` less the time of the pid's
  // first Tick, plus one period (n ticks on time span n periods).
  void Tick(std::chrono::steady_clock::time_point now);

  // What was counted for `pid` since Watch, cumulative (for SamplesSince);
  // nullopt for a pid not watched or forgotten.
  std::optional<RankSamples> Samples(int pid) const;
  std::size_t watched() const { return pids_.size(); }

 private:
  struct Watched {
    RankSamples samples;
    std::uint64_t start_time = 0;  // from the first look that read it
    int running_tid = 0;           // the last look's, read first by the next
    std::optional<std::chrono::steady_clock::time_point> first_tick;
  };
  // Counts one look at `pid`; false when the pid is to be forgotten.
  bool TickOne(int pid, Watched& w, std::chrono::steady_clock::time_point now);

  std::string proc_root_;
  std::chrono::milliseconds period_;
  std::map<int, Watched> pids_;
};

}  // namespace dlaunch::launcher
