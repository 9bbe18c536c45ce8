// Runs one node's workers to the end: the Asio event loop that connects real
// processes, pipes and signals to the Supervisor policy.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/json/array.hpp>

#include "envmap/worker_env.hpp"
#include "launcher/core/console.hpp"
#include "launcher/core/events.hpp"
#include "launcher/process/process.hpp"
#include "launcher/process/stacks.hpp"
#include "launcher/process/supervisor.hpp"

namespace dlaunch::launcher {

// Everything the runner needs, decided in main() from the flags and the machine.
struct RunPlan {
  envmap::JobLayout layout;
  envmap::Flavors flavors;           // error_file is filled in per worker
  envmap::EnvMap inherited;          // the launcher's environment
  std::string exe;                   // resolved argv[0]
  std::vector<std::string> argv;     // the worker's argv, argv[0] as typed
  size_t local_rank_arg_at = 0;      // where in argv --local-rank=N goes (0: at the end)
  std::string work_dir;              // the run directory: stacks-N.txt and, with write_logs, logs
  // dlaunch's own directory (0700, made for this job, removed after it): the
  // stack hook (py/), its dumps (stacks/), the error files, Azure's hostfile.
  std::string private_dir;
  bool write_logs = false;
  // Per local rank, the streams kept off the console (torchrun's Std: 1
  // stdout, 2 stderr, 3 both); a rank past the end: none.
  std::vector<int> redirected;
  std::vector<int> console_ranks;    // local ranks shown on the console; empty: all
  std::optional<std::string> tag_format;  // nullopt: lines are not tagged
  std::vector<std::vector<int>> cpus;     // per local rank; empty: no binding
  std::vector<std::string> gpus;          // visible GPU ids, for --pin-gpu
  bool pin_gpu = false;
  SupervisorOptions supervisor;
  std::vector<int> stop_signals;     // signals that stop the job
  EventLog* events = nullptr;        // never null once StartJob runs; may write nothing
  // The hang watch: no rank wrote a line for hang_timeout (0: off) -> every
  // rank's stack (launcher/process/stacks.hpp), then the job runs on or, with
  // hang_stop, ends with exit code 124. Only without a JobChannel: in a
  // rendezvous job the coordinator judges silence across every node. python_hook: load the stack hook in
  // Python workers (private_dir/py on PYTHONPATH).
  std::chrono::milliseconds hang_timeout{0};
  bool hang_stop = false;
  bool python_hook = false;
};

// Exit code of a job stopped because it hung (as timeout(1)).
using envmap::kExitHang;  // envmap/defaults.hpp
// Default: how long dlaunch may take the stacks of workers that outlived a
// failure's shutdown timeout, before their SIGKILL (on with the hang watch).
inline constexpr std::chrono::seconds kSampleBeforeKill{5};

// Connects this node's workers to the rest of a multi-node job (the rendezvous
// agent implements it). Every call happens on the event loop's thread.
class JobChannel {
 public:
  virtual ~JobChannel() = default;
  // Called once, when the runner starts: `abort(code, reason)` stops this node's
  // workers because of a failure elsewhere (`reason` is printed unless empty).
  virtual void Attach(std::function<void(int code, const std::string& reason)> abort) = 0;
  // The first local worker failure: global rank, its shell exit code, and a
  // one-line description for the job-wide summary.
  virtual void LocalFailure(int rank, int code, const std::string& reason) = 0;
};

// This node's workers of one generation, running on the event loop. Every call
// happens on the event loop's thread.
class WorkerRun {
 public:
  virtual ~WorkerRun() = default;
  // This node's ranks now, one JSON object per local rank: rank, local_rank, node_rank, host, pid (0 when
  // not running), state, run_time_s, cpu_pct, rss_kib, restarts, silent_s, last_line. Never blocks.
  virtual boost::json::array Rows() = 0;
  // Every running rank's stack (one collection at a time; a call while one runs gets the same result) ->
  // `done` once, on the loop. Workers keep running.
  // (state: running, sleeping, disk-wait, stopped, traced, zombie, idle, exiting, "exited (N)",
  // "killed (SIGNAME)" or "not started"; a run destroyed before its collection ends drops `done`.)
  virtual void Stacks(std::function<void(std::vector<RankStack>)> done) = 0;
  // When any rank last wrote a byte (or the run started): a rendezvous agent
  // sends the silence since then in every heartbeat (rendezvous/codec.hpp).
  virtual std::chrono::steady_clock::time_point last_output() const = 0;
};

// One-line notices before the first start, like torchrun's OMP_NUM_THREADS one.
void PrintNotices(const RunPlan& plan, Console& console);

// Starts this node's workers on `io` and returns at once. When every worker has
// exited and its output has gone to the console, prints the failure summary (when
// the job failed) and calls `done(code)` with the node's exit code from a handler
// of its own, after every handler of the run has finished: `done` may destroy the
// run. `plan`, `watchdog` (already started) and `console` (on `io`) must outlive
// the run; `channel` is null for a single-node job. A run destroyed before `done`
// stops nothing: that is a programmer error.
std::unique_ptr<WorkerRun> StartJob(const RunPlan& plan, Watchdog& watchdog, boost::asio::io_context& io,
                                    Console& console, JobChannel* channel, std::function<void(int code)> done);

}  // namespace dlaunch::launcher
