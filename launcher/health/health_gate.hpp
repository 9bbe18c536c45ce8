// The health gate of a rendezvous node (--health-check): a node checks itself
// before it joins, and a node whose check fails is held out. It does not join;
// it checks again every interval and joins once a check passes, or ends when
// its join timeout runs out. Before a restart of the job (a newer generation)
// the node checks again when its last passing check is older than the
// interval; one that fails then leaves the job and is held out as above. A
// node that waits joined without workers (a spare, or one standing by after a
// lost node) checks every interval while it waits (KeepFresh), so that the
// generation it is called into finds its pass fresh; one that fails there
// leaves the job and is held out as after a failed recheck.
//
// The gate says one line for each failure ("health check 'df ...': exited with
// code 3: no space on /scratch (held out of the job; next check in 300s)"),
// and an event `health_check` for every check (the metrics count them). While
// it checks or holds the node out it catches the stop signals: one kills the
// check's process group and ends the node at once.
//
// Every call happens on the event loop's thread. The gate never joins or leaves
// itself: its owner does that when it calls back.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/core/events.hpp"
#include "launcher/core/signals.hpp"
#include "launcher/core/timers.hpp"
#include "launcher/health/health_check.hpp"

namespace dlaunch::launcher {

struct HealthGateOptions {
  std::string command;                                                    // the check, for messages
  std::chrono::milliseconds interval{base::kDefaultHealthCheckInterval};  // --health-check-interval
  std::vector<int> stop_signals;                                          // caught while checking or held out
};

class HealthGate {
 public:
  struct Hooks {
    std::function<void(const std::string& line)> say;
    // A stop signal came while the gate checked or held the node out; the
    // check's group is killed. The owner ends the node.
    std::function<void(int sig)> stopped;
  };

  // `timers`, `signals`, `checker` and `events` (may be null) must outlive the gate.
  HealthGate(Timers& timers, SignalSource& signals, HealthChecker& checker, HealthGateOptions options, EventLog* events,
             Hooks hooks);
  ~HealthGate();
  HealthGate(const HealthGate&) = delete;
  HealthGate& operator=(const HealthGate&) = delete;

  // Before (re)joining: checks now, unless the last check failed (the next one
  // then comes an interval after it). While checks fail the node is held out
  // and checks again every interval: `admit()` once one passes, or
  // `give_up(line)` at `deadline` when none has; the line says the check kept
  // the node out. Each runs from a handler of its own.
  void Admit(SteadyTime deadline, std::function<void()> admit, std::function<void(const std::string&)> give_up);
  // Before a restart: whether a check must run first (CheckDue: the last check
  // that passed ended an interval or longer ago).
  bool Due() const;
  // One check before a restart: `done(true)` when it passes; `done(false)`
  // after a line that says the node leaves the job (then Admit holds it out).
  void Recheck(std::function<void(bool ok)> done);
  // While this node is joined: whenever `waiting()` (asked at each look; the
  // owner's "joined, with no workers") and the last pass has turned an
  // interval old (NextWhileWaiting), a check runs while the node stays joined;
  // a Recheck meanwhile takes that check's verdict. One that fails says a line
  // (the node leaves the job and is held out) and calls `failed()`, after which
  // the owner leaves the job and calls Admit, which holds the node out. That
  // failure, a failed Recheck, or Stop ends the watch; call again once rejoined.
  void KeepFresh(std::function<bool()> waiting, std::function<void()> failed);
  // Cancels a running check (its group killed), the watch of KeepFresh and
  // every timer; no hook runs after.
  void Stop();

  bool held_out() const { return held_out_; }

 private:
  std::string Subject() const;
  void CheckNow();
  void Checked(const CheckOutcome& outcome);
  void HoldOut();
  // KeepFresh's: checks now, or looks again later.
  void Look();
  void EndWatch();
  void Busy(bool busy);
  void Emit(const CheckOutcome& outcome);

  Timers& timers_;
  SignalSource& signals_;
  HealthChecker& checker_;
  HealthGateOptions options_;
  EventLog* events_;
  Hooks hooks_;
  std::unique_ptr<Timer> timer_;
  std::unique_ptr<SignalWatch> watch_;  // while busy
  std::optional<SteadyTime> last_pass_;
  std::optional<SteadyTime> last_fail_;
  std::string last_failure_;  // CheckOutcome::Describe of the last failure
  bool held_out_ = false;
  // The current Admit's.
  SteadyTime since_{};
  SteadyTime deadline_{};
  std::function<void()> admit_;
  std::function<void(const std::string&)> give_up_;
  std::function<void(bool)> recheck_;  // the current Recheck's
  bool checking_ = false;              // a check runs
  // KeepFresh's: its timer, what it asks, what it calls on a failure, and
  // whether the running check is its own.
  std::unique_ptr<Timer> look_timer_;
  std::function<bool()> waiting_;
  std::function<void()> fresh_failed_;
  bool fresh_check_ = false;
};

}  // namespace dlaunch::launcher
