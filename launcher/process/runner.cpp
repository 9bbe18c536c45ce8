#include "launcher/process/runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <boost/asio/io_context.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "launcher/core/event_loop.hpp"
#include "launcher/core/output.hpp"
#include "launcher/core/private_dir.hpp"
#include "launcher/core/text.hpp"
#include "launcher/process/job_mark.hpp"
#include "launcher/process/stacks.hpp"
#include "launcher/process/streams.hpp"
#include "launcher/process/summary.hpp"

namespace dlaunch::launcher {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

// Default: bytes per read of one worker pipe.
constexpr size_t kReadSize = size_t{1} << 18;
// Default: how long taking the stacks of a hung job may last (gdb attaches take seconds).
constexpr std::chrono::seconds kStackLimit{10};

class Runner : public WorkerRun, public WorkerControl {
 public:
  Runner(const RunPlan& plan, Watchdog& watchdog, asio::io_context& io, Console& console, JobChannel* channel)
      : plan_(plan),
        watchdog_(watchdog),
        io_(io),
        console_(console),
        channel_(channel),
        signals_(io_),
        timer_(io_),
        hang_timer_(io_),
        streams_(io_, console_, kReadSize),
        reaper_(
            io_,
            [this](int pid, int status) {
              ExitStatus st = FromWaitStatus(status);
              Exited(pid, st);
              supervisor_.OnExit(pid, st, Clock::now());
            },
            [this] { AfterEvent(); }),
        supervisor_(*this, plan.supervisor),
        slots_(envmap::LocalSlots(plan.layout)),
        tails_(slots_.size()),
        lasts_(slots_.size()),
        cpu_(slots_.size()) {}

  void Run(std::function<void(int)> done);

  Result<int> Start(int local_rank, int restart) override;
  void Signal(int pid, int sig) override {
    if (kill(-pid, sig) != 0 && errno == ESRCH) kill(pid, sig);
  }
  void Release(int pid) override {
    kill(-pid, SIGKILL);  // whatever the worker left behind in its group
    watchdog_.Remove(pid);
  }
  void SampleBeforeKill(const std::vector<int>& pids) override;

  boost::json::array Rows() override;
  void Stacks(std::function<void(std::vector<RankStack>)> done) override;
  // Output that the console holds back in a rank's pipe is progress, not
  // silence: the rank is writing (often blocked on the full pipe) while the
  // reader of dlaunch's stdout is slow or stopped (`| less`, Ctrl-S).
  Clock::time_point last_output() const override { return streams_.held(0) ? Clock::now() : last_output_; }

 private:
  Status AddStream(int fd, int local_rank, bool is_err, const std::string& dir);
  void WaitSignals();
  void AfterEvent();
  void Finish();
  void PrintSummary();
  // --events: worker_exited, and the job's root cause.
  void Exited(int pid, const ExitStatus& status);
  // The hang watch (RunPlan::hang_timeout).
  void ArmHangWatch();
  void OnHang(Clock::duration silent);
  void ReportHang(std::chrono::seconds silent, std::vector<RankStack> stacks);
  boost::json::object Row(size_t local_rank, Clock::time_point now);
  // Writes RUN_DIR/stacks-N.txt (emitting the stacks event): the line that says where, or why not.
  std::string WriteStacks(const std::vector<RankStack>& stacks);

  // A worker that runs: for worker_exited.
  struct Running {
    int local_rank = 0;
    int restart = 0;
    Clock::time_point since;
  };

