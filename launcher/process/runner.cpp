#include "launcher/process/runner.hpp"

#include <signal.h>

#include <algorithm>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <fmt/format.h>

#include "launcher/core/event_loop.hpp"
#include "launcher/core/private_dir.hpp"
#include "launcher/core/text.hpp"
#include "launcher/process/hang_watch.hpp"
#include "launcher/process/process_control.hpp"
#include "launcher/process/run_env.hpp"
#include "launcher/process/summary.hpp"
#include "launcher/process/worker_group.hpp"
#include "launcher/process/worker_rows.hpp"
#include "launcher/stacks/stacks.hpp"

namespace dlaunch::launcher {
namespace {

namespace asio = boost::asio;

// Default: how long taking the stacks of a hung job may last (gdb attaches take seconds).
constexpr std::chrono::seconds kStackLimit{10};

// Wires the parts of one node's run together on the event loop: the worker
// group, the signals, the supervisor's deadline, the hang watch, the live
// rows, the stacks and the summary at the end. Its effects all go through
// `env` (run_env.hpp).
class Runner : public WorkerRun {
 public:
  Runner(const RunPlan& plan, RunEnv& env, asio::io_context& io, Console& console, JobChannel* channel)
      : plan_(plan),
        env_(env),
        io_(io),
        console_(console),
        channel_(channel),
        processes_(env.NewProcesses()),
        group_(plan, env.job_mark(), *processes_, io, console,
               {[this] { AfterEvent(); }, [this](const std::vector<int>& pids) { SampleBeforeKill(pids); },
                [this](const std::string& line) { console_.Say(line); }},
               [&timers = env.timers()] { return timers.Now(); }),
        hang_(plan.hang_timeout),
        rows_(group_.size()),
        timer_(env.timers().NewTimer()),
        hang_timer_(env.timers().NewTimer()) {}

  void Run(std::function<void(int)> done);

  boost::json::array Rows() override { return RowsOf(true); }
  boost::json::array RecordRows() override { return RowsOf(false); }
  void Stacks(std::function<void(std::vector<RankStack>)> done) override;
  void Abort(int code, const std::string& reason) override;
  void PassOn(int sig) override {
    supervisor().Forward(sig);
    AfterEvent();
  }
  Clock::time_point last_output() const override { return group_.last_output(); }

 private:
  boost::json::array RowsOf(bool read_proc);
  void AttachChannel();
  void OnSignal(int sig);
  Clock::time_point Now() const { return env_.timers().Now(); }
  void AfterEvent();
  void ReportRootCause();
  void Finish();
  void ArmHangWatch();
  void OnHang(Clock::duration silent);
  void ReportHang(std::chrono::seconds silent, std::vector<RankStack> stacks);
  void SampleBeforeKill(const std::vector<int>& pids);
  SupervisorSet& supervisor() { return group_.supervisor(); }

