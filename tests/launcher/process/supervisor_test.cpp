#include "launcher/process/supervisor.hpp"

#include <csignal>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

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
  std::vector<std::int64_t> Progress() override {
    ++progress_reads;
    return progress;
  }
  void Notice(const std::string& line) override { notices.push_back(line); }

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
  std::vector<std::int64_t> progress;  // what Progress() answers
  int progress_reads = 0;
  std::vector<std::string> notices;
};

SupervisorOptions Recovering(int nproc, int max_restarts, int max_no_progress,
                             std::chrono::milliseconds backoff_min = 0ms, std::chrono::milliseconds backoff_max = 0ms) {
  SupervisorOptions o{nproc, max_restarts, 30s};
  o.max_no_progress_restarts = max_no_progress;
  o.backoff_min = backoff_min;
  o.backoff_max = backoff_max;
  return o;
}

// Fails the running generation of a one-worker supervisor at `at`: its worker
// (the last pid started) exits with `code`.
void FailOne(FakeControl& c, Supervisor& s, Clock::time_point at, int code = 1) {
  s.OnExit(c.next_pid - 1, {code, 0}, at);
}

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

TEST_CASE("--max-no-progress-restarts 2: a crash at step 0 runs 3 times, then 123 with why", "[supervisor][progress]") {
  FakeControl c;
  Supervisor s(c, Recovering(1, 10, 2));
  REQUIRE(s.Start(t0).ok());
  Clock::time_point t = t0;
  for (int run = 1; run <= 3; ++run) {
    INFO("run " << run);
    REQUIRE(c.starts.size() == static_cast<size_t>(run));
    CHECK_FALSE(s.done());
    t += 1s;
    FailOne(c, s, t);
  }
  REQUIRE(s.done());
  CHECK(c.starts.size() == 3);
  CHECK(s.restart_count() == 2);
  CHECK(s.exit_code() == base::kExitNoProgress);
  CHECK(c.progress_reads == 3);  // read at each failure
  REQUIRE(c.notices.size() == 1);
  CHECK(c.notices[0] ==
        "not restarting: 2 restarts in a row made no progress (no rank passed its progress at the failure "
        "before); exit code 123 (do not requeue)");
  REQUIRE(s.root_cause() != nullptr);  // the last failure stays the root cause
  CHECK(s.root_cause()->restart == 2);
}

TEST_CASE("--max-no-progress-restarts: progress keeps restarting to --max-restarts, the worker's code stands",
          "[supervisor][progress]") {
  FakeControl c;
  Supervisor s(c, Recovering(2, 3, 1));
  REQUIRE(s.Start(t0).ok());
  Clock::time_point t = t0;
  for (int run = 0; run < 4; ++run) {
    c.progress = {10 * (run + 1), -1};  // rank 0 gets further each run; rank 1 never writes
    t += 1s;
    s.OnExit(c.next_pid - 2, {7, 0}, t);
    s.OnExit(c.next_pid - 1, {0, SIGTERM}, t);
  }
  REQUIRE(s.done());
  CHECK(c.starts.size() == 8);
  CHECK(s.restart_count() == 3);
  CHECK(s.exit_code() == 7);
  CHECK(c.notices.empty());
}

TEST_CASE("--max-no-progress-restarts: a run that stalls after progress stops once it stays stalled",
          "[supervisor][progress]") {
  FakeControl c;
  Supervisor s(c, Recovering(1, 10, 1));
  REQUIRE(s.Start(t0).ok());
  c.progress = {5};
  FailOne(c, s, t0 + 1s);  // the first run got to 5
  FailOne(c, s, t0 + 2s);  // still 5: no progress, 1 in a row
  REQUIRE(s.done());
  CHECK(c.starts.size() == 2);
  CHECK(s.exit_code() == base::kExitNoProgress);
}

