#include "launcher/config/live_options.hpp"

#include <fmt/format.h>

#include "launcher/config/subcommands.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

std::string LiveUsage(const std::string& command) {
  return "usage: dlaunch status [RUN_ID] [--watch] [--dir DIR]\n"
         "       dlaunch stacks [RUN_ID] [--dir DIR]\n"
         "Shows this user's jobs running on this machine (no RUN_ID), one job's ranks, or\n"
         "every rank's stack now. DIR: where jobs listen (default $XDG_RUNTIME_DIR/dlaunch,\n"
         "else /dev/shm/dlaunch-UID, else /tmp/dlaunch-UID).\n\n" +
         ExampleLine(command);
}

Result<LivePlan> DecideLive(const std::string& command, const std::vector<std::string>& args) {
  LivePlan plan;
  plan.ask = command == "stacks" ? LivePlan::Ask::kStacks : LivePlan::Ask::kStatus;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      plan.help = true;
    } else if (a == "--watch" || a == "-w") {
      if (plan.ask != LivePlan::Ask::kStatus)
        return Status::InvalidArgument(fmt::format("{}: only 'dlaunch status' watches", a));
      plan.watch = true;
    } else if (a == "--dir" || a.starts_with("--dir=")) {
      if (a == "--dir" && i + 1 == args.size()) return Status::InvalidArgument("--dir: expected a directory");
      plan.dir = a == "--dir" ? args[++i] : a.substr(6);
      if (plan.dir.empty()) return Status::InvalidArgument("--dir: expected a directory");
    } else if (a.starts_with("-")) {
      std::string_view name = std::string_view(a).substr(0, a.find('='));
      for (std::string_view known : {"--watch", "--dir", "--help"})
        if (EditDistance(name, known) <= 2)
          return Status::InvalidArgument(fmt::format("{}: unknown option (did you mean '{}'?)", a, known));
      return Status::InvalidArgument(fmt::format("{}: unknown option (see dlaunch {} --help)", a, command));
    } else if (!plan.run_id.empty()) {
      return Status::InvalidArgument(fmt::format("{}: one run id at most (already given: {})", a, plan.run_id));
    } else {
      plan.run_id = a;
    }
  }
  return plan;
}

}  // namespace dlaunch::launcher
