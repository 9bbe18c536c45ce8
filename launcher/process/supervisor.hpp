// The supervision policy for one node's workers: when to start them, how to tear
// them down, whether to restart, and what the job's exit code is.
//
// It owns no processes and no clock. Events come in (a worker exited, a signal
// arrived, time passed), and it acts through WorkerControl. The real control
// forks and signals process groups (launcher/process/process.hpp); tests use a fake that
// records calls. All methods are called from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/defaults.hpp"
#include "base/status.hpp"
#include "rendezvous/restart_policy.hpp"

namespace dlaunch::launcher {

using Clock = std::chrono::steady_clock;

// How a process ended: exactly one of code/signal is meaningful.
struct ExitStatus {
  int code = 0;
  int signal = 0;  // non-zero: killed by this signal
  bool ok() const { return code == 0 && signal == 0; }
  // The shell convention: the code, or 128+N for signal N.
  int ShellCode() const { return signal != 0 ? 128 + signal : code; }
};

// Decodes a waitpid() status.
ExitStatus FromWaitStatus(int wstatus);
// "exited with code 3", "was killed by SIGKILL", or for a code over 128 (a shell
// whose child a signal killed) "exited with code 137 (128+SIGKILL)".
std::string Describe(const ExitStatus& status);
// The job's exit code when a worker ended with `status`: its ShellCode(), except
// that a code dlaunch gives a job itself once workers ran (123, 124:
// base::AfterStartCode) becomes base::kExitWorkerClash (1), so that a scheduler
// never takes a worker's code for dlaunch's verdict. The one place a worker's
// status becomes the job's code, here and in the rendezvous agent's report.
int JobCode(const ExitStatus& status);
// Why JobCode(status) differs from the worker's own code, for the summary:
// "rank 0 exited with code 124, reported as 1: 124 is dlaunch's code for a
// hang"; empty when it does not.
std::string JobCodeNote(int rank, const ExitStatus& status);

class WorkerControl {
 public:
  virtual ~WorkerControl() = default;
  // Starts local rank `local_rank` of restart generation `restart`. Returns the
  // pid (also its process group id) or an error naming the command.
  virtual Result<int> Start(int local_rank, int restart) = 0;
  // Sends `sig` to the process group of the worker `pid`.
  virtual void Signal(int pid, int sig) = 0;
  // The worker `pid` has exited: nothing of its process group may outlive it.
  virtual void Release(int pid) = 0;
  // The shutdown timeout ran out after a failure and `pids` still run: take
  // what is wanted of them (their stacks) before they are killed, then call
  // Supervisor::OnSampled. Only asked when SupervisorOptions::sample_before_kill
  // is set; the supervisor kills them anyway once that time has passed.
  virtual void SampleBeforeKill(const std::vector<int>& pids) { (void)pids; }
  // Each local rank's progress in this generation (launcher/process/
  // progress_files.hpp): the largest number it wrote, -1 where none. Asked at
  // each failure, for the restart policy. Default: none written.
  virtual std::vector<std::int64_t> Progress() { return {}; }
  // One line for the user: a restart's backoff, or why the job stops without
  // restarting.
  virtual void Notice(const std::string& line) { (void)line; }
};

struct WorkerRecord {
  int local_rank = 0;
  int pid = 0;
  int restart = 0;
  Clock::time_point started;
  Clock::time_point ended;
  bool running = false;
  bool stopped_by_us = false;  // it exited after we asked it to stop
  ExitStatus status;
};

struct SupervisorOptions {
  int nproc = 1;
  int max_restarts = 0;
  std::chrono::milliseconds shutdown_timeout{base::kDefaultShutdownTimeout};  // SIGTERM to SIGKILL
  // After a failure (here or elsewhere in the job), workers that outlived the
  // shutdown timeout are sampled (WorkerControl::SampleBeforeKill) for at most
  // this long before the SIGKILL. Default: 0, off. A stop signal never samples.
  std::chrono::milliseconds sample_before_kill{0};
  // --max-no-progress-restarts (-1: off) and --restart-backoff MIN:MAX (0 and
  // 0: restart at once), as rendezvous/restart_policy.hpp counts them with
  // max_restarts.
  int max_no_progress_restarts = -1;
  std::chrono::milliseconds backoff_min{0};
  std::chrono::milliseconds backoff_max{0};
};

class Supervisor {
 public:
  // kWaiting: between a failed generation and its restart, for the backoff;
  // no worker runs.
  enum class State { kIdle, kRunning, kStopping, kWaiting, kDone };

  Supervisor(WorkerControl& control, SupervisorOptions options);

  // Starts every worker. A failed start tears down the ones already running and
  // is returned; the supervisor then finishes with exit code 127 once they exit.
  Status Start(Clock::time_point now);

  // A worker exited (a pid that is not a worker is ignored).
  void OnExit(int pid, ExitStatus status, Clock::time_point now);
  // A stop signal (SIGINT, SIGTERM, ...) reached the launcher: forward it, then
  // tear down. A second SIGINT kills at once. During a backoff (kWaiting) the
  // job ends at once: no worker runs.
  void OnStopSignal(int sig, Clock::time_point now);
  // A signal to pass on as it is (SIGUSR1, SIGUSR2, SIGCONT).
  void Forward(int sig);
  // A failure elsewhere in the job (another node): tear down with `code`.
  void Abort(int code, Clock::time_point now);
  // Time passed: sends SIGKILL once the shutdown timeout has run out (after
  // SampleBeforeKill and at most sample_before_kill, when that is set), or
  // starts the next generation once its backoff has passed.
  void OnTick(Clock::time_point now);
  // The sample SampleBeforeKill asked for is taken: SIGKILL now.
  void OnSampled(Clock::time_point now);

  // When OnTick must next be called; nullopt when nothing is pending.
  std::optional<Clock::time_point> deadline() const { return deadline_; }
  State state() const { return state_; }
  bool done() const { return state_ == State::kDone; }
  // Valid once done(): 0, the first failure's code (JobCode), 128+N for a
  // signal, or base::kExitNoProgress when restarts made no progress.
  int exit_code() const { return exit_code_; }
  int restart_count() const { return policy_.restarts(); }
  // The first worker failure of the final generation, if any.
  const WorkerRecord* root_cause() const;
  // Every worker of the current generation, by local rank.
  const std::vector<WorkerRecord>& workers() const { return workers_; }
  int stop_signal() const { return stop_signal_; }
  // A worker could not start (its code 127 or 1): no restart follows.
  bool start_failed() const { return start_failed_; }

 private:
  Status StartAll(Clock::time_point now);
  void BeginStop(int sig, Clock::time_point now);
  void SignalRunning(int sig);
  void Kill();
  void MaybeFinish(Clock::time_point now);
  bool Restart(Clock::time_point now);
  int Running() const;

  WorkerControl& control_;
  SupervisorOptions options_;
  rendezvous::RestartPolicy policy_;  // counts restarts, their progress and backoff
  State state_ = State::kIdle;
  std::vector<WorkerRecord> workers_;
  int exit_code_ = 0;
  int first_failure_ = -1;  // local rank of the root cause in this generation
  int stop_signal_ = 0;     // a signal that stopped the job, not a worker failure
  bool aborted_ = false;    // stopped from outside; no restart
  bool start_failed_ = false;
  bool killed_ = false;    // SIGKILL already sent
  bool sampling_ = false;  // SampleBeforeKill asked; SIGKILL at OnSampled or the deadline
  std::optional<Clock::time_point> deadline_;
};

}  // namespace dlaunch::launcher
