// The hang watch of one node (RunPlan::hang_timeout): when no rank has written
// a byte for the timeout, the silence is reported once, with every rank's
// stack; the next report needs new output first. HangWatch is the pure part,
// with time passed in; the runner arms the timer and takes the stacks.
//
// A job frozen whole (Slurm's `scontrol suspend`, a cgroup freezer) is not a
// silent one: its ranks could not write. The watch wakes at least every
// kLook, and a wake-up that comes long past its time (rendezvous/awake_clock.hpp)
// ends a pause: silence is then counted from the resume.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/core/events.hpp"
#include "launcher/process/supervisor.hpp"
#include "launcher/stacks/stacks.hpp"
#include "rendezvous/awake_clock.hpp"

namespace dlaunch::launcher {

class HangWatch {
 public:
  static constexpr std::chrono::seconds kLook{60};

  // `timeout` 0: off.
  explicit HangWatch(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  bool on() const { return timeout_.count() > 0; }
  // When to look next; nullopt when off. `last_bytes`: when a rank last wrote;
  // `last_output`: the same, or now while the console holds output back (that
  // is progress, not silence). A timeout after `last_output`, or, once the
  // silence since `last_bytes` is reported, a timeout after `now`; at most
  // kLook after `now`.
  std::optional<Clock::time_point> NextCheck(Clock::time_point last_bytes, Clock::time_point last_output,
                                             Clock::time_point now);
  // At a check: the silence to report (from then on reported), or nullopt when
  // there is none yet, or it is the one already reported: look again at NextCheck.
  std::optional<Clock::duration> Check(Clock::time_point last_bytes, Clock::time_point last_output,
                                       Clock::time_point now);

 private:
  bool Reported(Clock::time_point last_bytes) const { return reported_ && *reported_ == last_bytes; }

  std::chrono::milliseconds timeout_;
  rendezvous::AwakeClock pauses_;              // only its lateness is used: times here stay real
  std::optional<Clock::time_point> reported_;  // the last_bytes whose silence was reported
};

// The hang's report: HangSummary of `stacks`, then "hang: " and where the full
// stacks went (SaveStacks). Emits hang_suspected, naming the odd ranks.
std::vector<std::string> HangReport(std::chrono::seconds silent, const std::vector<RankStack>& stacks,
                                    const std::string& work_dir, EventLog& events);
// "no rank made progress for Ns (--hang-action stop)": the cause of a job that a hang stopped.
std::string HangStopCause(std::chrono::seconds silent);
// What such a job ends with (NodeEnd::hang_cause): "root cause: " and HangStopCause,
// then each line of `report`, quoted.
std::vector<std::string> HangCause(std::chrono::seconds silent, const std::vector<std::string>& report);
// Writes WORK_DIR/stacks-N.txt, a new file (one from an earlier run stays), and
// emits the stacks event. Returns "full stacks in PATH", or why it could not.
std::string SaveStacks(const std::string& work_dir, const std::vector<RankStack>& stacks, EventLog& events);

}  // namespace dlaunch::launcher
