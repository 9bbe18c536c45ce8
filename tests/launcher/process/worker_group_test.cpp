#include "launcher/process/worker_group.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "launcher/core/private_dir.hpp"
#include "launcher/process/summary.hpp"
#include "tests/launcher/process/fakes.hpp"
#include "tests/temp_dir.hpp"

using namespace dlaunch;
using namespace dlaunch::launcher;
using namespace std::chrono_literals;
using dlaunch::testing::ConsolePipes;
using dlaunch::testing::FakeProcesses;
using dlaunch::testing::ReadFile;
using dlaunch::testing::RunReadyHandlers;
using dlaunch::testing::TempDir;

namespace {

bool HasEnv(const SpawnSpec& spec, const std::string& kv) {
  return std::find(spec.env.begin(), spec.env.end(), kv) != spec.env.end();
}

// One node of `nproc` workers, a fake clock, the fake processes and --events in
// a file: everything a WorkerGroup test needs.
struct GroupBench {
  explicit GroupBench(int nproc, int max_restarts = 0) {
    plan.layout.nodes = {envmap::Node{"host-a", "10.0.0.1", nproc, {}}};
    plan.layout.master_addr = "10.0.0.1";
    plan.layout.master_port = 29500;
    plan.layout.run_id = "job";
    plan.exe = "/usr/bin/python3";
    plan.argv = {"python3", "train.py", "--lr=1"};
    plan.work_dir = dir.path;
    plan.private_dir = dir.path;
    plan.supervisor = {nproc, max_restarts, 30s};
    REQUIRE(events.Open(dir / "events.jsonl").ok());
    plan.events = &events;
  }
  WorkerGroup& Make(std::string job_mark = "") {
    group = std::make_unique<WorkerGroup>(plan, std::move(job_mark), processes, io, console,
                                          WorkerGroup::Hooks{[this] { ++changes; }, nullptr}, [this] { return now; });
    return *group;
  }
  int CountEvents(const std::string& name) const {
    std::string text = ReadFile(dir / "events.jsonl");
    std::string key = "\"event\":\"" + name + "\"";
    int n = 0;
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) ++n;
    return n;
  }

  TempDir dir{"group"};
  EventLog events;
  RunPlan plan;
  boost::asio::io_context io;
  ConsolePipes pipes;
  Console console{io, pipes.out[1], pipes.err[1]};
  FakeProcesses processes;
  Clock::time_point now{};
  int changes = 0;
  std::unique_ptr<WorkerGroup> group;
};

}  // namespace

TEST_CASE("the group starts each rank with its environment, argv, CPUs and GPU", "[worker_group]") {
  GroupBench b(2);
  b.plan.flavors.local_rank_arg = envmap::LocalRankArg::kDash;
  b.plan.local_rank_arg_at = 2;  // after train.py
  b.plan.cpus = {{0, 1}, {2, 3}};
  b.plan.pin_gpu = true;
  b.plan.gpus = {"5", "7"};
  b.plan.inherited = {{"PATH", "/usr/bin"}};
  WorkerGroup& g = b.Make("mark-1");
  REQUIRE(g.Start().ok());
  REQUIRE(b.processes.spawns.size() == 2);
  const SpawnSpec& s = b.processes.spawns[1];
  CHECK(s.exe == "/usr/bin/python3");
  CHECK(s.args == std::vector<std::string>{"train.py", "--local-rank=1", "--lr=1"});
  CHECK(s.cpus == std::vector<int>{2, 3});
  CHECK(HasEnv(s, "RANK=1"));
  CHECK(HasEnv(s, "LOCAL_RANK=1"));
  CHECK(HasEnv(s, "WORLD_SIZE=2"));
  CHECK(HasEnv(s, "PATH=/usr/bin"));
  CHECK(HasEnv(s, "CUDA_VISIBLE_DEVICES=7"));
  CHECK(HasEnv(s, "DLAUNCH_JOB_MARK=mark-1"));
  CHECK(HasEnv(s, "TORCHELASTIC_ERROR_FILE=" + ErrorFilePath(b.dir.path, 0, 1)));
  CHECK(HasEnv(b.processes.spawns[0], "CUDA_VISIBLE_DEVICES=5"));
  CHECK(b.CountEvents("worker_started") == 2);
  CHECK(g.worker(0)->pid == 100);
  CHECK(g.worker(1)->running);
}

