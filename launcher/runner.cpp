#include "launcher/runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <list>
#include <memory>
#include <sstream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "launcher/adopted.hpp"
#include "launcher/cli.hpp"
#include "launcher/output.hpp"
#include "launcher/summary.hpp"

namespace dlaunch::launcher {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

// Default: how long output may keep draining after the last worker exited.
constexpr std::chrono::seconds kDrainTimeout{2};

class Runner : public WorkerControl {
 public:
  Runner(const RunPlan& plan, Watchdog& watchdog, asio::io_context& io, JobChannel* channel)
      : plan_(plan),
        watchdog_(watchdog),
        io_(io),
        channel_(channel),
        signals_(io_),
        timer_(io_),
        drain_timer_(io_),
        supervisor_(*this, plan.supervisor),
        slots_(envmap::LocalSlots(plan.layout)),
        tails_(slots_.size()) {}

  int Run();

  Result<int> Start(int local_rank, int restart) override;
  void Signal(int pid, int sig) override {
    if (kill(-pid, sig) != 0 && errno == ESRCH) kill(pid, sig);
  }
  void Release(int pid) override {
    kill(-pid, SIGKILL);  // whatever the worker left behind in its group
    watchdog_.Remove(pid);
  }

 private:
  struct Stream {
    Stream(asio::io_context& io, int fd) : sd(io, fd) {}
    asio::posix::stream_descriptor sd;
    LineTagger tagger;
    std::string prefix;
    std::string format;  // non-empty when the prefix holds {time} and is re-rendered
    TagFields fields;
    int console_fd = -1;
    int file_fd = -1;
    TailBuffer* tail = nullptr;
    bool open = true;
    std::array<char, 1 << 18> buf;
  };

  Status AddStream(int fd, int local_rank, bool is_err, const std::string& dir);
  void Read(Stream* s);
  void CloseStream(Stream* s);
  void WaitSignals();
  void Reap();
  void AfterEvent();
  void Finish();
  void PrintSummary();

