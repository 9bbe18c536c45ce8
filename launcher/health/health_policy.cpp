#include "launcher/health/health_policy.hpp"

#include <algorithm>

namespace dlaunch::launcher {

bool CheckDue(std::optional<SteadyTime> last_pass, SteadyTime now, std::chrono::milliseconds interval) {
  return !last_pass || now - *last_pass >= interval;
}

HeldOutStep NextAfterFailure(SteadyTime failed_at, std::chrono::milliseconds interval, SteadyTime deadline) {
  SteadyTime next = failed_at + interval;
  if (next < deadline) return {HeldOutStep::Kind::kRetry, next};
  return {HeldOutStep::Kind::kGiveUp, std::max(failed_at, deadline)};
}

WaitingStep NextWhileWaiting(bool waiting, std::optional<SteadyTime> last_pass, SteadyTime now,
                             std::chrono::milliseconds interval) {
  SteadyTime due = last_pass ? *last_pass + interval : now;
  if (waiting) {
    if (due <= now) return {WaitingStep::Kind::kCheck, now};
    return {WaitingStep::Kind::kLook, due};
  }
  return {WaitingStep::Kind::kLook, std::max(due, now + std::min(interval, kWaitingLook))};
}

}  // namespace dlaunch::launcher