TEST_CASE("a failing rank stops the others; the group ends once their output has closed", "[worker_group]") {
  GroupBench b(3);
  WorkerGroup& g = b.Make();
  REQUIRE(g.Start().ok());
  b.now += 1500ms;
  b.processes.Exit(101, {3, 0});
  CHECK(b.processes.SignalsTo(100, SIGTERM) == 1);
  CHECK(b.processes.SignalsTo(102, SIGTERM) == 1);
  CHECK(b.processes.SignalsTo(101, SIGTERM) == 0);
  CHECK_FALSE(g.Ended());
  b.processes.Exit(100, {0, SIGTERM});
  b.processes.Exit(102, {0, SIGTERM});
  REQUIRE(g.supervisor().done());
  CHECK(g.supervisor().exit_code() == 3);
  CHECK(b.processes.released == std::vector<int>{101, 100, 102});
  // Done, but the pipes' ends of file have not been read yet.
  int before = b.changes;
  CHECK_FALSE(g.Ended());
  RunReadyHandlers(b.io);
  CHECK(b.changes > before);  // each stream that closed said so
  CHECK(g.Ended());
  std::string events = ReadFile(b.dir / "events.jsonl");
  CHECK(events.find(R"("rank":1,"local_rank":1,"pid":101,"restart":0,"run_time_ms":1500,"exit_code":3)") !=
        std::string::npos);
  CHECK(events.find(R"("pid":100,"restart":0,"run_time_ms":1500,"signal":"SIGTERM")") != std::string::npos);
}

TEST_CASE("the group restarts a failed generation up to max_restarts, then gives up", "[worker_group]") {
  GroupBench b(2, 2);
  WorkerGroup& g = b.Make();
  REQUIRE(g.Start().ok());
  for (int generation = 0; generation < 3; ++generation) {
    REQUIRE(b.processes.spawns.size() == static_cast<size_t>(2 * (generation + 1)));
    CHECK(HasEnv(b.processes.spawns.back(), "TORCHELASTIC_RESTART_COUNT=" + std::to_string(generation)));
    int first = g.worker(0)->pid;
    CHECK_FALSE(g.supervisor().done());
    b.processes.Exit(first, {1, 0});
    b.processes.Exit(first + 1, {0, SIGTERM});
  }
  CHECK(b.processes.spawns.size() == 6);  // no fourth generation
  REQUIRE(g.supervisor().done());
  CHECK(g.supervisor().exit_code() == 1);
  CHECK(g.supervisor().restart_count() == 2);
  CHECK(b.CountEvents("restart") == 2);
  CHECK(b.CountEvents("worker_started") == 6);
  RunReadyHandlers(b.io);
  CHECK(g.Ended());
}

TEST_CASE("a worker's output reaches its last line, stderr tail, logs and the tagged console", "[worker_group]") {
  GroupBench b(2);
  b.plan.write_logs = true;
  b.plan.tag_format = "[{rank}]: ";
  b.plan.redirected = {0, 2};  // rank 1's stderr kept off the console
  WorkerGroup& g = b.Make();
  REQUIRE(g.Start().ok());
  CHECK(g.last_line(0) == nullptr);
  Clock::time_point started = g.last_bytes();
  b.now += 1s;  // the bytes are stamped with the group's clock
  b.processes.Write(100, "step 1\nstep 2\n");
  b.processes.Write(101, "Traceback\nValueError: bad\n", true);
  b.processes.Write(101, "hello from 1\n");
  RunReadyHandlers(b.io);
  REQUIRE(g.last_line(0) != nullptr);
  CHECK(g.last_line(0)->line() == "step 2");
  CHECK(g.stderr_tail(1).LastLines(2) == std::vector<std::string>{"Traceback", "ValueError: bad"});
  CHECK(g.last_bytes() == started + 1s);  // output is progress (the hang watch)
  CHECK(ReadFile(b.dir / "attempt_0/0/stdout.log") == "step 1\nstep 2\n");
  CHECK(ReadFile(b.dir / "attempt_0/1/stderr.log") == "Traceback\nValueError: bad\n");
  std::string shown = ConsolePipes::Take(b.pipes.out[0]);
  CHECK(shown.find("[0]: step 1\n[0]: step 2\n") != std::string::npos);
  CHECK(shown.find("[1]: hello from 1\n") != std::string::npos);
  CHECK(ConsolePipes::Take(b.pipes.err[0]).find("ValueError") == std::string::npos);
}

