// `dlaunch job job.yml`: the job specs of the seed documents (a managed
// service's command jobs) read from YAML, in both of their forms:
//
//   distributed:                          distribution:
//     mpi: {worker: {count, slots_per}}     type: mpi | pytorch | tensorflow
//     pytorch: {worker: {count}}            process_count_per_instance: N
//     tensorflow:                           worker_count: N
//       worker / parameter_server /         parameter_server_count: N
//       chief / evaluator:                  (instances: compute/resources
//         {count, environment_variables}     instance_count or node_count)
//
// plus `command` (run through /bin/sh -c, so $NODE_RANK or
// $AZUREML_MPI_HOSTFILE expand as on the platform), job-wide
// `environment_variables` and `code.path` (the working directory, relative to
// the spec file). Fields that need the platform (a docker image, a compute
// target, resource limits) are listed as not applied, never silently dropped.
// Pure: the caller reads the file; yaml-cpp parses it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "envmap/layout.hpp"
#include "base/status.hpp"

namespace dlaunch::launcher {

enum class JobKind { kMpi, kPyTorch, kTensorFlow };

struct JobSpec {
  JobKind kind = JobKind::kPyTorch;
  int instances = 1;  // nodes
  // Where the instance count came from, for errors about it: "FILE:LINE" (the
  // count, or the section that implies it), "--set a.b=N", or "FILE".
  std::string instances_at;
  // Processes per instance (process_count_per_instance, slots_per); nullopt:
  // one per instance for a per-node launcher (PyTorch) or the default (MPI: 1).
  std::optional<int> processes;
  // TensorFlow: one task per instance, by role in TF's names (chief, worker,
  // ps, evaluator), each with its own variables.
  std::vector<envmap::RoleSpec> roles;
  std::string command;
  envmap::EnvVars env;                   // job-wide environment_variables
  std::string code_dir;                  // code.path, resolved against the spec's directory; "" when absent
  std::vector<std::string> not_applied;  // "environment.docker.image (line 4)"

  // MPI whose command is itself a launcher (mpirun, mpiexec, horovodrun): it
  // runs once, on node 0 (here without a node list), with AZUREML_MPI_HOSTFILE
  // naming the nodes and their slots; it reaches them itself.
  bool CommandLaunchesMpi() const;
  // Processes in all.
  int WorldSize() const;
};

// Parses `text`, the contents of `file` (named in every error as
// "FILE:LINE: ..."), after applying `sets` ("a.b.c=value", --set; an error
// about a value or key a --set put there names it: "--set a.b.c=value: ..."
// rather than a line it does not have). Fails with
// InvalidArgument on an unknown key (with "did you mean"), a wrong type, a bad
// count, or a missing command.
Result<JobSpec> ParseJobSpec(const std::string& text, const std::string& file, const std::vector<std::string>& sets);

}  // namespace dlaunch::launcher
