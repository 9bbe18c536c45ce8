// The runner (StartJob) driven whole through a fake RunEnv: fake processes, a
// fake clock, fake signals and stacks, a real console on pipes. Every timing
// rule here is the production rule on the fake clock: a test advances time to
// just before a deadline and to the deadline, and nothing sleeps.
#include "launcher/process/runner.hpp"

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "launcher/process/progress_files.hpp"
#include "tests/launcher/process/fakes.hpp"
#include "tests/temp_dir.hpp"

using namespace dlaunch;
using namespace dlaunch::launcher;
using namespace std::chrono_literals;
using dlaunch::testing::ConsolePipes;
using dlaunch::testing::FakeRunEnv;
using dlaunch::testing::ReadFile;
using dlaunch::testing::RunReadyHandlers;
using dlaunch::testing::TempDir;

namespace {

// A failure elsewhere in the job, as the rendezvous agent brings it: the test
// calls abort(); what this node reports is recorded.
class FakeChannel : public JobChannel {
 public:
  void Attach(std::function<void(int, const std::string&)> abort) override { abort_from_elsewhere = std::move(abort); }
  void LocalFailure(int rank, int code, const std::string& reason) override {
    failures.push_back({rank, code, reason});
  }
  struct Failure {
    int rank;
    int code;
    std::string reason;
  };
  std::function<void(int, const std::string&)> abort_from_elsewhere;
  std::vector<Failure> failures;
};

// One node of `nproc` workers as node `node_rank` of `nnodes`, every effect
// faked: what each runner test needs.
struct RunBench {
  explicit RunBench(int nproc, int nnodes = 1, int node_rank = 0) {
    for (int n = 0; n < nnodes; ++n)
      plan.layout.nodes.push_back(
          envmap::Node{"host-" + std::to_string(n), "10.0.0." + std::to_string(n + 1), nproc, {}});
    plan.layout.node_rank = node_rank;
    plan.layout.master_addr = "10.0.0.1";
    plan.layout.master_port = 29500;
    plan.layout.run_id = "job";
    plan.exe = "/usr/bin/python3";
    plan.argv = {"python3", "train.py"};
    plan.work_dir = dir.path;
    plan.private_dir = dir.path;
    plan.supervisor = {nproc, 0, 30s};
    plan.stop_signals = {SIGINT, SIGTERM};
    plan.tag_format = "[{rank}]: ";
    REQUIRE(events.Open(dir / "events.jsonl").ok());
    plan.events = &events;
  }
  ~RunBench() {
    // The run owns pipes and timers on `io`: it goes first.
    run.reset();
  }

  void Start(JobChannel* channel = nullptr) {
    run = StartJob(plan, env, io, console, channel, [this](int c) {
      REQUIRE_FALSE(code);  // once
      code = c;
      console_when_done = Err();
    });
    REQUIRE(run);
    RunReadyHandlers(io);
  }
  // pid of local rank `i` in the current generation.
  int Pid(int i) const { return env.processes.next_pid - plan.supervisor.nproc + i; }
  void Exit(int pid, ExitStatus status) {
    env.processes.Exit(pid, status);
    RunReadyHandlers(io);
  }
  // Every running process that got `sig` dies of it (FakeProcesses::DieOf).
  void DieOf(int sig) {
    env.processes.DieOf(sig);
    RunReadyHandlers(io);
  }
  void Advance(std::chrono::steady_clock::duration d) { env.clock.Advance(d); }
  // dlaunch's own lines so far (stderr of the console), accumulated.
  std::string Err() {
    err_seen += ConsolePipes::Take(pipes.err[0]);
    return err_seen;
  }
  std::string Out() {
    out_seen += ConsolePipes::Take(pipes.out[0]);
    return out_seen;
  }
  int Signals(int sig) const {
    return static_cast<int>(std::count_if(env.processes.signals.begin(), env.processes.signals.end(),
                                          [sig](const auto& p) { return p.second == sig; }));
  }