TEST_CASE("a command that cannot start ends the group with 127", "[worker_group]") {
  GroupBench b(2);
  b.processes.refuse = true;
  WorkerGroup& g = b.Make();
  Status s = g.Start();
  CHECK(s.message() == "train.py: command not found");
  CHECK(b.processes.spawns.size() == 1);  // the second rank is not tried
  REQUIRE(g.supervisor().done());
  CHECK(g.supervisor().exit_code() == 127);
  CHECK(g.Ended());
}

TEST_CASE("the node's end names the root cause with its error file, else its stderr", "[worker_group][summary]") {
  GroupBench b(2);
  WorkerGroup& g = b.Make();
  REQUIRE(g.Start().ok());
  b.processes.Write(100, "rank 0 fine\n", true);
  b.processes.Write(101, "Traceback\nKeyError: 'x'\n", true);
  RunReadyHandlers(b.io);
  b.now += 2s;
  b.processes.Exit(101, {3, 0});
  b.processes.Exit(100, {0, SIGTERM});
  RunReadyHandlers(b.io);
  REQUIRE(g.Ended());

  NodeEnd end = GatherEnd(g, b.dir.path);
  std::vector<std::string> lines = NodeEndLines(end);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "job failed with exit code 3");
  CHECK(lines[1] == "root cause: rank 1 (local_rank 1, pid 101) exited with code 3 after 2.00s");
  CHECK(lines[2] == "  | Traceback");
  CHECK(lines[3] == "  | KeyError: 'x'");
  CHECK(lines[4] == "others: rank 0 was killed by SIGTERM");

  // torch's @record file wins over the stderr tail.
  REQUIRE(WriteFile(ErrorFilePath(b.dir.path, 0, 1), R"({"message": {"message": "KeyError: 'x' in step 7"}})").ok());
  lines = NodeEndLines(GatherEnd(g, b.dir.path));
  REQUIRE(lines.size() == 4);
  CHECK(lines[2] == "  | KeyError: 'x' in step 7");
}

TEST_CASE("a role with restarts of its own restarts alone while the others run on", "[worker_group]") {
  GroupBench b(3);
  // Rank 0 the trainer, sharing the job's restarts (none); ranks 1-2 the rollout, with 1 of its own.
  for (auto [role, restarts] : {std::pair<const char*, int>{"trainer", -1}, {"rollout", 1}}) {
    envmap::ProgramGroup group;
    group.role = role;
    group.argv = {"python3", std::string(role) + ".py"};
    group.exe = "/usr/bin/python3";
    group.restarts = restarts;
    b.plan.programs.groups.push_back(group);
  }
  b.plan.programs.group_of = {0, 1, 1};
  WorkerGroup& g = b.Make();
  REQUIRE(g.Start().ok());
  REQUIRE(b.processes.spawns.size() == 3);
  b.processes.Exit(102, {1, 0});
  CHECK(b.processes.signals == std::vector<std::pair<int, int>>{{101, SIGTERM}});
  b.processes.Exit(101, {0, SIGTERM});
  REQUIRE(b.processes.spawns.size() == 5);  // the rollout's two, again
  CHECK(g.worker(0)->pid == 100);
  CHECK(g.worker(0)->running);
  CHECK(g.worker(1)->pid == 103);
  CHECK(g.worker(2)->pid == 104);
  CHECK(g.worker(2)->restart == 1);
  CHECK(b.processes.SignalsTo(100, SIGTERM) == 0);
  CHECK(g.supervisor().state() == Supervisor::State::kRunning);
  // Once, with the role and its own bound; the events say which role's worker started.
  std::string events = ReadFile(b.dir / "events.jsonl");
  CHECK(events.find(R"("restart":1,"max_restarts":1,"role":"rollout")") != std::string::npos);
  CHECK(events.find(R"("rank":2,"local_rank":2,"pid":104,"restart":1,"role":"rollout")") != std::string::npos);
  CHECK(events.find(R"("rank":0,"local_rank":0,"pid":100,"restart":0,"role":"trainer")") != std::string::npos);
  // Its last restart spent, the rollout's next failure ends the job with its code.
  b.processes.Exit(103, {5, 0});
  CHECK(b.processes.SignalsTo(100, SIGTERM) == 1);
  CHECK(b.processes.SignalsTo(104, SIGTERM) == 1);
  b.processes.DieOf(SIGTERM);
  REQUIRE(g.supervisor().done());
  CHECK(g.supervisor().exit_code() == 5);
  REQUIRE(g.supervisor().root_cause() != nullptr);
  CHECK(g.supervisor().root_cause()->local_rank == 1);
  CHECK(b.processes.spawns.size() == 5);
  RunReadyHandlers(b.io);
  CHECK(g.Ended());
}