  const RunPlan& plan_;
  Watchdog& watchdog_;
  asio::io_context& io_;
  JobChannel* channel_;
  asio::signal_set signals_;
  asio::steady_timer timer_;
  asio::steady_timer drain_timer_;
  Supervisor supervisor_;
  std::vector<envmap::WorkerSlot> slots_;
  std::vector<TailBuffer> tails_;
  std::list<std::unique_ptr<Stream>> streams_;
  std::string out_;  // scratch for tagged output
  bool draining_ = false;
  bool failure_reported_ = false;
  bool local_done_ = false;     // LocalDone was sent; waiting for the barrier
  std::optional<int> final_code_;  // set when the run is over
};

std::string AttemptDir(const std::string& work_dir, int restart, int local_rank) {
  return fmt::format("{}/attempt_{}/{}", work_dir, restart, local_rank);
}

Result<int> Runner::Start(int local_rank, int restart) {
  const envmap::WorkerSlot& slot = slots_[static_cast<size_t>(local_rank)];
  std::string dir = AttemptDir(plan_.work_dir, restart, local_rank);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot create ({})", dir, ec.message()));

  envmap::JobLayout layout = plan_.layout;
  layout.restart_count = plan_.layout.restart_count + restart;  // the generation's, plus local restarts
  envmap::Flavors flavors = plan_.flavors;
  flavors.error_file = dir + "/error.json";
  fs::remove(flavors.error_file, ec);

  envmap::EnvMap env = plan_.inherited;
  for (auto& [k, v] : envmap::WorkerEnv(layout, slot, flavors, plan_.inherited)) env[k] = v;
  if (plan_.pin_gpu && !plan_.gpus.empty())
    env["CUDA_VISIBLE_DEVICES"] =
        plan_.gpus[static_cast<size_t>(envmap::ShapeOf(layout, slot).local_rank) % plan_.gpus.size()];

  SpawnSpec spec;
  spec.exe = plan_.exe;
  spec.args.assign(plan_.argv.begin() + 1, plan_.argv.end());
  for (std::string& a : envmap::LocalRankArgs(layout, slot, flavors.local_rank_arg)) spec.args.push_back(std::move(a));
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
  Status s = AddStream(out->read_fd, local_rank, false, dir);
  if (s.ok()) s = AddStream(err->read_fd, local_rank, true, dir);
  if (!s.ok()) {
    // The supervisor never learns this pid, so it must not outlive the failure.
    Signal(*pid, SIGKILL);
    watchdog_.Remove(*pid);
    return s;
  }
  return pid;
}

Status Runner::AddStream(int fd, int local_rank, bool is_err, const std::string& dir) {
  auto s = std::make_unique<Stream>(io_, fd);
  const envmap::WorkerSlot& slot = slots_[static_cast<size_t>(local_rank)];
  s->fields = TagFields{slot.rank, local_rank, plan_.layout.node_rank, slot.role, is_err ? "stderr" : "stdout"};
  if (plan_.tag_format) {
    Result<std::string> prefix = RenderTag(*plan_.tag_format, s->fields, std::time(nullptr));
    if (!prefix.ok()) return prefix.status();
    s->prefix = *prefix;
    if (plan_.tag_format->find("{time}") != std::string::npos) s->format = *plan_.tag_format;
  }
  int bit = is_err ? 2 : 1;
  bool redirected = (StdFor(plan_.redirects, local_rank) & bit) != 0;
  bool shown = plan_.console_ranks.empty() ||
               std::find(plan_.console_ranks.begin(), plan_.console_ranks.end(), local_rank) != plan_.console_ranks.end();
  if (!redirected && shown) s->console_fd = is_err ? STDERR_FILENO : STDOUT_FILENO;
  if (plan_.write_logs) {
    std::string path = fmt::format("{}/{}.log", dir, is_err ? "stderr" : "stdout");
    s->file_fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s->file_fd < 0) return Status::Io(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  }
  if (is_err) s->tail = &tails_[static_cast<size_t>(local_rank)];
  Stream* raw = s.get();
  streams_.push_back(std::move(s));
  Read(raw);
  return Status::Ok();
}

void Runner::Read(Stream* s) {
  s->sd.async_read_some(asio::buffer(s->buf), [this, s](boost::system::error_code ec, size_t n) {
    if (!s->open) return;
    std::string_view data(s->buf.data(), n);
    if (!s->format.empty()) s->prefix = RenderTag(s->format, s->fields, std::time(nullptr)).value();
    if (n > 0) {
      if (s->console_fd >= 0) {
        out_.clear();
        s->tagger.Feed(data, s->prefix, out_);
        WriteAll(s->console_fd, out_);
      }
      if (s->file_fd >= 0) WriteAll(s->file_fd, data);
      if (s->tail != nullptr) s->tail->Append(data);
    }
    if (ec) {
      CloseStream(s);
      AfterEvent();
      return;
    }
    Read(s);
  });
}

void Runner::CloseStream(Stream* s) {
  if (!s->open) return;
  s->open = false;
  if (s->console_fd >= 0) {
    out_.clear();
    s->tagger.Finish(s->prefix, out_);
    WriteAll(s->console_fd, out_);
  }
  if (s->file_fd >= 0) close(s->file_fd);
  boost::system::error_code ignored;
  s->sd.close(ignored);
}

void Runner::WaitSignals() {
  signals_.async_wait([this](boost::system::error_code ec, int sig) {
    if (ec) return;
    if (sig == SIGCHLD) {
      Reap();
    } else if (std::find(plan_.stop_signals.begin(), plan_.stop_signals.end(), sig) != plan_.stop_signals.end()) {
      supervisor_.OnStopSignal(sig, Clock::now());
    } else {
      supervisor_.Forward(sig);
    }
    AfterEvent();
    WaitSignals();
  });
}

void Runner::Reap() {
  // The launcher is a subreaper (and may be PID 1): besides workers, orphaned
  // grandchildren are reparented here and must be reaped too.
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
    supervisor_.OnExit(pid, FromWaitStatus(status), Clock::now());
}

void Runner::AfterEvent() {
  if (channel_ != nullptr && !failure_reported_) {
    if (const WorkerRecord* root = supervisor_.root_cause()) {
      failure_reported_ = true;
      int rank = slots_[static_cast<size_t>(root->local_rank)].rank;
      channel_->LocalFailure(rank, root->status.ShellCode(), Describe(root->status));
    }
  }
  if (supervisor_.done()) {
    bool open = false;
    for (auto& s : streams_) open = open || s->open;
    if (!open) {
      Finish();
    } else if (!draining_) {
      draining_ = true;
      drain_timer_.expires_after(kDrainTimeout);
      drain_timer_.async_wait([this](boost::system::error_code ec) {
        if (ec) return;
        for (auto& s : streams_) CloseStream(s.get());
        Finish();
      });
    }
    return;
  }
  if (std::optional<Clock::time_point> deadline = supervisor_.deadline()) {
    timer_.expires_at(*deadline);
    timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      supervisor_.OnTick(Clock::now());
      AfterEvent();
    });
  }
}