  const RunPlan& plan_;
  Watchdog& watchdog_;
  asio::io_context& io_;
  Console& console_;
  JobChannel* channel_;
  asio::signal_set signals_;  // stop and forwarded signals
  asio::steady_timer timer_;
  asio::steady_timer hang_timer_;
  Clock::time_point last_output_ = Clock::now();  // any rank's last bytes
  std::optional<Clock::time_point> reported_;     // the silence already reported: last_output_ then
  std::unique_ptr<StackCollector> stacks_;
  std::vector<std::string> hang_cause_;  // with hang_stop: the summary, for the end
  std::vector<std::string> kill_stacks_;  // where the workers killed after a failure were
  Streams streams_;  // every worker's, in one group
  Reaper reaper_;
  Supervisor supervisor_;
  std::vector<envmap::WorkerSlot> slots_;
  std::vector<TailBuffer> tails_;
  std::vector<std::array<LastLine, 2>> lasts_;  // per local rank: stdout's, stderr's
  // Per local rank, the last CPU reading: CPU % is the share since the one before.
  struct CpuSample {
    int pid = 0;
    uint64_t ticks = 0;
    Clock::time_point at;
  };
  std::vector<CpuSample> cpu_;
  // Stacks(): who waits for the collection that runs.
  std::vector<std::function<void(std::vector<RankStack>)>> stack_waiters_;
  std::map<int, Running> running_;  // by pid
  int restarts_seen_ = 0;
  bool failure_reported_ = false;
  bool cause_recorded_ = false;
  bool finished_ = false;
  Lifetime life_;  // last: expires first
  std::function<void(int)> done_;
};

void Runner::Exited(int pid, const ExitStatus& status) {
  auto it = running_.find(pid);
  if (it == running_.end()) return;
  const Running r = it->second;
  running_.erase(it);
  boost::json::object e{{"rank", slots_[static_cast<size_t>(r.local_rank)].rank},
                        {"local_rank", r.local_rank},
                        {"pid", pid},
                        {"restart", r.restart},
                        {"run_time_ms", std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - r.since).count()}};
  if (status.signal != 0) e["signal"] = SignalName(status.signal);
  else e["exit_code"] = status.code;
  plan_.events->Emit("worker_exited", std::move(e));
}

// TORCHELASTIC_ERROR_FILE: in the private directory, since dlaunch reads it back.
std::string ErrorFile(const std::string& private_dir, int restart, int local_rank) {
  return fmt::format("{}/error-{}-{}.json", private_dir, restart, local_rank);
}

Result<int> Runner::Start(int local_rank, int restart) {
  const envmap::WorkerSlot& slot = slots_[static_cast<size_t>(local_rank)];
  // The logs' directory, each level made 0700 or accepted only as ours: under
  // a shared --log-dir another user must not have planted it (private_dir.hpp).
  std::string dir = fmt::format("{}/attempt_{}", plan_.work_dir, restart);
  if (plan_.write_logs) {
    Status made = EnsureOwnDir(dir);
    dir += fmt::format("/{}", local_rank);
    if (made.ok()) made = EnsureOwnDir(dir);
    if (!made.ok()) return made;
  }

  envmap::JobLayout layout = plan_.layout;
  layout.restart_count = plan_.layout.restart_count + restart;  // the generation's, plus local restarts
  envmap::Flavors flavors = plan_.flavors;
  flavors.error_file = ErrorFile(plan_.private_dir, restart, local_rank);
  std::error_code ec;
  fs::remove(flavors.error_file, ec);

  envmap::EnvMap env = plan_.inherited;
  for (auto& [k, v] : envmap::WorkerEnv(layout, slot, flavors, plan_.inherited)) env[k] = v;
  if (plan_.python_hook) AddPythonHook(env, plan_.private_dir + "/py", plan_.private_dir + "/stacks");
  // Every descendant inherits it: the watchdog's way to find them all (job_mark.hpp).
  if (!watchdog_.job_mark().empty()) env[std::string(kJobMarkVar)] = watchdog_.job_mark();
  if (plan_.pin_gpu && !plan_.gpus.empty())
    env["CUDA_VISIBLE_DEVICES"] =
        plan_.gpus[static_cast<size_t>(envmap::ShapeOf(layout, slot).local_rank) % plan_.gpus.size()];

  SpawnSpec spec;
  spec.exe = plan_.exe;
  spec.args.assign(plan_.argv.begin() + 1, plan_.argv.end());
  std::vector<std::string> rank_arg = envmap::LocalRankArgs(layout, slot, flavors.local_rank_arg);
  size_t at = plan_.local_rank_arg_at > 0 ? std::min(plan_.local_rank_arg_at - 1, spec.args.size()) : spec.args.size();
  spec.args.insert(spec.args.begin() + static_cast<std::ptrdiff_t>(at), rank_arg.begin(), rank_arg.end());
  spec.env.reserve(env.size());
  for (auto& [k, v] : env) spec.env.push_back(k + "=" + v);
  if (!plan_.cpus.empty()) spec.cpus = plan_.cpus[static_cast<size_t>(local_rank)];

  Result<Pipe> out = MakePipe();
  if (!out.ok()) return out.status();
  Result<Pipe> err = MakePipe();
  if (!err.ok()) return err.status();
  spec.stdout_fd = out->write_fd;
  spec.stderr_fd = err->write_fd;
  Result<int> pid = SpawnWorker(spec);
  close(out->write_fd);
  close(err->write_fd);
  if (!pid.ok()) {
    close(out->read_fd);
    close(err->read_fd);
    return pid;
  }
  watchdog_.Add(*pid);
  if (restart > restarts_seen_) {
    restarts_seen_ = restart;
    plan_.events->Emit("restart", {{"restart", restart}, {"max_restarts", plan_.supervisor.max_restarts}});
  }
  running_[*pid] = Running{local_rank, restart, Clock::now()};
  plan_.events->Emit("worker_started", {{"rank", slot.rank}, {"local_rank", local_rank}, {"pid", *pid},
                                        {"restart", restart}, {"role", slot.role}});
  Status s = AddStream(out->read_fd, local_rank, false, dir);
  if (s.ok()) s = AddStream(err->read_fd, local_rank, true, dir);
  else close(err->read_fd);
  if (!s.ok()) {
    // The supervisor never learns this pid, so it must not outlive the failure.
    Signal(*pid, SIGKILL);
    watchdog_.Remove(*pid);
    return s;
  }
  return pid;
}

