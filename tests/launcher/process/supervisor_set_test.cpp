#include "launcher/process/supervisor_set.hpp"

#include <csignal>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;

// Named, not anonymous: the unity build puts this file beside supervisor_test.cpp.
namespace dlaunch::launcher::supervisor_set_test {

// Records what the set asks of the node, by the node's local ranks.
class FakeNode : public WorkerControl {
 public:
  Result<int> Start(int local_rank, int restart) override {
    starts.push_back({local_rank, restart});
    if (fail_start_of == local_rank) return Status::NotFound("nope: command not found");
    pid_of[local_rank] = next_pid;
    return next_pid++;
  }
  void Signal(int pid, int sig) override { signals.push_back({pid, sig}); }
  void Release(int pid) override { released.push_back(pid); }
  void SampleBeforeKill(const std::vector<int>& pids) override { sampled.push_back(pids); }
  std::vector<std::int64_t> Progress() override { return progress; }
  void Notice(const std::string& line) override { notices.push_back(line); }

  // The signals the workers of these local ranks (their pids now) were sent.
  std::vector<std::pair<int, int>> SignalsTo(const std::vector<int>& local_ranks) const {
    std::vector<std::pair<int, int>> out;
    for (auto& s : signals)
      for (int r : local_ranks)
        if (pid_of.at(r) == s.first) out.push_back(s);
    return out;
  }
  int StartsOf(int local_rank) const {
    int n = 0;
    for (auto& s : starts) n += s.first == local_rank ? 1 : 0;
    return n;
  }