void Runner::Finish() {
  if (final_code_ || local_done_) return;
  if (channel_ == nullptr) {
    final_code_ = supervisor_.exit_code();
    return;
  }
  // The exit barrier: this node is done, the job may not be.
  local_done_ = true;
  channel_->LocalDone(supervisor_.exit_code(), [this](int code) { final_code_ = code; });
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
    std::ifstream f(AttemptDir(plan_.work_dir, root->restart, root->local_rank) + "/error.json");
    std::stringstream text;
    text << f.rdbuf();
    if (f) r.error_message = ErrorFileMessage(text.str());
    r.stderr_tail = tails_[static_cast<size_t>(root->local_rank)].LastLines(5);
    cause = r;
  }
  std::string out;
  for (const std::string& line : FailureSummary(supervisor_.exit_code(), cause ? &*cause : nullptr, reports,
                                                supervisor_.stop_signal()))
    out += "dlaunch: " + line + "\n";
  WriteAll(STDERR_FILENO, out);
}

int Runner::Run() {
  signals_.add(SIGCHLD);
  for (int sig : plan_.stop_signals) signals_.add(sig);
  for (int sig : {SIGUSR1, SIGUSR2, SIGCONT}) signals_.add(sig);
  WaitSignals();
  if (channel_ != nullptr) {
    channel_->Attach([this](int code, const std::string& reason) {
      if (!supervisor_.done() && !reason.empty()) WriteAll(STDERR_FILENO, "dlaunch: " + reason + "\n");
      supervisor_.Abort(code, Clock::now());
      AfterEvent();
    });
  }

  if (Status s = supervisor_.Start(Clock::now()); !s.ok())
    WriteAll(STDERR_FILENO, "dlaunch: " + s.message() + "\n");
  AfterEvent();
  // Run until this node's result is known; other work on `io_` (a rendezvous
  // agent, a coordinator) runs alongside.
  io_.restart();
  while (!final_code_ && io_.run_one() > 0) {
  }
  // Let the cancelled handlers run while this runner (which they point into) lives.
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  timer_.cancel();
  drain_timer_.cancel();
  for (auto& s : streams_) CloseStream(s.get());
  io_.restart();
  io_.poll();

  int code = supervisor_.exit_code();
  if (code != 0 && supervisor_.root_cause() != nullptr) PrintSummary();
  else if (supervisor_.stop_signal() != 0) PrintSummary();
  return final_code_.value_or(code);
}

}  // namespace

void PrintNotices(const RunPlan& plan) {
  int n = plan.supervisor.nproc;
  if (n > 1 && !plan.inherited.contains("OMP_NUM_THREADS"))
    WriteAll(STDERR_FILENO,
             fmt::format("dlaunch: setting OMP_NUM_THREADS=1 for each of {} workers (export it to choose)\n", n));
}

int RunJob(const RunPlan& plan, Watchdog& watchdog, asio::io_context& io, JobChannel* channel) {
  if (!plan.flavors.azure_hostfile.empty()) {
    std::ofstream f(plan.flavors.azure_hostfile);
    f << envmap::AzureHostfile(plan.layout);
    if (!f) {
      WriteAll(STDERR_FILENO, fmt::format("dlaunch: {}: cannot write\n", plan.flavors.azure_hostfile));
      return 1;
    }
  }
  Runner runner(plan, watchdog, io, channel);
  // reaper hook (finding 7): daemons adopted from the workers are known to the
  // watchdog while the job runs and killed when it ends (launcher/adopted.hpp).
  Adopted adopted(watchdog);
  adopted.Start(io);
  int code = runner.Run();
  adopted.KillAll();
  return code;
}

}  // namespace dlaunch::launcher
