// `dlaunch coordinator --listen ADDR:PORT`: a stand-alone rendezvous coordinator
// that serves many jobs at once, keyed by --rdzv-id. Agents point
// --rdzv-endpoint at it with --rdzv-conf is_host=0.
#pragma once

#include <string>
#include <vector>

#include "envmap/layout.hpp"

namespace dlaunch::launcher {

// Runs until SIGINT or SIGTERM. `args` follow the word "coordinator". Returns 0
// after a signal, 2 for bad flags (one line naming the flag).
int RunCoordinatorDaemon(const std::vector<std::string>& args, const envmap::EnvMap& env);

}  // namespace dlaunch::launcher
