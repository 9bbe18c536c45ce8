// From a decided plan to the mode that runs it: the one switch over Plan::mode.
// main() calls it after deciding, and so does `dlaunch job` (launcher/commands/job.hpp).
#pragma once

#include "envmap/layout.hpp"
#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {

// Runs `plan` in its mode (or prints it, with --explain) and returns the exit
// code: the job's, 2 for bad input (the message already on stderr). An agent
// whose endpoint comes through Open MPI runs the plan WithMpiEndpoint makes.
int RunInMode(const Plan& plan, const envmap::EnvMap& env);

}  // namespace dlaunch::launcher
