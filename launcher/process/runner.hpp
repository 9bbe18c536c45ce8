// Runs one node's workers to the end. StartJob wires the parts to the event
// loop's signals and timers: the worker group (worker_group.hpp: spawn, reap,
// restart, output, under the Supervisor policy), the hang watch
// (hang_watch.hpp), the live rows (worker_rows.hpp) and the summary at the end
// (summary.hpp).
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
#include "launcher/process/run_env.hpp"
#include "launcher/process/run_plan.hpp"
#include "launcher/process/supervisor.hpp"
#include "launcher/stacks/stacks.hpp"

namespace dlaunch::launcher {

// Exit code of a job stopped because it hung (as timeout(1)).
using base::kExitHang;  // base/defaults.hpp
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
  // This node's ranks now, one JSON object per local rank: rank, local_rank, node_rank, host, role, pid (0 when
  // not running), state, run_time_s, cpu_pct, rss_kib, restarts, silent_s, last_line, and once it has
  // exited exit_code (the shell's: 128+N for signal N). Never blocks.
  virtual boost::json::array Rows() = 0;
  // The same rows from dlaunch's own records alone, without /proc: a live worker's
  // state is "running", its cpu_pct and rss_kib 0. For a scrape a second
  // (launcher/metrics/metrics.hpp), where two /proc files a rank were most of its cost.
  virtual boost::json::array RecordRows() { return Rows(); }
  // Every running rank's stack (one collection at a time; a call while one runs gets the same result) ->
  // `done` once, on the loop. Workers keep running.
  // (state: running, sleeping, disk-wait, stopped, traced, zombie, idle, exiting, "exited (N)",
  // "killed (SIGNAME)" or "not started"; a run destroyed before its collection ends drops `done`.)
  virtual void Stacks(std::function<void(std::vector<RankStack>)> done) = 0;
  // Passes `sig` on to every running worker, as a signal dlaunch caught itself
  // and does not stop on: for one a head passed on (launcher/modes/head_nodes.cpp).
  virtual void PassOn(int /*sig*/) {}
  // Stops every worker and ends the run with `code`, for a part beside the run
  // that judged the job (the straggler watch's --straggler-action stop);
  // `cause` is printed and becomes the root cause. As a rendezvous node's
  // coordinator ends one (JobChannel::Attach).
  virtual void Abort(int /*code*/, const std::string& /*cause*/) {}
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
// run. `plan`, `env` and `console` (on `io`) must outlive the run; `channel`
// is null for a single-node job. Every effect of the run goes through `env`
// (run_env.hpp). A run destroyed before `done` stops nothing: that is a
// programmer error.
std::unique_ptr<WorkerRun> StartJob(const RunPlan& plan, RunEnv& env, boost::asio::io_context& io, Console& console,
                                    JobChannel* channel, std::function<void(int code)> done);

}  // namespace dlaunch::launcher