  TempDir dir{"runner"};
  EventLog events;
  RunPlan plan;
  boost::asio::io_context io;
  ConsolePipes pipes;
  Console console{io, pipes.out[1], pipes.err[1]};
  FakeRunEnv env{io};
  std::unique_ptr<WorkerRun> run;
  std::optional<int> code;
  std::string console_when_done;
  std::string err_seen;
  std::string out_seen;
};

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("runner: a single-node run starts every rank and ends 0 once all have exited", "[runner]") {
  RunBench b(2);
  b.Start();
  REQUIRE(b.env.processes.spawns.size() == 2);
  CHECK(b.env.signal_source.watches() == 1);
  b.env.processes.Write(100, "epoch 1\n");
  b.Exit(100, {0, 0});
  CHECK_FALSE(b.code);  // rank 1 still runs
  b.env.processes.Write(101, "epoch 1 from 1\n");
  b.Exit(101, {0, 0});
  REQUIRE(b.code);
  CHECK(*b.code == 0);
  CHECK(b.env.processes.signals.empty());  // nobody was stopped
  CHECK(b.env.processes.released == std::vector<int>{100, 101});
  CHECK(Has(b.Out(), "[0]: epoch 1\n"));
  CHECK(Has(b.Out(), "[1]: epoch 1 from 1\n"));
  CHECK_FALSE(Has(b.Err(), "root cause"));
}

TEST_CASE("runner: one rank's failure stops the others and is the job's exit code and root cause", "[runner]") {
  RunBench b(3);
  b.Start();
  b.env.processes.Write(101, "ValueError: bad batch\n", true);
  b.Exit(101, {3, 0});
  CHECK(b.env.processes.SignalsTo(100, SIGTERM) == 1);
  CHECK(b.env.processes.SignalsTo(102, SIGTERM) == 1);
  CHECK(b.env.processes.SignalsTo(101, SIGTERM) == 0);
  CHECK_FALSE(b.code);
  b.DieOf(SIGTERM);
  REQUIRE(b.code);
  CHECK(*b.code == 3);
  CHECK(Has(b.console_when_done, "rank 1"));
  CHECK(Has(b.console_when_done, "exited with code 3"));
  CHECK(Has(b.console_when_done, "ValueError: bad batch"));
  CHECK(b.events.root_cause() == "rank 1 exited with code 3");
}

TEST_CASE("runner: --shutdown-timeout: SIGTERM, then SIGKILL exactly the timeout later", "[runner]") {
  RunBench b(2);
  b.plan.supervisor.shutdown_timeout = 7s;
  b.Start();
  b.Exit(100, {1, 0});
  CHECK(b.env.processes.SignalsTo(101, SIGTERM) == 1);
  b.Advance(7s - 1ms);  // rank 1 ignores SIGTERM
  CHECK(b.Signals(SIGKILL) == 0);
  b.Advance(1ms);
  CHECK(b.env.processes.SignalsTo(101, SIGKILL) == 1);
  CHECK_FALSE(b.code);
  b.DieOf(SIGKILL);
  REQUIRE(b.code);
  CHECK(*b.code == 1);
  CHECK_FALSE(b.env.clock.NextDue());  // nothing left armed
}

TEST_CASE("runner: a stop signal goes to every rank; a second Ctrl-C kills at once", "[runner]") {
  RunBench b(2);
  b.Start();
  REQUIRE(b.env.signal_source.Raise(SIGINT) == 1);
  CHECK(b.env.processes.SignalsTo(100, SIGINT) == 1);
  CHECK(b.env.processes.SignalsTo(101, SIGINT) == 1);
  CHECK(b.Signals(SIGKILL) == 0);
  b.env.signal_source.Raise(SIGINT);
  CHECK(b.env.processes.SignalsTo(100, SIGKILL) == 1);
  CHECK(b.env.processes.SignalsTo(101, SIGKILL) == 1);
  b.DieOf(SIGKILL);
  REQUIRE(b.code);
  CHECK(*b.code == 128 + SIGINT);
  // Other signals are passed on and stop nothing.
  RunBench c(1);
  c.Start();
  c.env.signal_source.Raise(SIGUSR1);
  CHECK(c.env.processes.SignalsTo(100, SIGUSR1) == 1);
  c.Exit(100, {0, 0});
  REQUIRE(c.code);
  CHECK(*c.code == 0);
}

TEST_CASE("runner: a signal slurmstepd sent the whole step is not passed on again", "[runner][slurm]") {
  // A task of a job step: `scancel --signal=USR1` reached the workers already.
  RunBench b(2);
  b.plan.slurm.step_wide = true;
  b.Start();
  b.env.signal_source.sender = "slurmstepd";
  REQUIRE(b.env.signal_source.Raise(SIGUSR1) == 1);
  CHECK(b.env.processes.SignalsTo(100, SIGUSR1) == 0);
  CHECK(b.env.processes.SignalsTo(101, SIGUSR1) == 0);
  // `kill -USR1 <dlaunch>` from a shell, or a sender dlaunch cannot name: passed on, once.
  for (std::string sender : {"bash", ""}) {
    b.env.signal_source.sender = sender;
    b.env.signal_source.Raise(SIGUSR2);
  }
  CHECK(b.env.processes.SignalsTo(100, SIGUSR2) == 2);
  CHECK(b.env.processes.SignalsTo(101, SIGUSR2) == 2);
  // Outside a step-wide scope (the batch step, proctrack/pgid, no Slurm) even
  // slurmstepd's signal is passed on: it reached dlaunch alone.
  RunBench c(1);
  c.Start();
  c.env.signal_source.sender = "slurmstepd";
  c.env.signal_source.Raise(SIGUSR1);
  CHECK(c.env.processes.SignalsTo(100, SIGUSR1) == 1);
}

TEST_CASE("runner: --max-restarts restarts the whole node, then gives the last failure's code", "[runner]") {
  RunBench b(2);
  b.plan.supervisor.max_restarts = 2;
  std::vector<int> restarting;
  b.plan.restarting = [&restarting](int n) { restarting.push_back(n); };
  b.Start();
  for (int generation = 0; generation <= 2; ++generation) {
    REQUIRE(b.env.processes.spawns.size() == static_cast<size_t>(2 * (generation + 1)));
    const std::vector<std::string>& env = b.env.processes.spawns.back().env;
    CHECK(std::find(env.begin(), env.end(), "TORCHELASTIC_RESTART_COUNT=" + std::to_string(generation)) != env.end());
    CHECK_FALSE(b.code);
    b.Exit(b.Pid(0), {4 + generation, 0});
    b.DieOf(SIGTERM);
  }
  CHECK(restarting == std::vector<int>{1, 2});
  REQUIRE(b.code);
  CHECK(*b.code == 6);  // the last generation's failure
  CHECK(b.env.processes.spawns.size() == 6);
}

TEST_CASE("runner: --hang-timeout takes stacks after exactly the silence, and output resets it", "[runner]") {
  RunBench b(2);
  b.plan.hang_timeout = 10s;
  b.Start();
  b.Advance(4s);
  b.env.processes.Write(100, "step 1\n");  // progress at 4s: silent from here
  RunReadyHandlers(b.io);
  b.Advance(10s - 1ms);
  CHECK(b.env.stacks.requests.empty());
  b.Advance(1ms);
  REQUIRE(b.env.stacks.requests.size() == 1);
  CHECK(b.env.stacks.requests[0].targets.size() == 2);
  CHECK(Has(b.Err(), "no rank has made progress for 10s: collecting stacks"));
  b.env.stacks.Deliver("all_reduce", 42);
  RunReadyHandlers(b.io);
  CHECK(Has(b.Err(), "all_reduce"));
  // Report only: the job runs on, and the same silence is not reported twice.
  CHECK(b.env.processes.signals.empty());
  b.Advance(30s);
  CHECK(b.env.stacks.requests.empty());
  b.Exit(100, {0, 0});
  b.Exit(101, {0, 0});
  REQUIRE(b.code);
  CHECK(*b.code == 0);
}

TEST_CASE("runner: --hang-action stop ends a silent job with 124 and the hang as root cause", "[runner]") {
  RunBench b(2);
  b.plan.hang_timeout = 10s;
  b.plan.hang_stop = true;
  b.Start();
  b.Advance(10s);
  REQUIRE(b.env.stacks.requests.size() == 1);
  b.env.stacks.Deliver("barrier");
  RunReadyHandlers(b.io);
  CHECK(b.env.processes.SignalsTo(100, SIGTERM) == 1);
  CHECK(b.env.processes.SignalsTo(101, SIGTERM) == 1);
  b.DieOf(SIGTERM);
  REQUIRE(b.code);
  CHECK(*b.code == kExitHang);
  CHECK(Has(b.console_when_done, "root cause: no rank made progress for 10s (--hang-action stop)"));
}

TEST_CASE("runner: teardown order: SIGTERM, stacks, SIGKILL, release, summary, then done", "[runner]") {
  RunBench b(2);
  b.plan.supervisor.shutdown_timeout = 5s;
  b.plan.supervisor.sample_before_kill = 5s;
  b.Start();
  b.Exit(100, {2, 0});
  b.Advance(5s);  // rank 1 outlived SIGTERM: its stack first
  REQUIRE(b.env.stacks.requests.size() == 1);
  CHECK(b.Signals(SIGKILL) == 0);
  b.env.stacks.Deliver("recv");
  RunReadyHandlers(b.io);
  CHECK(b.env.processes.SignalsTo(101, SIGKILL) == 1);
  b.env.processes.Write(101, "last words\n");
  b.DieOf(SIGKILL);
  REQUIRE(b.code);
  CHECK(*b.code == 2);
  CHECK(b.env.processes.log == std::vector<std::string>{"spawn 100", "spawn 101", "release 100", "signal 101 15",
                                                        "signal 101 9", "release 101"});
  // The summary and the last worker's output are on the console before `done`.
  CHECK(Has(b.console_when_done, "at SIGKILL"));
  CHECK(Has(b.console_when_done, "root cause"));
  CHECK(Has(b.Out(), "[1]: last words\n"));
  CHECK(b.env.processes.reaping() == 0);
  CHECK_FALSE(b.env.clock.NextDue());
}

TEST_CASE("runner: a rendezvous agent's node reports its failure and obeys one from elsewhere", "[runner]") {
  SECTION("a local failure goes to the channel once, by global rank") {
    RunBench b(2, 2, 1);  // node 1: global ranks 2 and 3
    FakeChannel channel;
    b.plan.hang_timeout = 10s;  // judged by the coordinator across nodes, not here
    b.Start(&channel);
    b.Advance(20s);
    CHECK(b.env.stacks.requests.empty());
    b.Exit(101, {7, 0});
    REQUIRE(channel.failures.size() == 1);
    CHECK(channel.failures[0].rank == 3);
    CHECK(channel.failures[0].code == 7);
    CHECK(channel.failures[0].reason == "exited with code 7");
    b.DieOf(SIGTERM);
    CHECK(channel.failures.size() == 1);
    REQUIRE(b.code);
    CHECK(*b.code == 7);
  }
  SECTION("a failure elsewhere stops this node with that code and says why") {
    RunBench b(2, 2, 1);
    FakeChannel channel;
    b.Start(&channel);
    REQUIRE(channel.abort_from_elsewhere);
    channel.abort_from_elsewhere(5, "rank 0 on host-0 exited with code 5");
    CHECK(b.env.processes.SignalsTo(100, SIGTERM) == 1);
    CHECK(b.env.processes.SignalsTo(101, SIGTERM) == 1);
    b.DieOf(SIGTERM);
    REQUIRE(b.code);
    CHECK(*b.code == 5);
    CHECK(Has(b.Err(), "rank 0 on host-0 exited with code 5"));
    CHECK(channel.failures.empty());  // this node's ranks were stopped, not failed
  }
}

TEST_CASE("runner: --restart-backoff waits on the clock, says so, and a stop signal in the wait ends at once",
          "[runner][backoff]") {
  RunBench b(2);
  b.plan.supervisor.max_restarts = 3;
  b.plan.supervisor.backoff_min = 5s;
  b.plan.supervisor.backoff_max = 5s;
  b.Start();
  b.Exit(b.Pid(0), {1, 0});
  b.DieOf(SIGTERM);
  CHECK(Has(b.Err(), "dlaunch: restarting in 5s (backoff)\n"));
  b.Advance(5s - 1ms);
  CHECK(b.env.processes.spawns.size() == 2);
  b.Advance(1ms);
  REQUIRE(b.env.processes.spawns.size() == 4);  // the whole node again
  CHECK_FALSE(b.code);

  b.Exit(b.Pid(1), {1, 0});
  b.DieOf(SIGTERM);
  REQUIRE_FALSE(b.code);  // waiting again
  b.Advance(1s);
  REQUIRE(b.env.signal_source.Raise(SIGTERM) == 1);
  RunReadyHandlers(b.io);
  REQUIRE(b.code);  // at once, with nothing to stop
  CHECK(*b.code == 128 + SIGTERM);
  CHECK(b.env.processes.spawns.size() == 4);
  CHECK(b.Signals(SIGKILL) == 0);
  CHECK_FALSE(b.env.clock.NextDue());  // nothing left armed
}

TEST_CASE("runner: each worker gets a progress file; restarts without progress end with 123", "[runner][progress]") {
  RunBench b(1);
  b.plan.supervisor.max_restarts = 10;
  b.plan.supervisor.max_no_progress_restarts = 1;
  std::vector<std::string> warned;
  ProgressFiles progress(b.dir.path, 1, [&warned](const std::string& l) { warned.push_back(l); });
  b.plan.progress = &progress;
  b.Start();
  auto progress_file = [&b] {
    for (const std::string& kv : b.env.processes.spawns.back().env)
      if (kv.rfind("DLAUNCH_PROGRESS_FILE=", 0) == 0) return kv.substr(sizeof "DLAUNCH_PROGRESS_FILE=" - 1);
    return std::string();
  };
  // Generation 0 gets to step 3, generation 1 to step 4: progress each time.
  for (int step : {3, 4}) {
    std::string path = progress_file();
    REQUIRE(path == b.dir / fmt::format("progress-{}-0", step - 3));
    std::ofstream(path) << step << "\n";
    b.Exit(b.Pid(0), {1, 0});
    REQUIRE_FALSE(b.code);
  }
  // Generation 2 writes nothing new (its file is fresh and empty): stop.
  CHECK(ReadFile(progress_file()).empty());
  b.Exit(b.Pid(0), {1, 0});
  REQUIRE(b.code);
  CHECK(*b.code == 123);
  CHECK(b.env.processes.spawns.size() == 3);
  CHECK(Has(b.console_when_done,
            "dlaunch: not restarting: 1 restart in a row made no progress (no rank passed its progress at the failure "
            "before); exit code 123 (do not requeue)\n"));
  CHECK(Has(b.console_when_done, "dlaunch: job failed with exit code 123\n"));
  CHECK(warned.empty());
}

TEST_CASE("runner: the hang watch sleeps through a backoff and counts the next generation's silence from its start",
          "[runner][backoff]") {
  RunBench b(1);
  b.plan.hang_timeout = 10s;
  b.plan.supervisor.max_restarts = 1;
  b.plan.supervisor.backoff_min = 30s;
  b.plan.supervisor.backoff_max = 30s;
  b.Start();
  b.Advance(1s);
  b.Exit(b.Pid(0), {1, 0});  // the restart comes at 31s
  b.Advance(30s - 1ms);
  CHECK(b.env.stacks.requests.empty());  // nothing runs to be silent
  b.Advance(1ms);
  REQUIRE(b.env.processes.spawns.size() == 2);
  b.Advance(10s - 1ms);
  CHECK(b.env.stacks.requests.empty());
  b.Advance(1ms);
  REQUIRE(b.env.stacks.requests.size() == 1);
  CHECK(Has(b.Err(), "no rank has made progress for 10s: collecting stacks"));
}
