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

}  // namespace dlaunch::launcher
