// The time a process was awake to see. A job frozen whole (Slurm's `scontrol
// suspend`, a cgroup freezer, SIGSTOP to every process, a paused VM) wakes with
// every deadline past at once: the coordinator would call each agent silent,
// and each agent the coordinator, before any of them had the chance to speak.
// A silence can only be held against a peer for time this process was running
// to hear it, so the rendezvous keeps its deadlines on this clock: real time
// less every pause.
//
// A pause shows as lateness: the owner says when its timer is due (Arm), and a
// reading more than `late` past that due time (the timer's own callback, or
// any event that comes first) takes the whole lateness out of the clock. The
// owner must keep a timer armed for as long as it counts silence, at most a
// fraction of the timeout apart (the server ticks every 50 ms, an agent wakes
// at least every heartbeat interval); a pause that spans no due time is not
// seen. A process that is only slow (starved of CPU for more than `late` at a
// time) has its deadlines moved on by as much: it hears its peers that much
// later, so it also counts them silent that much later.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

namespace dlaunch::rendezvous {

class AwakeClock {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kLate{1000};

  explicit AwakeClock(Clock::duration late = kLate) : late_(late) {}

  // Now on this clock, from the real time `real`; the first reading after a
  // pause takes the pause out.
  Clock::time_point Now(Clock::time_point real = Clock::now());
  // The owner's timer is due at `due` on this clock: returns when that is in
  // real time, to arm the timer with. A due time already past counts from
  // `real`, the earliest the timer can fire.
  Clock::time_point Arm(Clock::time_point due, Clock::time_point real = Clock::now());
  // The owner has no timer armed: nothing is due, so no lateness can be seen.
  void Disarm() { due_.reset(); }

  // The real time at which the last pause ended (nullopt: none so far).
  std::optional<Clock::time_point> resumed() const { return resumed_; }
  // Where a silence that began at the real time `t` counts from: `t`, or the end
  // of a later pause (nothing could be written or heard while it lasted).
  Clock::time_point CountFrom(Clock::time_point t) const { return resumed_ ? std::max(t, *resumed_) : t; }
  // Every pause so far.
  Clock::duration paused() const { return paused_; }

 private:
  Clock::duration late_;
  Clock::duration paused_{};
  std::optional<Clock::time_point> due_;  // real time
  std::optional<Clock::time_point> resumed_;
};

}  // namespace dlaunch::rendezvous
