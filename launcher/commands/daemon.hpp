// `dlaunch coordinator --listen ADDR:PORT`: a stand-alone rendezvous coordinator
// that serves many jobs at once, keyed by --rdzv-id. Agents point
// --rdzv-endpoint at it with --rdzv-conf is_host=0.
#pragma once

#include <string_view>

#include "launcher/config/coordinator_options.hpp"

namespace dlaunch::launcher {

// Runs until SIGINT or SIGTERM (or prints the usage, with plan.help) and
// returns 0; 2 when the listen address cannot be bound (one line naming it).
int RunCoordinatorDaemon(const DaemonPlan& plan);

// How its lines begin.
inline constexpr std::string_view kDaemonName = "dlaunch coordinator";

}  // namespace dlaunch::launcher
