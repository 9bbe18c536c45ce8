// One node's workers as a group: spawns each (its environment, argv, pipes
// and logs), reaps them, restarts them, and routes their output, with the
// Supervisor deciding when. It knows nothing of the hang watch, the live rows
// or the summary: those read what it exposes here. Processes come through a
// ProcessControl and time through `now`, so tests fake both.
//
// Every call happens on the event loop's thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "envmap/worker_env.hpp"
#include "launcher/core/console.hpp"
#include "launcher/core/output.hpp"
#include "launcher/process/process_control.hpp"
#include "launcher/process/run_plan.hpp"
#include "launcher/process/streams.hpp"
#include "launcher/process/supervisor.hpp"
#include "launcher/process/supervisor_set.hpp"

namespace dlaunch::launcher {

class WorkerGroup : private WorkerControl {
 public:
  struct Hooks {
    // After each event that may have moved the group on: a batch of exits, a
    // stream that closed. May be empty.
    std::function<void()> changed;
    // WorkerControl::SampleBeforeKill: take `pids`' stacks, then call
    // supervisor().OnSampled. Empty: never asked (no sampling in the plan).
    std::function<void(const std::vector<int>& pids)> sample;
    // WorkerControl::Notice: one line for the user (a restart's backoff).
    // Empty: said nowhere.
    std::function<void(const std::string& line)> say;
  };

  // `plan` (its events never null), `processes`, `io` and `console` must outlive
  // the group. `job_mark`: the watchdog's mark for every worker's environment
  // (empty: none).
  WorkerGroup(const RunPlan& plan, std::string job_mark, ProcessControl& processes, boost::asio::io_context& io,
              Console& console, Hooks hooks, std::function<Clock::time_point()> now = Clock::now);

  // Starts reaping, then every worker. A start that fails is returned (the
  // supervisor then ends the job, 127 for a command not found).
  Status Start();
  // Ends it all at once: stops reaping and closes every stream.
  void Close();
  // True once the supervisor is done and every worker's output has closed.
  // While the supervisor is done and output is still open, it is drained
  // (Streams::Drain), and `changed` runs again as each stream closes.
  bool Ended();

  // The policy, for the events that come from outside: signals, ticks, a
  // failure elsewhere, a sample taken. Call Changed() after these.
  SupervisorSet& supervisor() { return supervisor_; }
  const SupervisorSet& supervisor() const { return supervisor_; }
  void Changed() {
    if (hooks_.changed) hooks_.changed();
  }

  size_t size() const { return slots_.size(); }
  const envmap::WorkerSlot& slot(size_t local_rank) const { return slots_[local_rank]; }
  int RankOf(int local_rank) const { return slots_[static_cast<size_t>(local_rank)].rank; }
  // The LOCAL_RANK `local_rank` is told: with one dlaunch per worker (mpirun,
  // srun) that is its place on the machine, not 0.
  int ToldLocalRank(int local_rank) const;
  // The worker of `local_rank` in the current generation; null before it started.
  const WorkerRecord* worker(size_t local_rank) const;
  const TailBuffer& stderr_tail(size_t local_rank) const { return tails_[local_rank]; }
  // The stream of `local_rank` that wrote last; null before any byte.
  const LastLine* last_line(size_t local_rank) const;
  // True while the console holds back output of `local_rank` (Streams::held).
  bool held(size_t local_rank) const;
  // When any rank last wrote a byte (or the group or its last generation started). Output that the
  // console holds back is progress, not silence: while any is held, now.
  Clock::time_point last_output() const { return streams_.held(0) ? now_() : last_output_; }
  // The same without the held output: what a reported silence is keyed to.
  Clock::time_point last_bytes() const { return last_output_; }

 private:
  // WorkerControl, for the supervisor.
  Result<int> Start(int local_rank, int restart) override;
  void Signal(int pid, int sig) override { processes_.Signal(pid, sig); }
  void Release(int pid) override { processes_.Release(pid); }
  void SampleBeforeKill(const std::vector<int>& pids) override;
  std::vector<std::int64_t> Progress() override;
  void Notice(const std::string& line) override {
    if (hooks_.say) hooks_.say(line);
  }

  Status LogDir(int local_rank, int restart, std::string* dir) const;
  SpawnSpec Spec(int local_rank, int restart) const;
  Status AddStream(int fd, int local_rank, bool is_err, const std::string& dir);
  void Started(int pid, int local_rank, int restart);
  void Exited(int pid, const ExitStatus& status);
  // The group of `local_rank` when it restarts alone (--role-restarts); null otherwise.
  const envmap::ProgramGroup* RestartedAlone(int local_rank) const;

  // A worker that runs: for worker_exited.
  struct Running {
    int local_rank = 0;
    int restart = 0;
    Clock::time_point since;
  };

  const RunPlan& plan_;
  std::string job_mark_;
  ProcessControl& processes_;
  Hooks hooks_;
  std::function<Clock::time_point()> now_;
  Clock::time_point last_output_;  // any rank's last bytes
  Streams streams_;                // every worker's, in one group (0)
  SupervisorSet supervisor_;       // one Supervisor per domain (supervisor_set.hpp)
  std::vector<envmap::WorkerSlot> slots_;
  std::vector<int> gpu_places_;  // several programs: each local rank's place in its group here
  std::vector<TailBuffer> tails_;
  std::vector<std::array<LastLine, 2>> lasts_;  // per local rank: stdout's, stderr's
  std::map<int, Running> running_;              // by pid
  int restarts_seen_ = 0;
  std::map<std::string, int> role_restarts_seen_;  // a role restarted alone: its own count
};

}  // namespace dlaunch::launcher
