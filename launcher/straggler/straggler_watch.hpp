// The straggler watch of the process that compares the job's ranks: a single
// node's dlaunch, or the one hosting a rendezvous job's coordinator. Every
// window it gathers each rank's window (Gather: from this node's NodeWindows,
// or from every node through the coordinator's "profile" question), hands them
// to the detector, and says what it found where people look: a console line
// when a straggler is named and one when it clears, the straggler_window and
// straggler events (the metrics read both, launcher/metrics/metrics.hpp), the
// named ranks for `dlaunch status`, and with --straggler-action stop the
// slow node's host name in --straggler-file and the job's end (exit code
// base::kExitStraggler). Every call happens on the event loop's thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/defaults.hpp"
#include "launcher/core/events.hpp"
#include "launcher/core/timers.hpp"
#include "launcher/straggler/detector.hpp"

namespace dlaunch::launcher {

struct StragglerWatchOptions {
  std::chrono::milliseconds window{base::kDefaultStragglerWindow};
  StragglerOptions detect;
  bool stop = false;
  std::string file;  // --straggler-file; "" none
};

class StragglerWatch {
 public:
  // Calls `done` once with every rank's window since the last call, now or later.
  using Gather = std::function<void(std::function<void(std::vector<RankWindow>)> done)>;
  struct Hooks {
    std::function<void(const std::string&)> say;  // one console line (a Console adds "dlaunch: ")
    // --straggler-action stop: end the job with `code`; `cause` is the root cause.
    std::function<void(int code, const std::string& cause)> stop;
  };
  // `events` may write nothing, never null; it and `timers` outlive the watch.
  StragglerWatch(Timers& timers, EventLog& events, StragglerWatchOptions options, Gather gather, Hooks hooks);
  ~StragglerWatch();
  StragglerWatch(const StragglerWatch&) = delete;
  StragglerWatch& operator=(const StragglerWatch&) = delete;

  // A new generation of workers: what was named no longer holds, and the
  // first window starts now (its samples are the new workers').
  void NewGeneration();
  // The stragglers named now.
  const std::vector<Straggler>& named() const { return detector_.named(); }
  // The windows the last comparison used, by rank.
  const std::vector<RankWindow>& last() const { return last_; }
  std::chrono::milliseconds window() const { return options_.window; }

 private:
  void Arm();
  void Compare(std::vector<RankWindow> ranks);
  void Named(const Straggler& s);

  Timers& timers_;
  EventLog& events_;
  StragglerWatchOptions options_;
  Gather gather_;
  Hooks hooks_;
  StragglerDetector detector_;
  std::unique_ptr<Timer> timer_;
  std::vector<RankWindow> last_;
  int window_ = 0;      // windows compared so far
  int generation_ = 0;  // NewGeneration calls: a gather of an older one is dropped
  bool gathering_ = false;
  bool stopped_ = false;  // --straggler-action stop fired
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The events' fields of a straggler (docs/events.md).
boost::json::object StragglerFields(const Straggler& s, std::string_view state, int window);
// Writes `hosts`, one a line, to `path` (a file another user cannot have
// planted: its directory walked as dir_walk.hpp does, no symbolic link
// followed, only a regular file of this user's with one link), replacing it.
// A host name that is empty or holds a byte outside printable ASCII is refused.
Status WriteStragglerFile(const std::string& path, const std::vector<std::string>& hosts);

}  // namespace dlaunch::launcher
