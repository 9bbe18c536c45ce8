// Fakes of a run's effects (launcher/process/run_env.hpp) for the unit tests of
// the worker group and the runner, as ninja's FakeCommandRunner: processes that
// are pipes and a pid, a clock that moves only when the test says, signals the
// test raises, and stacks it hands over. Nothing here sleeps or forks.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "launcher/process/run_env.hpp"
#include "tests/launcher/core/fakes.hpp"

namespace dlaunch::testing {

using launcher::ExitStatus;
using launcher::PipedChild;
using launcher::SpawnSpec;
using launcher::SteadyTime;

// Runs what is ready on `io`: reads of the fakes' pipes, console writes,
// posted completions. Nothing waits.
inline void RunReadyHandlers(boost::asio::io_context& io) {
  for (int i = 0; i < 20; ++i) {
    io.restart();
    io.poll();
  }
}

// Processes that are pipes and a pid: the test writes their output and says
// when they exit. Records every spawn, signal and release, in order.
class FakeProcesses : public launcher::ProcessControl {
 public:
  ~FakeProcesses() override {
    for (auto& [pid, p] : procs_) CloseEnds(p);
  }

  Result<PipedChild> Spawn(const SpawnSpec& spec) override {
    spawns.push_back(spec);
    if (refuse) return Status::NotFound("train.py: command not found");
    Result<launcher::Pipe> out = launcher::MakePipe();
    Result<launcher::Pipe> err = launcher::MakePipe();
    REQUIRE((out.ok() && err.ok()));
    int pid = next_pid++;
    procs_[pid] = Ends{out->write_fd, err->write_fd};
    log.push_back("spawn " + std::to_string(pid));
    return PipedChild{pid, -1, out->read_fd, err->read_fd};
  }
  void Signal(int pid, int sig) override {
    signals.push_back({pid, sig});
    log.push_back("signal " + std::to_string(pid) + " " + std::to_string(sig));
  }
  void Release(int pid) override {
    released.push_back(pid);
    log.push_back("release " + std::to_string(pid));
  }
  void StartReaping(std::function<void(int, ExitStatus)> on_exit, std::function<void()> after) override {
    on_exit_ = std::move(on_exit);
    after_ = std::move(after);
  }
  void StopReaping() override { on_exit_ = nullptr; }

  // `pid` writes `text` on stdout, or on stderr.
  void Write(int pid, const std::string& text, bool to_err = false) {
    Ends& p = procs_.at(pid);
    REQUIRE(write(to_err ? p.err : p.out, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  }
  // `pid` exits: its pipes close, and the group hears of it as from the reaper.
  void Exit(int pid, ExitStatus status) {
    CloseEnds(procs_.at(pid));
    REQUIRE(on_exit_);
    on_exit_(pid, status);
    after_();
  }
  // Every process that got `sig` and has not exited dies of it, as a process
  // that keeps the default action does.
  void DieOf(int sig) {
    std::vector<int> pids;
    for (auto [pid, s] : signals)
      if (s == sig && Alive(pid) && std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
    for (int pid : pids) Exit(pid, {0, sig});
  }
  bool Alive(int pid) const {
    auto it = procs_.find(pid);
    return it != procs_.end() && it->second.out >= 0;
  }
  int SignalsTo(int pid, int sig) const {
    return static_cast<int>(std::count(signals.begin(), signals.end(), std::pair{pid, sig}));
  }
  int reaping() const { return on_exit_ ? 1 : 0; }

  int next_pid = 100;
  bool refuse = false;
  std::vector<SpawnSpec> spawns;
  std::vector<std::pair<int, int>> signals;
  std::vector<int> released;
  std::vector<std::string> log;  // "spawn P", "signal P SIG", "release P", in order

 private:
  struct Ends {
    int out = -1;
    int err = -1;
  };
  static void CloseEnds(Ends& p) {
    for (int* fd : {&p.out, &p.err})
      if (*fd >= 0) close(std::exchange(*fd, -1));
  }
  std::map<int, Ends> procs_;
  std::function<void(int, ExitStatus)> on_exit_;
  std::function<void()> after_;
};

// Stacks the test hands over: a collection waits until Deliver.
class FakeStacks {
 public:
  struct Request {
    std::vector<launcher::StackTaker::Target> targets;
    std::function<void(std::vector<launcher::RankStack>)> done;
  };
  std::unique_ptr<launcher::StackTaker> New() { return std::make_unique<Taker>(*this); }
  // Answers the oldest collection: each target's main thread is in `function`
  // at train.py:`line`.
  void Deliver(const std::string& function, int line = 1) {
    REQUIRE(!requests.empty());
    Request r = std::move(requests.front());
    requests.erase(requests.begin());
    std::vector<launcher::RankStack> stacks;
    for (const auto& t : r.targets) {
      launcher::RankStack s;
      s.rank = t.rank;
      s.pid = t.pid;
      s.how = "python";
      launcher::ThreadStack main{"Thread 0x1", true, {launcher::Frame{function, "train.py", line}}};
      s.threads.push_back(std::move(main));
      stacks.push_back(std::move(s));
    }
    r.done(std::move(stacks));
  }
  std::vector<Request> requests;

 private:
  struct Taker : launcher::StackTaker {
    explicit Taker(FakeStacks& owner) : owner_(owner) {}
    bool Collect(std::vector<Target> targets, std::function<void(std::vector<launcher::RankStack>)> done) override {
      owner_.requests.push_back({std::move(targets), std::move(done)});
      return true;
    }
    FakeStacks& owner_;
  };
};

// The whole RunEnv, every effect faked; each run's processes are `processes`.
class FakeRunEnv : public launcher::RunEnv {
 public:
  explicit FakeRunEnv(boost::asio::io_context& io) : clock([&io] { RunReadyHandlers(io); }) {}
  launcher::Timers& timers() override { return clock; }
  launcher::SignalSource& signals() override { return signal_source; }
  std::unique_ptr<launcher::ProcessControl> NewProcesses() override { return std::make_unique<Forward>(processes); }
  std::unique_ptr<launcher::StackTaker> NewStackTaker(const std::string&, std::chrono::milliseconds) override {
    return stacks.New();
  }
  std::string job_mark() const override { return "fake-mark"; }

  FakeTimers clock;
  FakeSignals signal_source;
  FakeProcesses processes;
  FakeStacks stacks;

 private:
  // One run's view of the shared fake.
  struct Forward : launcher::ProcessControl {
    explicit Forward(FakeProcesses& to) : to_(to) {}
    Result<PipedChild> Spawn(const SpawnSpec& spec) override { return to_.Spawn(spec); }
    void Signal(int pid, int sig) override { to_.Signal(pid, sig); }
    void Release(int pid) override { to_.Release(pid); }
    void StartReaping(std::function<void(int, ExitStatus)> on_exit, std::function<void()> after) override {
      to_.StartReaping(std::move(on_exit), std::move(after));
    }
    void StopReaping() override { to_.StopReaping(); }
    FakeProcesses& to_;
  };
};

// The console, on pipes the test reads back.
struct ConsolePipes {
  ConsolePipes() {
    REQUIRE(pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(pipe2(err, O_CLOEXEC) == 0);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
  }
  ~ConsolePipes() {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
  }
  static std::string Take(int fd) {
    std::string got;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    return got;
  }
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
};

}  // namespace dlaunch::testing