  int next_pid = 100;
  int fail_start_of = -1;
  std::map<int, int> pid_of;  // local rank -> its latest pid
  std::vector<std::pair<int, int>> starts;
  std::vector<std::pair<int, int>> signals;
  std::vector<int> released;
  std::vector<std::vector<int>> sampled;
  std::vector<std::int64_t> progress;
  std::vector<std::string> notices;
};

SupervisorOptions Opts(int nproc, int max_restarts, std::chrono::milliseconds backoff = 0ms) {
  SupervisorOptions o{nproc, max_restarts, 30s};
  o.backoff_min = backoff;
  o.backoff_max = backoff;
  return o;
}

SupervisorDomain Main(std::vector<int> ranks, int max_restarts = 0) {
  int n = static_cast<int>(ranks.size());
  return {"", std::move(ranks), Opts(n, max_restarts)};
}

SupervisorDomain Role(std::string role, std::vector<int> ranks, int restarts, std::chrono::milliseconds backoff = 0ms) {
  int n = static_cast<int>(ranks.size());
  return {std::move(role), std::move(ranks), Opts(n, restarts, backoff)};
}

// A worker exits: the one of `local_rank` now.
void Exit(FakeNode& n, SupervisorSet& s, int local_rank, ExitStatus status, Clock::time_point at) {
  s.OnExit(n.pid_of.at(local_rank), status, at);
}

envmap::ProgramTable Table(std::vector<std::pair<std::string, int>> groups, std::vector<int> group_of) {
  envmap::ProgramTable t;
  for (auto& [role, restarts] : groups) {
    envmap::ProgramGroup g;
    g.role = role;
    g.argv = {role};
    g.restarts = restarts;
    t.groups.push_back(g);
  }
  t.group_of = std::move(group_of);
  return t;
}

std::vector<envmap::WorkerSlot> Slots(int first_rank, int n) {
  std::vector<envmap::WorkerSlot> slots;
  for (int i = 0; i < n; ++i) slots.push_back(envmap::WorkerSlot{i, first_rank + i});
  return slots;
}

const Clock::time_point t0{};

TEST_CASE("NodeDomains: without a group that restarts alone, the job's one supervisor", "[supervisor_set]") {
  SupervisorOptions job = Opts(3, 4, 2s);
  job.max_no_progress_restarts = 2;
  for (const envmap::ProgramTable& t :
       {envmap::ProgramTable{}, Table({{"a", -1}, {"b", -1}}, {0, 1, 1}), Table({{"a", -1}, {"b", 1}}, {0, 0, 0, 1})}) {
    std::vector<SupervisorDomain> d = NodeDomains(job, t, Slots(0, 3));
    REQUIRE(d.size() == 1);
    CHECK(d[0].role.empty());
    CHECK(d[0].local_ranks == std::vector<int>{0, 1, 2});
    CHECK(d[0].options.nproc == 3);
    CHECK(d[0].options.max_restarts == 4);
  }
}

TEST_CASE("NodeDomains: each group with restarts alone, the rest the main domain", "[supervisor_set]") {
  SupervisorOptions job = Opts(4, 5, 2s);
  job.max_no_progress_restarts = 2;
  job.sample_before_kill = 3s;
  // Ranks 4..7 on this node: trainer 4, rollout 5-6 (2 restarts), judge 7 (0 restarts).
  envmap::ProgramTable t = Table({{"trainer", -1}, {"rollout", 2}, {"judge", 0}, {"far", 1}}, {3, 3, 3, 3, 0, 1, 1, 2});
  std::vector<SupervisorDomain> d = NodeDomains(job, t, Slots(4, 4));
  REQUIRE(d.size() == 3);
  CHECK(d[0].role.empty());
  CHECK(d[0].local_ranks == std::vector<int>{0});
  CHECK(d[0].options.nproc == 1);
  CHECK(d[0].options.max_restarts == 5);
  CHECK(d[1].role == "rollout");
  CHECK(d[1].local_ranks == std::vector<int>{1, 2});
  CHECK(d[1].options.nproc == 2);
  CHECK(d[1].options.max_restarts == 2);
  CHECK(d[2].role == "judge");
  CHECK(d[2].local_ranks == std::vector<int>{3});
  CHECK(d[2].options.max_restarts == 0);
  for (const SupervisorDomain& x : d) {  // the job's recovery and teardown, each its own count
    CHECK(x.options.backoff_min == 2s);
    CHECK(x.options.max_no_progress_restarts == 2);
    CHECK(x.options.sample_before_kill == 3s);
    CHECK(x.options.shutdown_timeout == 30s);
  }
  // Every rank in groups with restarts: no main domain.
  d = NodeDomains(job, Table({{"a", 1}, {"b", 0}}, {0, 1}), Slots(0, 2));
  REQUIRE(d.size() == 2);
  CHECK(d[0].role == "a");
  CHECK(d[1].role == "b");
}

TEST_CASE("a role failing with restarts left restarts only its workers", "[supervisor_set]") {
  FakeNode n;
  SupervisorSet s(n, {Main({0, 1}), Role("rollout", {2, 3}, 2)});
  REQUIRE(s.Start(t0).ok());
  CHECK(n.starts == std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {2, 0}, {3, 0}});
  Exit(n, s, 3, {1, 0}, t0 + 1s);
  CHECK(n.signals == std::vector<std::pair<int, int>>{{n.pid_of[2], SIGTERM}});
  CHECK(s.state() == SupervisorSet::State::kRunning);  // the main domain runs on
  CHECK(s.root_cause() == nullptr);                    // a restart is the role's own business
  Exit(n, s, 2, {0, SIGTERM}, t0 + 1100ms);
  CHECK(n.starts == std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {2, 1}, {3, 1}});
  CHECK(n.SignalsTo({0, 1}).empty());
  CHECK(n.pid_of[0] == 100);
  CHECK(n.notices ==
        std::vector<std::string>{"role rollout: restarting its 2 workers (restart 1 of 2); the other roles run on"});
  CHECK_FALSE(s.done());
  CHECK(s.restart_count() == 0);  // the main domain's
  REQUIRE(s.workers().size() == 4);
  CHECK(s.workers()[0].pid == 100);
  CHECK(s.workers()[2].pid == n.pid_of[2]);
  CHECK(s.workers()[2].local_rank == 2);
  CHECK(s.workers()[3].restart == 1);
  CHECK(s.workers()[1].restart == 0);
  // Both generations end well: the job ends with 0.
  for (int r : {0, 1, 2, 3}) Exit(n, s, r, {0, 0}, t0 + 5s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 0);
  CHECK(s.root_cause() == nullptr);
}

