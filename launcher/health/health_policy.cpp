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

}  // namespace dlaunch::launcher