Status Runner::AddStream(int fd, int local_rank, bool is_err, const std::string& dir) {
  StreamRoute r;
  const envmap::WorkerSlot& slot = slots_[static_cast<size_t>(local_rank)];
  r.fields = TagFields{slot.rank, local_rank, plan_.layout.node_rank, slot.role, is_err ? "stderr" : "stdout",
                       plan_.layout.nodes[static_cast<size_t>(plan_.layout.node_rank)].host};
  if (plan_.tag_format) {
    Result<std::string> prefix = RenderTag(*plan_.tag_format, r.fields, std::time(nullptr));
    if (!prefix.ok()) {
      close(fd);
      return prefix.status();
    }
    r.prefix = *prefix;
    if (plan_.tag_format->find("{time}") != std::string::npos) r.format = *plan_.tag_format;
  }
  int bit = is_err ? 2 : 1;
  bool redirected = static_cast<size_t>(local_rank) < plan_.redirected.size() &&
                    (plan_.redirected[local_rank] & bit) != 0;
  bool shown = plan_.console_ranks.empty() ||
               std::find(plan_.console_ranks.begin(), plan_.console_ranks.end(), local_rank) != plan_.console_ranks.end();
  if (!redirected && shown) r.console = is_err ? ConsoleStream::kErr : ConsoleStream::kOut;
  if (plan_.write_logs) {
    std::string path = fmt::format("{}/{}.log", dir, is_err ? "stderr" : "stdout");
    Result<int> file = OpenToWrite(path, false);
    if (!file.ok()) {
      close(fd);
      return file.status();
    }
    r.file_fd = *file;
  }
  if (is_err) r.tail = &tails_[static_cast<size_t>(local_rank)];
  r.last = &lasts_[static_cast<size_t>(local_rank)][is_err ? 1 : 0];
  r.progress = &last_output_;
  streams_.Add(fd, 0, std::move(r), [this] { AfterEvent(); });
  return Status::Ok();
}