TEST_CASE("a role with its restarts used up stops the rest with its code and is the root cause", "[supervisor_set]") {
  FakeNode n;
  SupervisorSet s(n, {Main({0, 1}), Role("rollout", {2, 3}, 1)});
  REQUIRE(s.Start(t0).ok());
  Exit(n, s, 2, {1, 0}, t0 + 1s);
  Exit(n, s, 3, {0, SIGTERM}, t0 + 1s);
  REQUIRE(n.StartsOf(2) == 2);
  n.signals.clear();
  Exit(n, s, 3, {3, 0}, t0 + 2s);
  // At once, as one supervisor stops every worker at the first failure.
  CHECK(n.SignalsTo({0, 1}) == std::vector<std::pair<int, int>>{{100, SIGTERM}, {101, SIGTERM}});
  CHECK(n.SignalsTo({2}) == std::vector<std::pair<int, int>>{{n.pid_of[2], SIGTERM}});
  CHECK(n.notices.back() == "role rollout: failed with exit code 3; stopping the other roles");
  REQUIRE(s.root_cause() != nullptr);
  CHECK(s.root_cause()->local_rank == 3);
  CHECK(s.root_cause()->pid == n.pid_of[3]);
  for (int r : {0, 1, 2}) Exit(n, s, r, {0, SIGTERM}, t0 + 2100ms);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 3);
  CHECK(s.root_cause()->local_rank == 3);
  CHECK(s.workers()[0].stopped_by_us);
  CHECK(n.StartsOf(0) == 1);
}

TEST_CASE("the main domain failing stops every role, restarts left or not", "[supervisor_set]") {
  FakeNode n;
  SupervisorSet s(n, {Main({0, 1}), Role("rollout", {2}, 5), Role("judge", {3}, 0)});
  REQUIRE(s.Start(t0).ok());
  Exit(n, s, 1, {2, 0}, t0 + 1s);
  CHECK(n.signals == std::vector<std::pair<int, int>>{{100, SIGTERM}, {n.pid_of[2], SIGTERM}, {n.pid_of[3], SIGTERM}});
  CHECK(n.notices.empty());
  REQUIRE(s.root_cause() != nullptr);
  CHECK(s.root_cause()->local_rank == 1);
  // SIGKILL after the shutdown timeout reaches every domain's workers.
  REQUIRE(s.deadline() == t0 + 31s);
  s.OnTick(t0 + 31s);
  CHECK(n.signals.size() == 6);
  for (int r : {0, 2, 3}) Exit(n, s, r, {0, SIGKILL}, t0 + 31s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 2);
  CHECK(n.starts.size() == 4);  // no role restarted
}

TEST_CASE("a stop signal, Forward and Abort reach every domain", "[supervisor_set]") {
  FakeNode n;
  SupervisorSet s(n, {Main({0}), Role("a", {1}, 3), Role("b", {2}, 3)});
  REQUIRE(s.Start(t0).ok());
  s.Forward(SIGUSR1);
  CHECK(n.signals == std::vector<std::pair<int, int>>{{100, SIGUSR1}, {101, SIGUSR1}, {102, SIGUSR1}});
  n.signals.clear();
  s.OnStopSignal(SIGINT, t0 + 1s);
  CHECK(n.signals == std::vector<std::pair<int, int>>{{100, SIGINT}, {101, SIGINT}, {102, SIGINT}});
  s.OnStopSignal(SIGINT, t0 + 2s);  // the second: SIGKILL at once
  CHECK(n.signals.size() == 6);
  CHECK(n.signals.back() == std::pair<int, int>{102, SIGKILL});
  Exit(n, s, 1, {1, 0}, t0 + 2s);  // a role dying of the stop is not restarted
  Exit(n, s, 0, {0, SIGKILL}, t0 + 2s);
  Exit(n, s, 2, {0, SIGKILL}, t0 + 2s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 130);
  CHECK(s.stop_signal() == SIGINT);
  CHECK(n.starts.size() == 3);

  FakeNode m;
  SupervisorSet t(m, {Main({0}), Role("a", {1}, 3)});
  REQUIRE(t.Start(t0).ok());
  t.Abort(7, t0 + 1s);
  CHECK(m.signals == std::vector<std::pair<int, int>>{{100, SIGTERM}, {101, SIGTERM}});
  Exit(m, t, 1, {1, 0}, t0 + 1s);
  Exit(m, t, 0, {0, SIGTERM}, t0 + 1s);
  REQUIRE(t.done());
  CHECK(t.exit_code() == 7);
  CHECK(m.starts.size() == 2);
}

