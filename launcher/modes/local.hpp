// This node's workers, run here: the single-node job, torch.distributed.launch's
// static multi-node form, and a node agent of the TCP rendezvous. Finds what the
// plan leaves to the edge (the run directory, the command's path), starts the
// watchdog, becomes the subreaper of the workers' orphans, and runs the job.
#pragma once

#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {

// Runs `plan` (Mode::kSingleNode, kStatic or kRendezvous) and returns the exit
// code: the job's, 2 for bad input, 126/127 for a command that cannot run.
int RunLocal(const Plan& plan);

}  // namespace dlaunch::launcher