void Runner::WaitSignals() {
  signals_.async_wait([this, alive = life_.token()](boost::system::error_code ec, int sig) {
    if (ec || alive.expired()) return;
    if (std::find(plan_.stop_signals.begin(), plan_.stop_signals.end(), sig) != plan_.stop_signals.end()) {
      // A stalled reader must not hold up the teardown the user asked for.
      console_.NoteStop();
      supervisor_.OnStopSignal(sig, Clock::now());
    } else {
      supervisor_.Forward(sig);
    }
    AfterEvent();
    WaitSignals();
  });
}

void Runner::AfterEvent() {
  if (!cause_recorded_) {
    if (const WorkerRecord* root = supervisor_.root_cause()) {
      cause_recorded_ = true;
      plan_.events->SetRootCause(fmt::format("rank {} {}", slots_[static_cast<size_t>(root->local_rank)].rank,
                                             Describe(root->status)));
    }
  }
  if (channel_ != nullptr && !failure_reported_) {
    if (const WorkerRecord* root = supervisor_.root_cause()) {
      failure_reported_ = true;
      int rank = slots_[static_cast<size_t>(root->local_rank)].rank;
      channel_->LocalFailure(rank, root->status.ShellCode(), Describe(root->status));
    }
  }
  if (supervisor_.done()) {
    if (streams_.open(0) == 0) Finish();
    else streams_.Drain(0);  // AfterEvent runs again as each stream closes
    return;
  }
  if (std::optional<Clock::time_point> deadline = supervisor_.deadline()) {
    timer_.expires_at(*deadline);
    timer_.async_wait([this, alive = life_.token()](boost::system::error_code ec) {
      if (ec || alive.expired()) return;
      supervisor_.OnTick(Clock::now());
      AfterEvent();
    });
  }
}

void Runner::Finish() {
  if (finished_) return;
  finished_ = true;
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  reaper_.Stop();
  timer_.cancel();
  hang_timer_.cancel();
  streams_.CloseAll();
  int code = supervisor_.exit_code();
  if (supervisor_.stop_signal() != 0)
    plan_.events->SetRootCause(fmt::format("dlaunch was sent {}", SignalName(supervisor_.stop_signal())));
  if (!hang_cause_.empty() && supervisor_.stop_signal() == 0) {
    console_.Say(fmt::format("job stopped after a hang; exit code {}", code));
    for (const std::string& line : hang_cause_) console_.Say(line);
  } else if ((code != 0 && supervisor_.root_cause() != nullptr) || supervisor_.stop_signal() != 0) {
    PrintSummary();
  }
  for (const std::string& line : kill_stacks_) console_.Say(line);
  // The cancelled handlers above are queued already; `done` runs after them, so
  // it may destroy this runner.
  asio::post(io_, [done = std::move(done_), code] { done(code); });
}

void Runner::PrintSummary() {
  std::vector<WorkerReport> reports;
  std::optional<WorkerReport> cause;
  for (const WorkerRecord& w : supervisor_.workers()) {
    WorkerReport r;
    r.record = w;
    r.rank = slots_[static_cast<size_t>(w.local_rank)].rank;
    // The LOCAL_RANK the worker was told: with one dlaunch per worker (mpirun,
    // srun) that is its place on the machine, not 0.
    r.record.local_rank = envmap::ShapeOf(plan_.layout, slots_[static_cast<size_t>(w.local_rank)]).local_rank;
    reports.push_back(r);
  }
  if (const WorkerRecord* root = supervisor_.root_cause()) {
    WorkerReport r = reports[static_cast<size_t>(root->local_rank)];
    std::ifstream f(ErrorFile(plan_.private_dir, root->restart, root->local_rank));
    std::stringstream text;
    text << f.rdbuf();
    if (f) r.error_message = ErrorFileMessage(text.str());
    r.stderr_tail = tails_[static_cast<size_t>(root->local_rank)].LastLines(5);
    cause = r;
  }
  for (const std::string& line : FailureSummary(supervisor_.exit_code(), cause ? &*cause : nullptr, reports,
                                                supervisor_.stop_signal()))
    console_.Say(line);
}

