#include "launcher/process/supervisor.hpp"

#include <csignal>
#include <sys/wait.h>

#include <fmt/format.h>

#include "launcher/core/exit.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

ExitStatus FromWaitStatus(int wstatus) {
  if (WIFSIGNALED(wstatus)) return ExitStatus{0, WTERMSIG(wstatus)};
  if (WIFEXITED(wstatus)) return ExitStatus{WEXITSTATUS(wstatus), 0};
  return ExitStatus{1, 0};
}

std::string Describe(const ExitStatus& status) {
  if (status.signal != 0) return "was killed by " + SignalName(status.signal);
  // A shell or wrapper between dlaunch and the program reports the program's
  // death by signal N as exit code 128+N: name N, as for a direct kill.
  if (status.code > 128 && status.code - 128 < NSIG)
    return fmt::format("exited with code {} (128+{})", status.code, SignalName(status.code - 128));
  return fmt::format("exited with code {}", status.code);
}

int JobCode(const ExitStatus& status) {
  int code = status.ShellCode();
  return base::AfterStartCode(code) != nullptr ? base::kExitWorkerClash : code;
}

std::string JobCodeNote(int rank, const ExitStatus& status) {
  const base::ExitCodeRow* row = base::AfterStartCode(status.ShellCode());
  if (row == nullptr) return {};
  return fmt::format("rank {} exited with code {}, reported as {}: {} is dlaunch's code for {}", rank, row->code,
                     base::kExitWorkerClash, row->code, row->what);
}

namespace {

rendezvous::RestartRules RulesOf(const SupervisorOptions& o) {
  rendezvous::RestartRules rules;
  rules.max_restarts = o.max_restarts;
  rules.max_no_progress_restarts = o.max_no_progress_restarts;
  rules.backoff_min = o.backoff_min;
  rules.backoff_max = o.backoff_max;
  return rules;
}

}  // namespace

Supervisor::Supervisor(WorkerControl& control, SupervisorOptions options)
    : control_(control), options_(options), policy_(RulesOf(options)) {}

Status Supervisor::Start(Clock::time_point now) { return StartAll(now); }

Status Supervisor::StartAll(Clock::time_point now) {
  workers_.assign(static_cast<size_t>(options_.nproc), WorkerRecord{});
  first_failure_ = -1;
  killed_ = false;
  sampling_ = false;
  deadline_.reset();
  state_ = State::kRunning;
  policy_.Started(now);
  for (int i = 0; i < options_.nproc; ++i) {
    WorkerRecord& w = workers_[static_cast<size_t>(i)];
    w.local_rank = i;
    w.restart = policy_.restarts();
    Result<int> pid = control_.Start(i, w.restart);
    if (!pid.ok()) {
      start_failed_ = true;
      exit_code_ = pid.status().code() == Code::kNotFound ? kExitNotFound : 1;
      BeginStop(SIGTERM, now);
      MaybeFinish(now);
      return pid.status();
    }
    w.pid = *pid;
    w.started = now;
    w.running = true;
  }
  return Status::Ok();
}

int Supervisor::Running() const {
  int n = 0;
  for (const WorkerRecord& w : workers_) n += w.running ? 1 : 0;
  return n;
}

void Supervisor::SignalRunning(int sig) {
  for (const WorkerRecord& w : workers_)
    if (w.running) control_.Signal(w.pid, sig);
}

void Supervisor::BeginStop(int sig, Clock::time_point now) {
  if (state_ != State::kRunning) return;
  state_ = State::kStopping;
  SignalRunning(sig);
  deadline_ = now + options_.shutdown_timeout;
}

void Supervisor::OnExit(int pid, ExitStatus status, Clock::time_point now) {
  for (WorkerRecord& w : workers_) {
    if (w.pid != pid || !w.running) continue;
    w.running = false;
    w.ended = now;
    w.status = status;
    w.stopped_by_us = state_ == State::kStopping;
    control_.Release(pid);
    if (!status.ok() && state_ == State::kRunning) {
      first_failure_ = w.local_rank;
      exit_code_ = JobCode(status);
      BeginStop(SIGTERM, now);
    }
    MaybeFinish(now);
    return;
  }
}

