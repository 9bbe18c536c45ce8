// When a node's health check is due, as pure functions of times: no clock, no
// process. The gate (health_gate.hpp) asks them; their unit tests run them on
// made-up times.
#pragma once

#include <chrono>
#include <optional>

#include "launcher/core/timers.hpp"

namespace dlaunch::launcher {

// Whether a node must check again before it (re)joins at `now`: no check has
// passed yet (`last_pass` nullopt), or the last one that passed ended
// `interval` or longer ago.
bool CheckDue(std::optional<SteadyTime> last_pass, SteadyTime now, std::chrono::milliseconds interval);

// What a held-out node does after a check that failed at `failed_at`: check
// again at `at` (kRetry), or end at `at` (kGiveUp) because the next check would
// come at or after `deadline`, when its join timeout ends; nothing could join
// after that. A failure at or after the deadline gives up at once.
struct HeldOutStep {
  enum class Kind { kRetry, kGiveUp };
  Kind kind = Kind::kRetry;
  SteadyTime at{};
};
HeldOutStep NextAfterFailure(SteadyTime failed_at, std::chrono::milliseconds interval, SteadyTime deadline);

// A node that waits joined without workers (a spare; a node standing by after
// a lost node) keeps its check fresh, so that the generation it is called into
// finds a pass younger than the interval and starts at once. What it does at
// `now`: check now (kCheck: it waits, and CheckDue says a check is due), or
// look again at `at` (kLook): when its last pass turns an interval old, and
// while it does not wait (runs workers, has not joined, or checks already)
// no sooner than kWaitingLook from now, so that a node that starts to wait
// with a stale pass is seen within that.
inline constexpr std::chrono::milliseconds kWaitingLook{1000};
struct WaitingStep {
  enum class Kind { kCheck, kLook };
  Kind kind = Kind::kLook;
  SteadyTime at{};
};
WaitingStep NextWhileWaiting(bool waiting, std::optional<SteadyTime> last_pass, SteadyTime now,
                             std::chrono::milliseconds interval);

}  // namespace dlaunch::launcher
