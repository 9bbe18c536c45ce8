#include "launcher/process/hang_watch.hpp"

#include <algorithm>

#include <boost/json/array.hpp>
#include <fmt/format.h>

#include "launcher/core/private_dir.hpp"

namespace dlaunch::launcher {

std::optional<Clock::time_point> HangWatch::NextCheck(Clock::time_point last_bytes, Clock::time_point last_output,
                                                      Clock::time_point now) {
  if (!on()) return std::nullopt;
  // A silence already reported needs new output before the next report: look
  // again a timeout from now, which costs nothing while it lasts.
  Clock::time_point due = Reported(last_bytes) ? now + timeout_ : pauses_.CountFrom(last_output) + timeout_;
  Clock::time_point at = std::min(due, now + kLook);
  pauses_.Arm(pauses_.Now(now) + (at - now), now);  // Arm takes the clock's own time; `at` is real
  return at;
}

std::optional<Clock::duration> HangWatch::Check(Clock::time_point last_bytes, Clock::time_point last_output,
                                                Clock::time_point now) {
  pauses_.Now(now);  // a check long past its time ends a pause
  pauses_.Disarm();  // served: the time until NextCheck (taking stacks) is no pause
  Clock::duration silent = now - pauses_.CountFrom(last_output);
  if (!on() || silent < timeout_ || Reported(last_bytes)) return std::nullopt;
  reported_ = last_bytes;
  return silent;
}

std::vector<std::string> HangReport(std::chrono::seconds silent, const std::vector<RankStack>& stacks,
                                    const std::string& work_dir, EventLog& events) {
  std::vector<std::string> lines = HangSummary(stacks);
  boost::json::array suspects;
  for (int r : OddRanks(stacks)) suspects.emplace_back(r);
  events.Emit("hang_suspected", {{"silent_for_s", silent.count()}, {"suspects", std::move(suspects)}});
  lines.push_back("hang: " + SaveStacks(work_dir, stacks, events));
  return lines;
}

std::string HangStopCause(std::chrono::seconds silent) {
  return fmt::format("no rank made progress for {}s (--hang-action stop)", silent.count());
}

std::vector<std::string> HangCause(std::chrono::seconds silent, const std::vector<std::string>& report) {
  std::vector<std::string> lines{"root cause: " + HangStopCause(silent)};
  for (const std::string& line : report) lines.push_back("  | " + line);
  return lines;
}

std::string SaveStacks(const std::string& work_dir, const std::vector<RankStack>& stacks, EventLog& events) {
  Result<std::string> path = WriteNumberedFile(work_dir, "stacks", ".txt", FullStacks(stacks));
  if (!path.ok()) return path.status().message();
  events.Emit("stacks", {{"file", *path}});
  return fmt::format("full stacks in {}", *path);
}

}  // namespace dlaunch::launcher