void Runner::Run(std::function<void(int)> done) {
  done_ = std::move(done);
  reaper_.Start();
  for (int sig : plan_.stop_signals) signals_.add(sig);
  for (int sig : {SIGUSR1, SIGUSR2, SIGCONT}) signals_.add(sig);
  WaitSignals();
  if (channel_ != nullptr) {
    channel_->Attach([this](int code, const std::string& reason) {
      if (!supervisor_.done() && !reason.empty()) console_.Say(reason);
      if (!reason.empty()) plan_.events->SetRootCause(reason);
      supervisor_.Abort(code, Clock::now());
      AfterEvent();
    });
  }

  if (plan_.python_hook) {
    if (Status s = WritePythonHook(plan_.private_dir + "/py", plan_.private_dir + "/stacks"); !s.ok())
      console_.Say(fmt::format("{}; Python stacks will come from gdb", s.message()));
  }
  if (Status s = supervisor_.Start(Clock::now()); !s.ok())
    console_.Say(s.message());
  last_output_ = Clock::now();
  // One node's silence says nothing when another node's ranks print: in a
  // rendezvous job (a channel) the coordinator judges silence over every node,
  // from the last_output() each agent reports in its heartbeats.
  if (channel_ == nullptr) ArmHangWatch();
  AfterEvent();
}

void Runner::ArmHangWatch() {
  if (plan_.hang_timeout.count() <= 0 || supervisor_.done()) return;
  // Once a silence is reported, the next report needs new output first: wake
  // a timeout after now to look again, which costs nothing while it lasts.
  Clock::time_point at = reported_ && *reported_ == last_output_ ? Clock::now() + plan_.hang_timeout
                                                                 : last_output() + plan_.hang_timeout;
  hang_timer_.expires_at(at);
  hang_timer_.async_wait([this, alive = life_.token()](boost::system::error_code ec) {
    if (ec || alive.expired() || supervisor_.state() != Supervisor::State::kRunning) return;
    Clock::duration silent = Clock::now() - last_output();
    if (silent >= plan_.hang_timeout && !(reported_ && *reported_ == last_output_)) return OnHang(silent);
    ArmHangWatch();
  });
}

void Runner::OnHang(Clock::duration silent) {
  reported_ = last_output_;
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(silent);
  console_.Say(fmt::format("no rank has made progress for {}s: collecting stacks", secs.count()));
  Stacks([this, secs, alive = life_.token()](std::vector<RankStack> stacks) {
    if (!alive.expired()) ReportHang(secs, std::move(stacks));
  });
}

