#include "launcher/process/supervisor.hpp"

#include <csignal>
#include <map>

#include <catch2/catch.hpp>

using namespace dlaunch;
using namespace dlaunch::launcher;
using namespace std::chrono_literals;

namespace {

// Records what the policy asks of the outside world, like ninja's FakeCommandRunner.
class FakeControl : public WorkerControl {
 public:
  Result<int> Start(int local_rank, int restart) override {
    starts.push_back({local_rank, restart});
    if (fail_start_of == local_rank) return Status::NotFound("nope: command not found");
    return next_pid++;
  }
  void Signal(int pid, int sig) override { signals.push_back({pid, sig}); }
  void Release(int pid) override { released.push_back(pid); }
  void SampleBeforeKill(const std::vector<int>& pids) override { sampled.push_back(pids); }

  int SignalsOf(int sig) const {
    int n = 0;
    for (auto& s : signals) n += s.second == sig ? 1 : 0;
    return n;
  }

  int next_pid = 100;
  int fail_start_of = -1;
  std::vector<std::pair<int, int>> starts;
  std::vector<std::pair<int, int>> signals;
  std::vector<int> released;
  std::vector<std::vector<int>> sampled;
};

SupervisorOptions Sampling(int nproc, std::chrono::milliseconds shutdown, std::chrono::milliseconds sample) {
  SupervisorOptions o{nproc, 0, shutdown};
  o.sample_before_kill = sample;
  return o;
}

const Clock::time_point t0{};

}  // namespace

TEST_CASE("all workers succeeding gives 0", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, {3, 0, 30s});
  REQUIRE(s.Start(t0).ok());
  CHECK(c.starts.size() == 3);
  s.OnExit(101, {0, 0}, t0 + 1s);
  s.OnExit(100, {0, 0}, t0 + 1s);
  CHECK_FALSE(s.done());
  s.OnExit(102, {0, 0}, t0 + 2s);
  CHECK(s.done());
  CHECK(s.exit_code() == 0);
  CHECK(s.root_cause() == nullptr);
  CHECK(c.signals.empty());
  CHECK(c.released == std::vector<int>{101, 100, 102});
}

TEST_CASE("the first failure stops the rest and gives its code", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, {4, 0, 30s});
  REQUIRE(s.Start(t0).ok());
  s.OnExit(101, {3, 0}, t0 + 1s);
  CHECK(s.state() == Supervisor::State::kStopping);
  CHECK(c.SignalsOf(SIGTERM) == 3);  // every worker still running
  // The others die of our SIGTERM; that is not a new root cause.
  s.OnExit(100, {0, SIGTERM}, t0 + 1100ms);
  s.OnExit(102, {1, 0}, t0 + 1100ms);
  s.OnExit(103, {0, SIGTERM}, t0 + 1100ms);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 3);
  REQUIRE(s.root_cause() != nullptr);
  CHECK(s.root_cause()->local_rank == 1);
  CHECK(s.workers()[2].stopped_by_us);
}

TEST_CASE("a worker killed by a signal gives 128+N", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, {2, 0, 30s});
  REQUIRE(s.Start(t0).ok());
  s.OnExit(100, {0, SIGKILL}, t0 + 1s);
  s.OnExit(101, {0, SIGTERM}, t0 + 1s);
  CHECK(s.exit_code() == 137);
  CHECK(Describe(s.root_cause()->status) == "was killed by SIGKILL");
}

TEST_CASE("SIGKILL follows SIGTERM after the shutdown timeout, not before", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, {2, 0, 5s});
  REQUIRE(s.Start(t0).ok());
  s.OnExit(100, {1, 0}, t0);
  REQUIRE(s.deadline().has_value());
  CHECK(*s.deadline() == t0 + 5s);
  s.OnTick(t0 + 4s);
  CHECK(c.SignalsOf(SIGKILL) == 0);
  s.OnTick(t0 + 5s);
  CHECK(c.SignalsOf(SIGKILL) == 1);
  CHECK(c.signals.back() == std::pair<int, int>{101, SIGKILL});
  s.OnExit(101, {0, SIGKILL}, t0 + 5s);
  CHECK(s.done());
  CHECK(s.exit_code() == 1);
}

TEST_CASE("a stop signal is forwarded, then 128+N; a second SIGINT kills at once", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, {2, 3, 30s});
  REQUIRE(s.Start(t0).ok());
  s.OnStopSignal(SIGINT, t0);
  CHECK(c.SignalsOf(SIGINT) == 2);
  CHECK(c.SignalsOf(SIGKILL) == 0);
  s.OnStopSignal(SIGINT, t0 + 1s);
  CHECK(c.SignalsOf(SIGKILL) == 2);
  s.OnExit(100, {0, SIGINT}, t0 + 1s);
  s.OnExit(101, {0, SIGKILL}, t0 + 1s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 130);
  CHECK(s.restart_count() == 0);  // a user's stop never restarts
  CHECK(s.root_cause() == nullptr);
}

TEST_CASE("max-restarts restarts every worker with the next generation", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, {2, 1, 30s});
  REQUIRE(s.Start(t0).ok());
  s.OnExit(100, {2, 0}, t0 + 1s);
  s.OnExit(101, {0, SIGTERM}, t0 + 1s);
  CHECK_FALSE(s.done());
  CHECK(s.restart_count() == 1);
  REQUIRE(c.starts.size() == 4);
  CHECK(c.starts[2] == std::pair<int, int>{0, 1});
  CHECK(c.starts[3] == std::pair<int, int>{1, 1});
  // Second generation fails again: no restarts left.
  s.OnExit(103, {4, 0}, t0 + 2s);
  s.OnExit(102, {0, SIGTERM}, t0 + 2s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 4);
  CHECK(s.root_cause()->local_rank == 1);
  CHECK(s.root_cause()->restart == 1);
}

