// `dlaunch job FILE [--set K=V]... [FLAGS]`: a job spec (job_spec.hpp) turned
// into the flags a user would have typed, then decided as any job (plan.hpp).
#pragma once

#include <string>
#include <vector>

#include "launcher/config/job_spec.hpp"
#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {

struct JobPlan {
  JobSpec spec;
  std::string file;
  Plan plan;
  std::vector<std::string> flags;  // the dlaunch flags the spec became (for --explain)
  // MPI whose command is mpirun, run here (no node list): the hostfile to
  // write into a new file in `hostfile_dir` ($TMPDIR, else /tmp) before the
  // command runs, named by AZUREML_MPI_HOSTFILE unless the spec sets it.
  // Empty otherwise.
  std::string hostfile_dir;
  std::string hostfile;
};

// `args` follow the word "job": the spec's path first, then --set K=V
// (repeatable) and any dlaunch flags (-H, --hostfile, --explain, --events, ...)
// but those the spec decides (--nproc-per-node, --nnodes, --roles,
// --launch-mode, ...), which are refused naming the flag.
// Without a node list each instance is a node of this machine, on its own
// loopback address (127.0.0.1, 127.0.0.2, ...); with one, instances map onto
// its nodes in order, and a count that does not match is refused. An MPI
// command that is itself a launcher (mpirun ...) runs once: here without a node
// list (the hostfile in `hostfile_dir`), else on node 0 through a head launch,
// its hostfile written there by the command's shell wrapper.
Result<JobPlan> DecideJob(const std::vector<std::string>& args, envmap::EnvMap env, const MachineFacts& facts);

// Usage of `dlaunch job`.
std::string JobUsage();

}  // namespace dlaunch::launcher
