// `dlaunch status [RUN_ID] [--watch] [--dir DIR]` and `dlaunch stacks [RUN_ID]
// [--dir DIR]`: the words after the command, made into what the live-view
// client (launcher/commands/live_client.hpp) runs.
#pragma once

#include <string>
#include <vector>

#include "base/status.hpp"

namespace dlaunch::launcher {

struct LivePlan {
  enum class Ask { kStatus, kStacks };
  Ask ask = Ask::kStatus;
  std::string run_id;  // empty: every job of this user here
  bool watch = false;  // status only: redraw every second until the job ends
  std::string dir;     // empty: LiveDir (launcher/live/live.hpp)
  bool help = false;
};

// "status" or "stacks", then its words. InvalidArgument naming the word, e.g.
// "--watch: only 'dlaunch status' watches" (the caller puts "dlaunch stacks: " before it).
Result<LivePlan> DecideLive(const std::string& command, const std::vector<std::string>& args);

// The usage of both commands, ending with `command`'s example ("status" or "stacks").
std::string LiveUsage(const std::string& command);

}  // namespace dlaunch::launcher
