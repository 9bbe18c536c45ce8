// One run of a node's health check (--health-check CMD): `/bin/sh -c CMD` as
// the leader of a process group of its own, its stdout and stderr on one pipe
// of which the last few KiB are kept. Exit 0 passes; any other code, a signal,
// a failed start or the timeout fails. A check that outlives its timeout gets
// SIGTERM on its whole group, then SIGKILL after a grace; whatever is left of
// its group when it ends (a `sleep &` it started) is killed too, so no check
// outlives its verdict.
//
// Every call happens on the event loop's thread; nothing blocks.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "base/defaults.hpp"
#include "launcher/core/timers.hpp"

namespace dlaunch::launcher {

// Default: the bytes of a check's output kept (its last ones).
inline constexpr size_t kCheckOutputKeep = 4096;
// Default: the longest last line a message quotes.
inline constexpr size_t kCheckLastLineMax = 200;
// Default: from a timed-out check's SIGTERM to its SIGKILL.
inline constexpr std::chrono::milliseconds kCheckKillGrace{1000};

// How one check went.
struct CheckOutcome {
  bool ok = false;
  // "passed", "exited with code 3", "was killed by SIGSEGV", "did not finish
  // within 60s; killed", "cannot start (/bin/sh: ...)".
  std::string how;
  // The last line of its output that is not blank, printable, at most
  // kCheckLastLineMax bytes; empty when it wrote nothing.
  std::string last_line;
  std::string output;  // the last kCheckOutputKeep bytes of its stdout and stderr
  std::chrono::milliseconds took{0};

  // "exited with code 3: no space on /scratch": `how`, then the last line.
  std::string Describe() const;
};

// The last line of `output` that is not blank, as CheckOutcome::last_line.
std::string LastLine(const std::string& output);

// What runs a check: the real one starts a process; a test's fake answers by hand.
class HealthChecker {
 public:
  virtual ~HealthChecker() = default;
  // Starts the check. `done` runs once, from a handler of its own (never
  // within Run), unless Cancel comes first. One check at a time: Run while one
  // runs is a programmer error.
  virtual void Run(std::function<void(CheckOutcome)> done) = 0;
  // Kills a running check's whole process group (SIGKILL); its `done` never
  // runs. Nothing happens when none runs.
  virtual void Cancel() = 0;
};

struct HealthCheckSpec {
  std::string command;                                                  // for /bin/sh -c
  std::chrono::milliseconds timeout{base::kDefaultHealthCheckTimeout};  // --health-check-timeout
  std::chrono::milliseconds kill_grace{kCheckKillGrace};                // Default: 1s
  std::vector<std::string> env;                                         // its whole environment, "NAME=VALUE"
};

// The real checker: a process on `io`, its timeout on `timers`. Both must
// outlive it; destroying it cancels a running check.
class ProcessHealthChecker final : public HealthChecker {
 public:
  ProcessHealthChecker(boost::asio::io_context& io, Timers& timers, HealthCheckSpec spec);
  ~ProcessHealthChecker() override;
  ProcessHealthChecker(const ProcessHealthChecker&) = delete;
  ProcessHealthChecker& operator=(const ProcessHealthChecker&) = delete;

  void Run(std::function<void(CheckOutcome)> done) override;
  void Cancel() override;
  // The running check's pid, which is also its process group's id; -1 when
  // none runs.
  int pid() const;

 private:
  struct Running;
  // Keeps the tail of its output until the pipe closes.
  static void ReadMore(Running* r);
  void OnExit();
  void Finish(CheckOutcome outcome);
  void Sweep(int pgid, int rounds);

  boost::asio::io_context& io_;
  Timers& timers_;
  HealthCheckSpec spec_;
  std::unique_ptr<Running> run_;
  std::unique_ptr<Timer> sweep_;  // reaps what is left of the last check's group
};

}  // namespace dlaunch::launcher