TEST_CASE("--restart-backoff: the restart waits MIN, doubling up to MAX, reset by a healthy run",
          "[supervisor][backoff]") {
  FakeControl c;
  Supervisor s(c, Recovering(1, 10, -1, 10s, 25s));
  REQUIRE(s.Start(t0).ok());
  Clock::time_point t = t0 + 1s;
  for (std::chrono::milliseconds wait : {10'000ms, 20'000ms, 25'000ms, 25'000ms}) {
    INFO("wait " << wait.count() << "ms");
    size_t starts = c.starts.size();
    FailOne(c, s, t);
    CHECK(s.state() == Supervisor::State::kWaiting);
    REQUIRE(s.deadline());
    CHECK(*s.deadline() == t + wait);
    s.OnTick(t + wait - 1ms);
    CHECK(c.starts.size() == starts);  // nothing starts before the wait is over
    t += wait;
    s.OnTick(t);
    CHECK(c.starts.size() == starts + 1);
    CHECK(s.state() == Supervisor::State::kRunning);
    t += 1s;
  }
  CHECK(c.notices == std::vector<std::string>{"restarting in 10s (backoff)", "restarting in 20s (backoff)",
                                              "restarting in 25s (backoff)", "restarting in 25s (backoff)"});
  // Ten minutes of health: the next wait is MIN again.
  t += base::kHealthyRun;
  FailOne(c, s, t);
  REQUIRE(s.deadline());
  CHECK(*s.deadline() == t + 10s);
  CHECK(c.notices.back() == "restarting in 10s (backoff)");
}

TEST_CASE("--restart-backoff: a stop signal during the wait ends the job at once", "[supervisor][backoff]") {
  for (int sig : {SIGTERM, SIGINT}) {
    FakeControl c;
    Supervisor s(c, Recovering(2, 5, -1, 20s, 300s));
    REQUIRE(s.Start(t0).ok());
    s.OnExit(100, {3, 0}, t0 + 1s);
    s.OnExit(101, {0, SIGTERM}, t0 + 1s);
    REQUIRE(s.state() == Supervisor::State::kWaiting);
    size_t signals = c.signals.size();
    s.OnStopSignal(sig, t0 + 2s);
    REQUIRE(s.done());
    CHECK(s.exit_code() == 128 + sig);
    CHECK(s.stop_signal() == sig);
    CHECK_FALSE(s.deadline());
    CHECK(c.signals.size() == signals);  // nobody left to signal
    s.OnTick(t0 + 21s);
    CHECK(c.starts.size() == 2);  // and no restart later
  }
  // A failure elsewhere during the wait ends it too, the failure here standing.
  FakeControl c;
  Supervisor s(c, Recovering(1, 5, -1, 20s, 300s));
  REQUIRE(s.Start(t0).ok());
  FailOne(c, s, t0 + 1s, 3);
  REQUIRE(s.state() == Supervisor::State::kWaiting);
  s.Abort(1, t0 + 2s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 3);
  s.OnTick(t0 + 30s);
  CHECK(c.starts.size() == 1);
}

TEST_CASE("a worker's own 123 or 124 is reported as 1; other codes pass through", "[supervisor][exit]") {
  for (auto [code, want] : std::vector<std::pair<int, int>>{{124, 1}, {123, 1}, {125, 125}, {2, 2}, {127, 127}}) {
    INFO("worker code " << code);
    FakeControl c;
    Supervisor s(c, {1, 0, 30s});
    REQUIRE(s.Start(t0).ok());
    s.OnExit(100, {code, 0}, t0 + 1s);
    REQUIRE(s.done());
    CHECK(s.exit_code() == want);
    CHECK(JobCode({code, 0}) == want);
  }
  CHECK(JobCode({0, 9}) == 137);
  CHECK(JobCodeNote(3, {124, 0}) == "rank 3 exited with code 124, reported as 1: 124 is dlaunch's code for a hang");
  CHECK(JobCodeNote(0, {123, 0}) ==
        "rank 0 exited with code 123, reported as 1: 123 is dlaunch's code for restarts without progress");
  CHECK(JobCodeNote(0, {1, 0}).empty());
}
