// What one node's run of its workers takes: RunPlan, made by the modes from a
// Plan (launcher/config/plan.hpp) and the edge's facts (the run directory, the
// command's path), read by the runner and its parts (runner.hpp).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "envmap/layout.hpp"
#include "envmap/programs.hpp"
#include "envmap/worker_env.hpp"
#include "launcher/core/events.hpp"
#include "launcher/process/slurm_signals.hpp"
#include "launcher/process/supervisor.hpp"

namespace dlaunch::launcher {

class ProgressFiles;

// Everything the runner needs, made by the modes from a Plan.
struct RunPlan {
  envmap::JobLayout layout;
  envmap::Flavors flavors;        // error_file is filled in per worker
  envmap::EnvMap inherited;       // the launcher's environment
  std::string exe;                // resolved argv[0]
  std::vector<std::string> argv;  // the worker's argv, argv[0] as typed
  size_t local_rank_arg_at = 0;   // where in argv --local-rank=N goes (0: at the end)
  // Several programs in one job (envmap/programs.hpp): each rank runs its
  // group's command, exe and argv above unused. Empty: every rank runs argv.
  envmap::ProgramTable programs;
  std::string work_dir;  // the run directory: stacks-N.txt and, with write_logs, logs
  // dlaunch's own directory (0700, made for this job, removed after it): the
  // stack hook's dumps (PID.stacks, beside the rest: a directory of their own
  // cost an inode made and removed in every job), the error files, Azure's hostfile.
  std::string private_dir;
  bool write_logs = false;
  // Per local rank, the streams kept off the console (torchrun's Std: 1
  // stdout, 2 stderr, 3 both); a rank past the end: none.
  std::vector<int> redirected;
  std::vector<int> console_ranks;         // local ranks shown on the console; empty: all
  std::optional<std::string> tag_format;  // nullopt: lines are not tagged
  std::vector<std::vector<int>> cpus;     // per local rank; empty: no binding
  std::vector<std::string> gpus;          // visible GPU ids, for --pin-gpu
  bool pin_gpu = false;
  SupervisorOptions supervisor;
  std::vector<int> stop_signals;  // signals that stop the job
  // Whether slurmstepd's signals reach the workers too, so that dlaunch passes
  // none of them on (slurm_signals.hpp).
  SlurmSignalScope slurm;
  EventLog* events = nullptr;  // never null once StartJob runs; may write nothing
  // The hang watch: no rank wrote a line for hang_timeout (0: off) -> every
  // rank's stack (launcher/stacks/stacks.hpp), then the job runs on or, with
  // hang_stop, ends with exit code 124. Only without a JobChannel: in a
  // rendezvous job the coordinator judges silence across every node. python_hook: load the stack hook in
  // the workers, whose command names Python: hook_dir first on PYTHONPATH (launcher/stacks/python_hook.hpp).
  std::chrono::milliseconds hang_timeout{0};
  bool hang_stop = false;
  bool python_hook = false;
  std::string hook_dir;
  // Called once per local restart (1, 2, ...), before its first worker starts,
  // for what lives exactly as long as one generation of workers (--env horovod's
  // store, which each restart gets clean). Empty: nothing to call. A hook on
  // the plan, not a member of the runner: the runner does not know the store.
  std::function<void(int restart)> restarting;
  // Each worker's DLAUNCH_PROGRESS_FILE (progress_files.hpp), made at each of
  // its starts and read at each failure for the restart policy. Null: the
  // workers get none. Owned by the mode, which reads it too (a rendezvous
  // node's heartbeats); outlives the run.
  ProgressFiles* progress = nullptr;
};

}  // namespace dlaunch::launcher