  const RunPlan& plan_;
  RunEnv& env_;
  asio::io_context& io_;
  Console& console_;
  JobChannel* channel_;
  std::unique_ptr<ProcessControl> processes_;
  WorkerGroup group_;
  HangWatch hang_;
  WorkerRows rows_;
  std::unique_ptr<SignalWatch> signals_;  // stop and forwarded signals
  std::unique_ptr<Timer> timer_;          // the supervisor's deadline
  std::unique_ptr<Timer> hang_timer_;
  std::unique_ptr<StackTaker> stacks_;
  // Stacks(): who waits for the collection that runs.
  std::vector<std::function<void(std::vector<RankStack>)>> stack_waiters_;
  std::vector<std::string> hang_cause_;   // with hang_stop: the summary, for the end
  std::vector<std::string> kill_stacks_;  // where the workers killed after a failure were
  bool failure_reported_ = false;
  bool cause_recorded_ = false;
  bool finished_ = false;
  std::function<void(int)> done_;
  Lifetime life_;  // last: expires first
};

void Runner::Run(std::function<void(int)> done) {
  done_ = std::move(done);
  std::vector<int> caught = plan_.stop_signals;
  caught.insert(caught.end(), {SIGUSR1, SIGUSR2, SIGCONT});
  signals_ = env_.signals().Watch(caught, [this](int sig) { OnSignal(sig); });
  AttachChannel();
  if (Status s = group_.Start(); !s.ok()) console_.Say(s.message());
  // One node's silence says nothing when another node's ranks print: in a
  // rendezvous job (a channel) the coordinator judges silence over every node,
  // from the last_output() each agent reports in its heartbeats.
  if (channel_ == nullptr) ArmHangWatch();
  AfterEvent();
}

void Runner::AttachChannel() {
  if (channel_ == nullptr) return;
  channel_->Attach([this](int code, const std::string& reason) { Abort(code, reason); });
}

void Runner::Abort(int code, const std::string& reason) {
  if (!supervisor().done() && !reason.empty()) console_.Say(reason);
  if (!reason.empty()) plan_.events->SetRootCause(reason);
  supervisor().Abort(code, Now());
  AfterEvent();
}

void Runner::OnSignal(int sig) {
  if (std::find(plan_.stop_signals.begin(), plan_.stop_signals.end(), sig) != plan_.stop_signals.end()) {
    // A stalled reader must not hold up the teardown the user asked for.
    console_.NoteStop();
    supervisor().OnStopSignal(sig, Now());
  } else if (std::string sender = env_.signals().SenderCommand(sig); PassOnToWorkers(plan_.slurm, sender)) {
    supervisor().Forward(sig);
  } else {
    console_.Say(fmt::format("{} from {} reached every process of the Slurm step: not passed on again", SignalName(sig),
                             sender));
  }
  AfterEvent();
}

void Runner::AfterEvent() {
  ReportRootCause();
  if (group_.Ended()) return Finish();
  if (supervisor().done()) return;  // AfterEvent runs again as each stream closes
  if (std::optional<Clock::time_point> deadline = supervisor().deadline()) {
    timer_->At(*deadline, [this] {
      supervisor().OnTick(Now());
      AfterEvent();
    });
  }
}

// The first failure, once: the root cause of --events, and the channel's.
void Runner::ReportRootCause() {
  const WorkerRecord* root = supervisor().root_cause();
  if (root == nullptr) return;
  if (!cause_recorded_) {
    cause_recorded_ = true;
    plan_.events->SetRootCause(fmt::format("rank {} {}", group_.RankOf(root->local_rank), Describe(root->status)));
  }
  if (channel_ != nullptr && !failure_reported_) {
    failure_reported_ = true;
    channel_->LocalFailure(group_.RankOf(root->local_rank), JobCode(root->status), Describe(root->status));
  }
}

void Runner::Finish() {
  if (finished_) return;
  finished_ = true;
  signals_->Cancel();
  timer_->Cancel();
  hang_timer_->Cancel();
  group_.Close();
  int code = supervisor().exit_code();
  if (supervisor().stop_signal() != 0)
    plan_.events->SetRootCause(fmt::format("dlaunch was sent {}", SignalName(supervisor().stop_signal())));
  NodeEnd end = GatherEnd(group_, plan_.private_dir);
  end.hang_cause = hang_cause_;
  end.kill_stacks = kill_stacks_;
  for (const std::string& line : NodeEndLines(end)) console_.Say(line);
  // The cancelled handlers above are queued already; `done` runs after them, so
  // it may destroy this runner.
  asio::post(io_, [done = std::move(done_), code] { done(code); });
}

void Runner::ArmHangWatch() {
  if (supervisor().done()) return;
  // Between generations (a teardown, a restart's backoff) no rank runs to be
  // silent: the watch looks again later, and the next generation's silence
  // counts from its start (WorkerGroup::last_output).
  Clock::time_point now = Now();
  bool between = supervisor().state() != Supervisor::State::kRunning;
  std::optional<Clock::time_point> at = hang_.NextCheck(group_.last_bytes(), between ? now : group_.last_output(), now);
  if (!at) return;
  hang_timer_->At(*at, [this] {
    if (supervisor().state() != Supervisor::State::kRunning) return ArmHangWatch();
    if (auto silent = hang_.Check(group_.last_bytes(), group_.last_output(), Now())) return OnHang(*silent);
    ArmHangWatch();
  });
}

void Runner::OnHang(Clock::duration silent) {
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(silent);
  console_.Say(fmt::format("no rank has made progress for {}s: collecting stacks", secs.count()));
  Stacks([this, secs, alive = life_.token()](std::vector<RankStack> stacks) {
    if (!alive.expired()) ReportHang(secs, std::move(stacks));
  });
}

void Runner::ReportHang(std::chrono::seconds silent, std::vector<RankStack> stacks) {
  std::vector<std::string> lines = HangReport(silent, stacks, plan_.work_dir, *plan_.events);
  for (const std::string& line : lines) console_.Say(line);
  if (plan_.hang_stop && !supervisor().done()) {
    plan_.events->SetRootCause("hang: " + HangStopCause(silent));
    hang_cause_ = HangCause(silent, lines);
    supervisor().Abort(kExitHang, Now());
    AfterEvent();
    return;
  }
  ArmHangWatch();
}

void Runner::Stacks(std::function<void(std::vector<RankStack>)> done) {
  stack_waiters_.push_back(std::move(done));
  if (stack_waiters_.size() > 1) return;  // joins the collection that runs
  std::vector<StackTaker::Target> targets;
  for (const WorkerRecord& w : supervisor().workers())
    if (w.running) targets.push_back({group_.RankOf(w.local_rank), w.pid});
  if (!stacks_) stacks_ = env_.NewStackTaker(plan_.private_dir, kStackLimit);
  // The collector may finish inside Collect (nothing to sample): the waiters are
  // called from a handler of their own, never from inside Stacks().
  stacks_->Collect(std::move(targets), [this, alive = life_.token()](std::vector<RankStack> stacks) {
    asio::post(io_, [this, alive, stacks = std::move(stacks)]() mutable {
      if (alive.expired()) return;
      std::vector<std::function<void(std::vector<RankStack>)>> waiters = std::move(stack_waiters_);
      stack_waiters_.clear();
      for (auto& w : waiters) w(stacks);
    });
  });
}

boost::json::array Runner::RowsOf(bool read_proc) {
  Clock::time_point now = Now();
  const envmap::JobLayout& layout = plan_.layout;
  boost::json::array rows;
  for (size_t i = 0; i < group_.size(); ++i) {
    const WorkerRecord* w = group_.worker(i);
    RankFacts f{group_.slot(i).rank,
                group_.ToldLocalRank(static_cast<int>(i)),
                layout.node_rank,
                layout.nodes[static_cast<size_t>(layout.node_rank)].host,
                layout.restart_count + (w != nullptr ? w->restart : 0),
                w,
                group_.last_line(i),
                w != nullptr && w->running && group_.held(i),
                group_.slot(i).role};
    rows.push_back(rows_.Row(i, f, now, read_proc));
  }
  return rows;
}

// The supervisor waits for OnSampled (or its own bound), so the SIGKILL comes
// right after the dumps: Python's in milliseconds, gdb's in about a second.
void Runner::SampleBeforeKill(const std::vector<int>& pids) {
  std::vector<int> ranks;
  for (const WorkerRecord& w : supervisor().workers())
    if (w.running && std::find(pids.begin(), pids.end(), w.pid) != pids.end())
      ranks.push_back(group_.RankOf(w.local_rank));
  console_.Say(fmt::format(
      "{} {} still running {}s after SIGTERM: taking stacks before SIGKILL", ranks.size() == 1 ? "rank" : "ranks",
      RankRanges(ranks), std::chrono::duration_cast<std::chrono::seconds>(plan_.supervisor.shutdown_timeout).count()));
  // What the summary says if the supervisor's bound passes first (gdb attaches
  // take seconds on a busy machine): the workers are killed unsampled.
  kill_stacks_ = {fmt::format(
      "at SIGKILL: {} {} not sampled: no stacks within {}s", ranks.size() == 1 ? "rank" : "ranks", RankRanges(ranks),
      std::chrono::duration_cast<std::chrono::seconds>(plan_.supervisor.sample_before_kill).count())};
  // Every running worker is one of `pids` here (the supervisor asks for all of
  // them); a collection already under way (a hang's) is joined.
  Stacks([this, alive = life_.token()](std::vector<RankStack> stacks) {
    if (alive.expired()) return;
    kill_stacks_ = HangSummary(stacks, 3, "at SIGKILL");
    kill_stacks_.push_back("at SIGKILL: " + SaveStacks(plan_.work_dir, stacks, *plan_.events));
    supervisor().OnSampled(Now());
    AfterEvent();
  });
}

}  // namespace

void PrintNotices(const RunPlan& plan, Console& console) {
  int n = plan.supervisor.nproc;
  if (n > 1 && !plan.inherited.contains("OMP_NUM_THREADS"))
    console.Say(fmt::format("setting OMP_NUM_THREADS=1 for each of {} workers (export it to choose)", n));
}

std::unique_ptr<WorkerRun> StartJob(const RunPlan& plan, RunEnv& env, asio::io_context& io, Console& console,
                                    JobChannel* channel, std::function<void(int)> done) {
  if (!plan.flavors.azure_hostfile.empty()) {
    if (Status s = WriteFile(plan.flavors.azure_hostfile, envmap::AzureHostfile(plan.layout)); !s.ok()) {
      console.Say(s.message());
      asio::post(io, [done = std::move(done)] { done(1); });
      return nullptr;
    }
  }
  auto runner = std::make_unique<Runner>(plan, env, io, console, channel);
  runner->Run(std::move(done));
  return runner;
}

}  // namespace dlaunch::launcher
