// From a decided plan to the mode that runs it: the one switch over Plan::mode,
// and `dlaunch job`'s few steps around it. main() calls these after deciding.
#pragma once

#include "envmap/layout.hpp"
#include "launcher/config/job_plan.hpp"
#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {

// Runs `plan` in its mode (or prints it, with --explain) and returns the exit
// code: the job's, 2 for bad input (the message already on stderr). An agent
// whose endpoint comes through Open MPI runs the plan WithMpiEndpoint makes.
int RunInMode(const Plan& plan, const envmap::EnvMap& env);

// `dlaunch job`: names the spec's fields not applied here (once, on stderr),
// prints the flags the spec became with --explain, enters code.path, writes the
// hostfile an mpirun command reads (removed at the end), then RunInMode.
int RunJob(const JobPlan& job, const envmap::EnvMap& env);

}  // namespace dlaunch::launcher
