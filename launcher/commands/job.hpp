// `dlaunch job SPEC.yml ...`: a job spec run as the flags it became (decided by
// launcher/config/job_plan.hpp), through the same switch to a mode as any plan
// (launcher/modes/dispatch.hpp).
#pragma once

#include "envmap/layout.hpp"
#include "launcher/config/job_plan.hpp"

namespace dlaunch::launcher {

// `dlaunch job`: names the spec's fields not applied here (once, on stderr),
// prints the flags the spec became with --explain, enters code.path, writes the
// hostfile an mpirun command reads (removed at the end), then RunInMode.
int RunJob(const JobPlan& job, const envmap::EnvMap& env);

}  // namespace dlaunch::launcher