TEST_CASE("a role whose workers exit 0 is done while the others run on", "[supervisor_set]") {
  FakeNode n;
  SupervisorSet s(n, {Main({0, 1}), Role("prep", {2}, 2)});
  REQUIRE(s.Start(t0).ok());
  Exit(n, s, 2, {0, 0}, t0 + 1s);
  CHECK(n.signals.empty());
  CHECK_FALSE(s.done());
  CHECK(s.state() == SupervisorSet::State::kRunning);
  CHECK(s.workers()[2].running == false);
  Exit(n, s, 0, {0, 0}, t0 + 2s);
  Exit(n, s, 1, {0, 0}, t0 + 3s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 0);

  // Then the main domain fails: the job ends with its code, the role had no signal.
  FakeNode m;
  SupervisorSet t(m, {Main({0}), Role("prep", {1}, 2)});
  REQUIRE(t.Start(t0).ok());
  Exit(m, t, 1, {0, 0}, t0 + 1s);
  Exit(m, t, 0, {5, 0}, t0 + 2s);
  REQUIRE(t.done());
  CHECK(t.exit_code() == 5);
  CHECK(m.signals.empty());
  CHECK(m.notices.empty());

  // The main domain done with 0 first: a role that fails for good still fails the job.
  FakeNode k;
  SupervisorSet u(k, {Main({0}), Role("prep", {1}, 0)});
  REQUIRE(u.Start(t0).ok());
  Exit(k, u, 0, {0, 0}, t0 + 1s);
  CHECK_FALSE(u.done());
  Exit(k, u, 1, {9, 0}, t0 + 2s);
  REQUIRE(u.done());
  CHECK(u.exit_code() == 9);
  CHECK(k.notices.empty());  // nothing left to stop
  REQUIRE(u.root_cause() != nullptr);
  CHECK(u.root_cause()->local_rank == 1);
}

TEST_CASE("a failure during another domain's restart backoff", "[supervisor_set]") {
  FakeNode n;
  SupervisorSet s(n, {Main({0}), Role("a", {1}, 1, 10s), Role("b", {2}, 1, 4s)});
  REQUIRE(s.Start(t0).ok());
  Exit(n, s, 1, {1, 0}, t0 + 1s);
  CHECK(n.notices == std::vector<std::string>{"role a: restarting in 10s (backoff)"});
  CHECK(s.state() == SupervisorSet::State::kRunning);
  CHECK(s.deadline() == t0 + 11s);
  // b fails while a waits: b waits too, on its own clock; a is untouched.
  Exit(n, s, 2, {1, 0}, t0 + 2s);
  CHECK(s.deadline() == t0 + 6s);
  CHECK(n.signals.empty());
  s.OnTick(t0 + 6s);
  CHECK(n.starts.back() == std::pair<int, int>{2, 1});
  CHECK(n.StartsOf(1) == 1);  // a still waits
  CHECK(n.notices.back() == "role b: restarting its worker (restart 1 of 1); the other roles run on");
  CHECK(s.deadline() == t0 + 11s);
  // The main domain fails for good during a's wait: a never restarts, b stops.
  Exit(n, s, 0, {4, 0}, t0 + 7s);
  CHECK(n.signals == std::vector<std::pair<int, int>>{{n.pid_of[2], SIGTERM}});
  Exit(n, s, 2, {0, SIGTERM}, t0 + 7s);
  REQUIRE(s.done());
  CHECK(s.deadline() == std::nullopt);
  s.OnTick(t0 + 11s);
  CHECK(n.StartsOf(1) == 1);
  CHECK(s.exit_code() == 4);
  CHECK(s.root_cause()->local_rank == 0);
}