void Runner::Stacks(std::function<void(std::vector<RankStack>)> done) {
  stack_waiters_.push_back(std::move(done));
  if (stack_waiters_.size() > 1) return;  // joins the collection that runs
  std::vector<StackCollector::Target> targets;
  for (const WorkerRecord& w : supervisor_.workers())
    if (w.running) targets.push_back({slots_[static_cast<size_t>(w.local_rank)].rank, w.pid});
  if (!stacks_) stacks_ = std::make_unique<StackCollector>(io_, plan_.private_dir + "/stacks", kStackLimit);
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

namespace {

// What /proc says of one process: `state` is '\0' when it has gone.
struct ProcUsage {
  char state = '\0';
  uint64_t cpu_ticks = 0;  // user + system, every thread of the process
  int64_t rss_kib = 0;
};

std::string ReadSmallFile(const std::string& path) {
  char buf[4096];
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Reads /proc/PID/stat and /proc/PID/statm: two small reads of files the kernel
// writes from memory, so it never waits on a disk or another process.
ProcUsage ReadUsage(int pid) {
  ProcUsage u;
  std::string stat = ReadSmallFile(fmt::format("/proc/{}/stat", pid));
  // The command name may hold spaces and ')': the fields start after the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return u;
  std::istringstream in(stat.substr(close + 1));
  std::string field;
  std::vector<std::string> f;  // f[0] is field 3 (state)
  while (f.size() < 13 && in >> field) f.push_back(field);
  if (f.size() < 13) return u;
  u.state = f[0][0];
  u.cpu_ticks = std::strtoull(f[11].c_str(), nullptr, 10) + std::strtoull(f[12].c_str(), nullptr, 10);
  std::istringstream statm(ReadSmallFile(fmt::format("/proc/{}/statm", pid)));
  int64_t size = 0, resident = 0;
  if (statm >> size >> resident) u.rss_kib = resident * (sysconf(_SC_PAGESIZE) / 1024);
  return u;
}

std::string StateWord(char state) {
  switch (state) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "disk-wait";
    case 'T': return "stopped";
    case 't': return "traced";
    case 'Z': return "zombie";
    case 'I': return "idle";
    default: return "unknown";
  }
}

double Seconds(Clock::duration d) { return std::round(std::chrono::duration<double>(d).count() * 10) / 10; }

}  // namespace

boost::json::array Runner::Rows() {
  Clock::time_point now = Clock::now();
  boost::json::array rows;
  for (size_t i = 0; i < slots_.size(); ++i) rows.push_back(Row(i, now));
  return rows;
}

boost::json::object Runner::Row(size_t i, Clock::time_point now) {
  const envmap::WorkerSlot& slot = slots_[i];
  const WorkerRecord* w = nullptr;
  for (const WorkerRecord& r : supervisor_.workers())
    if (static_cast<size_t>(r.local_rank) == i) w = &r;
  boost::json::object row{
      {"rank", slot.rank},
      {"local_rank", envmap::ShapeOf(plan_.layout, slot).local_rank},
      {"node_rank", plan_.layout.node_rank},
      {"host", plan_.layout.nodes[static_cast<size_t>(plan_.layout.node_rank)].host},
      {"pid", 0},
      {"state", "not started"},
      {"run_time_s", 0.0},
      {"cpu_pct", 0.0},
      {"rss_kib", 0},
      {"restarts", plan_.layout.restart_count + (w != nullptr ? w->restart : 0)},
  };
  // The worker's last line on either stream, and the silence since its last bytes
  // (or since it started, before any).
  const LastLine* last = nullptr;
  for (const LastLine& l : lasts_[i])
    if (l.at() && (last == nullptr || *l.at() > *last->at())) last = &l;
  row["last_line"] = last != nullptr ? SafeUtf8(last->line(), false) : "";
  if (w == nullptr) {
    row["silent_s"] = 0.0;
    return row;
  }
  Clock::time_point since = last != nullptr ? std::max(*last->at(), w->started) : w->started;
  Clock::time_point end = w->running ? now : w->ended;
  if (w->running && (streams_.held(0, &lasts_[i][0]) || streams_.held(0, &lasts_[i][1]))) since = now;  // last_output()
  row["run_time_s"] = Seconds(end - w->started);
  row["silent_s"] = Seconds((w->running ? now : w->ended) - std::min(since, end));
  if (!w->running) {
    row["state"] = w->started == Clock::time_point{} ? "not started"
                   : w->status.signal != 0         ? "killed (" + SignalName(w->status.signal) + ")"
                                                   : fmt::format("exited ({})", w->status.code);
    return row;
  }
  // The worker process itself, not its children (data-loader workers, a
  // shell's child): summing a group means scanning the whole process table
  // (every /proc/PID/stat on the machine; adopted.hpp's scans cost seconds of
  // CPU an hour), and a status refresh every second must stay cheap.
  ProcUsage u = ReadUsage(w->pid);
  row["pid"] = w->pid;
  row["state"] = u.state == '\0' ? "exiting" : StateWord(u.state);
  row["rss_kib"] = u.rss_kib;
  CpuSample& c = cpu_[i];
  static const double kTicks = static_cast<double>(sysconf(_SC_CLK_TCK));
  // Since the last reading of this same process, else over its whole life.
  bool again = c.pid == w->pid && now - c.at >= std::chrono::milliseconds(200);
  double ticks = static_cast<double>(u.cpu_ticks - (again ? std::min(c.ticks, u.cpu_ticks) : 0));
  double wall = std::chrono::duration<double>(now - (again ? c.at : w->started)).count();
  row["cpu_pct"] = wall > 0 ? std::round(ticks / kTicks / wall * 1000) / 10 : 0.0;
  if (c.pid != w->pid || again) c = CpuSample{w->pid, u.cpu_ticks, now};
  return row;
}

void Runner::ReportHang(std::chrono::seconds silent, std::vector<RankStack> stacks) {
  std::vector<std::string> lines = HangSummary(stacks);
  boost::json::array suspects;
  for (int r : OddRanks(stacks)) suspects.emplace_back(r);
  plan_.events->Emit("hang_suspected", {{"silent_for_s", silent.count()}, {"suspects", std::move(suspects)}});
  lines.push_back("hang: " + WriteStacks(stacks));
  for (const std::string& line : lines) console_.Say(line);
  if (plan_.hang_stop && !supervisor_.done()) {
    std::string cause = fmt::format("no rank made progress for {}s (--hang-action stop)", silent.count());
    plan_.events->SetRootCause("hang: " + cause);
    hang_cause_.push_back("root cause: " + cause);
    for (const std::string& line : lines) hang_cause_.push_back("  | " + line);
    supervisor_.Abort(kExitHang, Clock::now());
    AfterEvent();
    return;
  }
  ArmHangWatch();
}

std::string Runner::WriteStacks(const std::vector<RankStack>& stacks) {
  // A new file: one that is there (an earlier run's, in a --log-dir) stays.
  Result<std::string> path = WriteNumberedFile(plan_.work_dir, "stacks", ".txt", FullStacks(stacks));
  if (!path.ok()) return path.status().message();
  plan_.events->Emit("stacks", {{"file", *path}});
  return fmt::format("full stacks in {}", *path);
}

// The supervisor waits for OnSampled (or its own bound), so the SIGKILL comes
// right after the dumps: Python's in milliseconds, gdb's in about a second.
void Runner::SampleBeforeKill(const std::vector<int>& pids) {
  std::vector<int> ranks;
  for (const WorkerRecord& w : supervisor_.workers())
    if (w.running && std::find(pids.begin(), pids.end(), w.pid) != pids.end())
      ranks.push_back(slots_[static_cast<size_t>(w.local_rank)].rank);
  console_.Say(fmt::format("{} {} still running {}s after SIGTERM: taking stacks before SIGKILL",
                           ranks.size() == 1 ? "rank" : "ranks", RankRanges(ranks),
                           std::chrono::duration_cast<std::chrono::seconds>(plan_.supervisor.shutdown_timeout).count()));
  // Every running worker is one of `pids` here (the supervisor asks for all of
  // them); a collection already under way (a hang's) is joined.
  Stacks([this, alive = life_.token()](std::vector<RankStack> stacks) {
    if (alive.expired()) return;
    kill_stacks_ = HangSummary(stacks, 3, "at SIGKILL");
    kill_stacks_.push_back("at SIGKILL: " + WriteStacks(stacks));
    supervisor_.OnSampled(Clock::now());
    AfterEvent();
  });
}

}  // namespace

void PrintNotices(const RunPlan& plan, Console& console) {
  int n = plan.supervisor.nproc;
  if (n > 1 && !plan.inherited.contains("OMP_NUM_THREADS"))
    console.Say(fmt::format("setting OMP_NUM_THREADS=1 for each of {} workers (export it to choose)", n));
}

std::unique_ptr<WorkerRun> StartJob(const RunPlan& plan, Watchdog& watchdog, asio::io_context& io,
                                    Console& console, JobChannel* channel, std::function<void(int)> done) {
  if (!plan.flavors.azure_hostfile.empty()) {
    if (Status s = WriteFile(plan.flavors.azure_hostfile, envmap::AzureHostfile(plan.layout)); !s.ok()) {
      console.Say(s.message());
      asio::post(io, [done = std::move(done)] { done(1); });
      return nullptr;
    }
  }
  auto runner = std::make_unique<Runner>(plan, watchdog, io, console, channel);
  runner->Run(std::move(done));
  return runner;
}

}  // namespace dlaunch::launcher
