// Growing the pipes of busy streams, within the job's share of its user's
// pipe memory.
//
// A pipe that holds more (F_SETPIPE_SZ, up to 1 MiB for a user without
// CAP_SYS_RESOURCE) makes writer and reader take turns less often: under fast
// output that is a third of dlaunch's time. But Linux charges a pipe's
// capacity, not what it holds, to the user who made it
// (fs.pipe-user-pages-soft, 64 MiB), and past that limit every new pipe of
// that user's, in any program, gets 8 KiB. So a pipe keeps its default until
// its stream is busy (BusyMeter), and a job grows its pipes by at most
// kJobPipeBudget in all; what a closed pipe took is given back. A refusal by
// Linux is said once, and the pipe stays as it is: output goes on.
//
// Every call happens on the event loop's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "base/defaults.hpp"

namespace dlaunch::launcher {

using base::kBusyPipeBytes;
using base::kBusyStreamBytes;
using base::kBusyWindow;
using base::kJobPipeBudget;

// The pipe calls, behind an interface that tests replace.
class PipeSizes {
 public:
  virtual ~PipeSizes() = default;
  // F_GETPIPE_SZ: the capacity of the pipe `fd`, or -1 (not a pipe, closed).
  virtual int Get(int fd) = 0;
  // F_SETPIPE_SZ: the capacity now, or -1 with errno set.
  virtual int Set(int fd, int bytes) = 0;
};

// The kernel's, for the real program.
PipeSizes& SystemPipeSizes();

// Whether one stream is busy: it moved kBusyStreamBytes within kBusyWindow.
// A stream that prints now and then never is; one that writes fast is within
// its first few reads.
class BusyMeter {
 public:
  using Clock = std::chrono::steady_clock;
  // `n` bytes moved at `now`. True once the stream is busy, and from then on.
  bool Moved(size_t n, Clock::time_point now);

 private:
  std::optional<Clock::time_point> since_;  // the window's start
  size_t bytes_ = 0;                        // moved since then
  bool busy_ = false;
};

class PipeBudget {
 public:
  enum class Outcome {
    kGrown,    // it holds kBusyPipeBytes now
    kAlready,  // it held that much already, or is no pipe: nothing to do
    kNoRoom,   // the job's budget is spent: it stays as it is
    kRefused,  // Linux refused (EPERM: the user's pipe memory limit): it stays
  };

  // `sizes` must outlive the budget. `budget`: bytes of capacity the job may add.
  explicit PipeBudget(PipeSizes& sizes, size_t budget = kJobPipeBudget) : sizes_(sizes), budget_(budget) {}

  // Grows the pipe `fd` (either end) to kBusyPipeBytes when what that adds
  // fits in what is left of the budget. Never shrinks a pipe.
  Outcome Grow(int fd);
  // `fd` is about to be closed: what its growth took is given back. Call it
  // before close(), so that a new pipe on the same number is not mistaken for it.
  void Closed(int fd);
  // The line to say about the first refusal, once; nullopt otherwise.
  std::optional<std::string> TakeRefusal();

  size_t used() const { return used_; }

 private:
  PipeSizes& sizes_;
  size_t budget_;
  size_t used_ = 0;
  std::map<int, size_t> grown_;  // fd -> bytes its growth added
  std::optional<std::string> refusal_;
  bool refusal_said_ = false;
};

}  // namespace dlaunch::launcher