TEST_CASE("a start that fails stops what started and starts nothing more", "[supervisor_set]") {
  FakeNode n;
  n.fail_start_of = 2;
  SupervisorSet s(n, {Main({0, 1}), Role("a", {2, 3}, 2), Role("b", {4}, 2)});
  Status st = s.Start(t0);
  CHECK(st.message() == "nope: command not found");
  CHECK(n.starts == std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {2, 0}});
  CHECK(n.signals == std::vector<std::pair<int, int>>{{100, SIGTERM}, {101, SIGTERM}});
  REQUIRE(s.workers().size() == 5);
  CHECK(s.workers()[4].pid == 0);
  CHECK(s.workers()[4].local_rank == 4);
  Exit(n, s, 0, {0, SIGTERM}, t0);
  Exit(n, s, 1, {0, SIGTERM}, t0);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 127);
}

TEST_CASE("a role whose program cannot start again, mid-restart, stops the job with 127", "[supervisor_set]") {
  FakeNode n;
  SupervisorSet s(n, {Main({0}), Role("rollout", {1, 2}, 3)});
  REQUIRE(s.Start(t0).ok());
  n.fail_start_of = 2;  // its program is gone by the restart
  Exit(n, s, 1, {1, 0}, t0 + 1s);
  Exit(n, s, 2, {0, SIGTERM}, t0 + 1s);
  CHECK(n.starts.back() == std::pair<int, int>{2, 1});
  // The restarted worker that did start stops, and so does the main domain.
  CHECK(n.SignalsTo({0}) == std::vector<std::pair<int, int>>{{100, SIGTERM}});
  CHECK(n.SignalsTo({1}).size() == 1);
  Exit(n, s, 1, {0, SIGTERM}, t0 + 2s);
  Exit(n, s, 0, {0, SIGTERM}, t0 + 2s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 127);
  CHECK(n.StartsOf(2) == 2);  // no third try
}

TEST_CASE("a stop signal during a role's restart backoff ends the wait and starts nothing", "[supervisor_set]") {
  FakeNode n;
  SupervisorSet s(n, {Main({0}), Role("rollout", {1}, 2, 10s)});
  REQUIRE(s.Start(t0).ok());
  Exit(n, s, 1, {1, 0}, t0 + 1s);
  REQUIRE(s.deadline() == t0 + 11s);
  s.OnStopSignal(SIGTERM, t0 + 2s);
  CHECK(n.SignalsTo({0}) == std::vector<std::pair<int, int>>{{100, SIGTERM}});
  Exit(n, s, 0, {0, SIGTERM}, t0 + 3s);
  REQUIRE(s.done());
  s.OnTick(t0 + 11s);
  CHECK(n.StartsOf(1) == 1);
  CHECK(s.exit_code() == 128 + SIGTERM);
}

TEST_CASE("a role's no-progress verdict is its own, and names the role", "[supervisor_set]") {
  FakeNode n;
  SupervisorOptions o = Opts(1, 5);
  o.max_no_progress_restarts = 1;
  SupervisorSet s(n, {Main({0}), {"a", {1}, o}});
  REQUIRE(s.Start(t0).ok());
  n.progress = {-1, 7};  // by the node's local rank: a's worker wrote 7
  Exit(n, s, 1, {1, 0}, t0 + 1s);
  REQUIRE(n.StartsOf(1) == 2);
  Exit(n, s, 1, {1, 0}, t0 + 2s);  // no step past 7
  REQUIRE(s.done() == false);
  CHECK(n.notices.back() == "role a: failed with exit code 123; stopping the other roles");
  CHECK(n.notices[n.notices.size() - 2].starts_with("role a: not restarting: 1 restart in a row made no progress"));
  Exit(n, s, 0, {0, SIGTERM}, t0 + 2s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == base::kExitNoProgress);
}