void Supervisor::MaybeFinish(Clock::time_point now) {
  if (Running() > 0 || state_ == State::kDone || state_ == State::kWaiting) return;
  deadline_.reset();
  bool failed = first_failure_ >= 0;
  if (failed && !aborted_ && stop_signal_ == 0 && !start_failed_ && Restart(now)) return;
  state_ = State::kDone;
  if (!failed && stop_signal_ == 0 && !aborted_ && !start_failed_) exit_code_ = 0;
}

// The generation failed and every worker has exited: the policy decides, from
// each rank's progress now, whether it restarts (at once, or after a backoff
// in kWaiting). False: the job ends here.
bool Supervisor::Restart(Clock::time_point now) {
  std::vector<std::int64_t> progress = control_.Progress();
  for (size_t i = 0; i < progress.size(); ++i)
    if (progress[i] >= 0) policy_.Progress(static_cast<int>(i), progress[i]);
  rendezvous::RestartDecision d = policy_.Failed(rendezvous::Failure::kWorker, now);
  using Verdict = rendezvous::RestartDecision::Verdict;
  if (d.verdict == Verdict::kNoProgress) {
    exit_code_ = base::kExitNoProgress;
    control_.Notice(fmt::format("not restarting: {}; exit code {} (do not requeue)", d.why, exit_code_));
    return false;
  }
  if (d.verdict != Verdict::kRestart) return false;
  if (d.wait.count() > 0) {
    state_ = State::kWaiting;
    deadline_ = now + d.wait;
    control_.Notice(fmt::format("restarting in {} (backoff)", SecondsText(d.wait)));
    return true;
  }
  StartAll(now);  // a start failure here is recorded and stops the job
  return true;
}

void Supervisor::OnStopSignal(int sig, Clock::time_point now) {
  if (state_ == State::kDone) return;
  if (state_ == State::kWaiting) {
    stop_signal_ = sig;
    exit_code_ = 128 + sig;
    deadline_.reset();
    state_ = State::kDone;
    return;
  }
  if (state_ == State::kStopping) {
    // A second Ctrl-C means "now": skip the grace period.
    if (sig == SIGINT && !killed_) {
      Kill();
      deadline_.reset();
    }
    return;
  }
  stop_signal_ = sig;
  exit_code_ = 128 + sig;
  BeginStop(sig, now);
  MaybeFinish(now);
}

void Supervisor::Forward(int sig) {
  if (state_ == State::kRunning || state_ == State::kStopping) SignalRunning(sig);
}

void Supervisor::Abort(int code, Clock::time_point now) {
  if (state_ == State::kDone) return;
  aborted_ = true;
  if (state_ == State::kWaiting) {  // the failure here stands; nothing runs to stop
    deadline_.reset();
    state_ = State::kDone;
    return;
  }
  if (state_ == State::kRunning) exit_code_ = code;
  BeginStop(SIGTERM, now);
  MaybeFinish(now);
}

void Supervisor::OnTick(Clock::time_point now) {
  if (!deadline_ || now < *deadline_) return;
  deadline_.reset();
  if (state_ == State::kWaiting) {
    StartAll(now);  // the backoff has passed
    return;
  }
  if (state_ != State::kStopping || killed_) return;
  // Workers that ignore SIGTERM after a failure are most often stuck (in a
  // collective the failed rank never joined): where they are is the second
  // half of the root cause, and a SIGKILL would erase it.
  bool after_failure = (first_failure_ >= 0 || aborted_) && stop_signal_ == 0;
  if (!sampling_ && after_failure && options_.sample_before_kill.count() > 0) {
    std::vector<int> pids;
    for (const WorkerRecord& w : workers_)
      if (w.running) pids.push_back(w.pid);
    sampling_ = true;
    deadline_ = now + options_.sample_before_kill;
    control_.SampleBeforeKill(pids);
    return;
  }
  Kill();
}

void Supervisor::OnSampled(Clock::time_point now) {
  (void)now;
  if (!sampling_ || killed_ || state_ != State::kStopping) return;
  deadline_.reset();
  Kill();
}

void Supervisor::Kill() {
  killed_ = true;
  SignalRunning(SIGKILL);
}

const WorkerRecord* Supervisor::root_cause() const {
  if (first_failure_ < 0) return nullptr;
  return &workers_[static_cast<size_t>(first_failure_)];
}

}  // namespace dlaunch::launcher
