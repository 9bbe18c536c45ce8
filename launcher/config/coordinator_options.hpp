// The one place a coordinator's options are made from the command line: by the
// hosting agent (modes/multinode), the head (modes/head) and the daemon
// (modes/daemon), which then add what only they know (the endpoint, a node list).
#pragma once

#include <string>

#include "launcher/config/cli.hpp"
#include "rendezvous/coordinator.hpp"

namespace dlaunch::launcher {

// The job's size and restarts as given; the timeouts, the token and the master
// port from `o`. The result still needs rendezvous::Validate.
rendezvous::CoordinatorOptions CoordinatorOptionsFor(const Options& o, const std::string& run_id, int min_nodes,
                                                     int max_nodes, int max_restarts, const std::string& token);

}  // namespace dlaunch::launcher