TEST_CASE("a start that fails tears down the started and exits 127", "[supervisor]") {
  FakeControl c;
  c.fail_start_of = 2;
  Supervisor s(c, {4, 2, 30s});
  Status st = s.Start(t0);
  CHECK(st.message() == "nope: command not found");
  CHECK(c.starts.size() == 3);
  CHECK(c.SignalsOf(SIGTERM) == 2);
  s.OnExit(100, {0, SIGTERM}, t0);
  s.OnExit(101, {0, SIGTERM}, t0);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 127);
  CHECK(s.restart_count() == 0);
}

TEST_CASE("forwarded signals reach every running worker only", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, {3, 0, 30s});
  REQUIRE(s.Start(t0).ok());
  s.OnExit(101, {0, 0}, t0);
  s.Forward(SIGUSR1);
  CHECK(c.signals == std::vector<std::pair<int, int>>{{100, SIGUSR1}, {102, SIGUSR1}});
}

TEST_CASE("an abort from outside stops with the given code and no restart", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, {1, 5, 30s});
  REQUIRE(s.Start(t0).ok());
  s.Abort(9, t0);
  s.OnExit(100, {0, SIGTERM}, t0);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 9);
  CHECK(c.starts.size() == 1);
}

TEST_CASE("exits of unknown pids (adopted orphans) are ignored", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, {1, 0, 30s});
  REQUIRE(s.Start(t0).ok());
  s.OnExit(4242, {1, 0}, t0);
  CHECK(s.state() == Supervisor::State::kRunning);
  CHECK(c.released.empty());
}

TEST_CASE("after a failure, survivors of the shutdown timeout are sampled, then killed", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, Sampling(3, 5s, 2s));
  REQUIRE(s.Start(t0).ok());
  s.OnExit(101, {3, 0}, t0);
  s.OnExit(100, {0, SIGTERM}, t0 + 1s);  // one obeys SIGTERM; 102 does not
  s.OnTick(t0 + 5s);
  REQUIRE(c.sampled == std::vector<std::vector<int>>{{102}});
  CHECK(c.SignalsOf(SIGKILL) == 0);  // not before the sample
  REQUIRE(s.deadline().has_value());
  CHECK(*s.deadline() == t0 + 7s);
  s.OnSampled(t0 + 5s + 300ms);
  CHECK(c.SignalsOf(SIGKILL) == 1);
  CHECK(c.signals.back() == std::pair<int, int>{102, SIGKILL});
  CHECK_FALSE(s.deadline().has_value());
  s.OnSampled(t0 + 6s);  // a late second answer kills nothing more
  CHECK(c.SignalsOf(SIGKILL) == 1);
  s.OnExit(102, {0, SIGKILL}, t0 + 6s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 3);
  CHECK(c.sampled.size() == 1);
}

TEST_CASE("a sample that never answers does not hold up the SIGKILL", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, Sampling(2, 5s, 2s));
  REQUIRE(s.Start(t0).ok());
  s.OnExit(100, {1, 0}, t0);
  s.OnTick(t0 + 5s);
  REQUIRE(c.sampled.size() == 1);
  s.OnTick(t0 + 6s);
  CHECK(c.SignalsOf(SIGKILL) == 0);
  s.OnTick(t0 + 7s);
  CHECK(c.SignalsOf(SIGKILL) == 1);
  CHECK(c.sampled.size() == 1);
}

TEST_CASE("a failure elsewhere in the job samples survivors too", "[supervisor]") {
  FakeControl c;
  Supervisor s(c, Sampling(2, 5s, 2s));
  REQUIRE(s.Start(t0).ok());
  s.Abort(7, t0);
  s.OnTick(t0 + 5s);
  CHECK(c.sampled == std::vector<std::vector<int>>{{100, 101}});
}

TEST_CASE("a stop signal, a second Ctrl-C or sampling off: SIGKILL without a sample", "[supervisor]") {
  SECTION("SIGTERM from the user") {
    FakeControl c;
    Supervisor s(c, Sampling(2, 5s, 2s));
    REQUIRE(s.Start(t0).ok());
    s.OnStopSignal(SIGTERM, t0);
    s.OnTick(t0 + 5s);
    CHECK(c.sampled.empty());
    CHECK(c.SignalsOf(SIGKILL) == 2);
  }
  SECTION("a second SIGINT while a sample is taken") {
    FakeControl c;
    Supervisor s(c, Sampling(2, 5s, 2s));
    REQUIRE(s.Start(t0).ok());
    s.OnExit(100, {1, 0}, t0);
    s.OnTick(t0 + 5s);
    REQUIRE(c.sampled.size() == 1);
    s.OnStopSignal(SIGINT, t0 + 5s + 100ms);
    CHECK(c.SignalsOf(SIGKILL) == 1);
    s.OnSampled(t0 + 6s);
    CHECK(c.SignalsOf(SIGKILL) == 1);
  }
  SECTION("sample_before_kill 0") {
    FakeControl c;
    Supervisor s(c, {2, 0, 5s});
    REQUIRE(s.Start(t0).ok());
    s.OnExit(100, {1, 0}, t0);
    s.OnTick(t0 + 5s);
    CHECK(c.sampled.empty());
    CHECK(c.SignalsOf(SIGKILL) == 1);
  }
}
