// This node's workers, run here: the single-node job, torch.distributed.launch's
// static multi-node form, and a node agent of the TCP rendezvous. Finds what the
// plan leaves to the edge (the run directory, the command's path), starts the
// watchdog, becomes the subreaper of the workers' orphans, and runs the job.
#pragma once

#include <string>

#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {

// Runs `plan` (a NodePlan or an AgentPlan whose endpoint is known) with the
// command at `exe` (ResolveCommand's) and returns the exit code: the job's, 2
// for bad input.
int RunLocal(const Plan& plan, const std::string& exe);

// Prints MakePrivateDir's or TrustedTempDir's `note` (why TMPDIR was not
// used) on stderr, once a process; nothing when it is empty. Main thread only.
void SayTmpdirNote(const std::string& note);

// What RunLocal would refuse of the files it makes, found without making or
// opening anything (--explain): the --log-dir and its run directory, the
// --events file. Fails (InvalidArgument) with the run's own line.
Status CheckRunFiles(const WorkerPlan& w);

}  // namespace dlaunch::launcher
