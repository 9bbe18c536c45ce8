// Whether a signal that dlaunch passes on to its workers (SIGUSR1, SIGUSR2,
// SIGCONT) already reached them. Slurm signals a job's processes itself:
// `scancel --signal=USR1 JOB`, sbatch's `--signal=USR1@120` (pre-emption) and
// srun's `--signal` reach every process of each job step, not only dlaunch, so
// passing the signal on again would give each worker two (and a worker without
// a handler dies of the first). Only `B:`/`--batch` signals one process: the
// batch script's shell.
//
// How dlaunch tells: the sender. slurmstepd sends the step-wide signals; a
// user's `kill -USR1 <dlaunch>`, a batch script's trap, or a head passing a
// signal on are other processes. A signal from slurmstepd is taken as already
// delivered when dlaunch runs as a task of a job step (SLURM_STEP_ID set, not
// the batch step) whose proctrack plugin reaches the workers: every plugin but
// proctrack/pgid, which signals the task's process group only (each worker
// has a process group of its own). In the batch step slurmstepd's signal is
// `B:`'s (the script exec'd dlaunch) and is passed on. docs/supervision.md
// has the table.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "envmap/layout.hpp"

namespace dlaunch::launcher {

// dlaunch's place in Slurm, read at the edge (launcher/modes).
struct SlurmSignalScope {
  // slurmstepd's own signals reach every process of dlaunch's step, workers included.
  bool step_wide = false;
};

// From the launcher's environment and slurm.conf's ProctrackType value (empty:
// unknown, taken as Slurm's default, proctrack/cgroup).
SlurmSignalScope SlurmScopeOf(const envmap::EnvMap& env, std::string_view proctrack_type);

// ProctrackType from $SLURM_CONF (else /etc/slurm/slurm.conf) when `env` is a
// Slurm job's; empty when not found. Reads a file: call it at the edge.
std::string ReadProctrackType(const envmap::EnvMap& env);

// Whether dlaunch passes a signal sent by `sender_command` (SignalSource::
// SenderCommand; empty when unknown) on to the workers: always, but for
// slurmstepd's when it signals the whole step.
bool PassOnToWorkers(const SlurmSignalScope& scope, std::string_view sender_command);

// A head-node launch passes a SIGUSR1 or SIGUSR2 it catches on to every agent
// as the coordinator's query "signal SIGUSR1" (rendezvous/codec.hpp Query); each
// agent passes it on to its workers. PassedOnSignal reads such a query: the
// signal, or nullopt for any other question or signal.
std::string PassOnQuery(int sig);
std::optional<int> PassedOnSignal(std::string_view what);

}  // namespace dlaunch::launcher