// One domain over every rank is the Supervisor it holds: the same script of
// events gives the same calls and the same answers.
TEST_CASE("one domain behaves exactly as a Supervisor", "[supervisor_set]") {
  SupervisorOptions o{3, 2, 5s};
  o.sample_before_kill = 2s;
  o.backoff_min = 1s;
  o.backoff_max = 4s;
  FakeNode a, b;
  Supervisor one(a, o);
  SupervisorSet set(b, {{"", {0, 1, 2}, o}});
  auto same = [&] {
    CHECK(a.starts == b.starts);
    CHECK(a.signals == b.signals);
    CHECK(a.released == b.released);
    CHECK(a.sampled == b.sampled);
    CHECK(a.notices == b.notices);
    CHECK(one.state() == set.state());
    CHECK(one.deadline() == set.deadline());
    CHECK(one.done() == set.done());
    CHECK(one.exit_code() == set.exit_code());
    CHECK(one.restart_count() == set.restart_count());
    CHECK(one.stop_signal() == set.stop_signal());
    REQUIRE(one.workers().size() == set.workers().size());
    for (size_t i = 0; i < one.workers().size(); ++i) {
      CHECK(one.workers()[i].pid == set.workers()[i].pid);
      CHECK(one.workers()[i].running == set.workers()[i].running);
      CHECK(one.workers()[i].restart == set.workers()[i].restart);
    }
    REQUIRE((one.root_cause() == nullptr) == (set.root_cause() == nullptr));
    if (one.root_cause() != nullptr) CHECK(one.root_cause()->local_rank == set.root_cause()->local_rank);
  };
  auto both = [&](auto step) {
    step(a, one);
    step(b, set);
    same();
  };
  both([](FakeNode&, auto& s) { REQUIRE(s.Start(t0).ok()); });
  both([](FakeNode&, auto& s) { s.Forward(SIGUSR2); });
  both([](FakeNode& n, auto& s) { s.OnExit(n.pid_of.at(1), {2, 0}, t0 + 1s); });
  both([](FakeNode& n, auto& s) { s.OnExit(n.pid_of.at(0), {0, SIGTERM}, t0 + 2s); });
  both([](FakeNode&, auto& s) { s.OnTick(t0 + 6s); });  // the shutdown timeout: sample
  both([](FakeNode&, auto& s) { s.OnSampled(t0 + 7s); });
  both([](FakeNode& n, auto& s) { s.OnExit(n.pid_of.at(2), {0, SIGKILL}, t0 + 7s); });  // backoff
  both([](FakeNode&, auto& s) { s.OnTick(t0 + 8s); });                                  // restart 1
  both([](FakeNode& n, auto& s) { s.OnExit(n.pid_of.at(2), {0, 0}, t0 + 9s); });
  both([](FakeNode& n, auto& s) { s.OnExit(n.pid_of.at(0), {3, 0}, t0 + 10s); });
  both([](FakeNode& n, auto& s) { s.OnExit(n.pid_of.at(1), {0, SIGTERM}, t0 + 10s); });  // backoff 2s
  both([](FakeNode&, auto& s) { s.OnStopSignal(SIGTERM, t0 + 11s); });                   // ends the wait
  CHECK(set.done());
  CHECK(set.exit_code() == 128 + SIGTERM);

  FakeNode c, d;
  Supervisor two(c, o);
  SupervisorSet set2(d, {{"", {0, 1, 2}, o}});
  c.fail_start_of = d.fail_start_of = 1;
  CHECK(two.Start(t0).message() == set2.Start(t0).message());
  CHECK(c.signals == d.signals);
  two.Abort(9, t0);
  set2.Abort(9, t0);
  two.OnExit(100, {0, SIGTERM}, t0 + 1s);
  set2.OnExit(100, {0, SIGTERM}, t0 + 1s);
  CHECK(two.done() == set2.done());
  CHECK(two.exit_code() == set2.exit_code());
  CHECK(c.released == d.released);
}

}  // namespace dlaunch::launcher::supervisor_set_test
