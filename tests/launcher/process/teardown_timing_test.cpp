// When a node's teardown and its hang report come, under a fake clock: the
// latencies the integration tests once bounded by wall time (a SIGKILL at
// --shutdown-timeout 1, a stack sample that never answers, a job-wide abort,
// a stop signal to workers that ignore it, a hang report one timeout after the
// last line). Those tests now check what happened; these check when.
#include <algorithm>
#include <csignal>
#include <optional>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/process/hang_watch.hpp"
#include "launcher/process/supervisor.hpp"

using namespace dlaunch;
using namespace dlaunch::launcher;
using namespace std::chrono_literals;

namespace {

// Records the policy's calls; pids are 100 + local rank.
class TeardownControl : public WorkerControl {
 public:
  Result<int> Start(int local_rank, int restart) override {
    (void)restart;
    return 100 + local_rank;
  }
  void Signal(int pid, int sig) override { signals.push_back({pid, sig}); }
  void Release(int pid) override { (void)pid; }
  void SampleBeforeKill(const std::vector<int>& pids) override { sampled.push_back(pids); }

  // How many times `pid` was sent `sig`.
  int Count(int pid, int sig) const {
    int n = 0;
    for (auto& s : signals) n += (s.first == pid && s.second == sig) ? 1 : 0;
    return n;
  }
  int Count(int sig) const {
    int n = 0;
    for (auto& s : signals) n += s.second == sig ? 1 : 0;
    return n;
  }

  std::vector<std::pair<int, int>> signals;
  std::vector<std::vector<int>> sampled;
};

const Clock::time_point kTeardownT0 = Clock::time_point{} + 1h;

}  // namespace

TEST_CASE("after a failure the survivors are SIGKILLed at the shutdown timeout, whatever it is",
          "[supervisor][timing]") {
  // tests/integration/test_kill_stacks.sh, --hang-timeout 0: ranks 0 and 2
  // ignore SIGTERM after rank 1 exits 3.
  const std::chrono::milliseconds shutdown = GENERATE(1000ms, 5000ms, 30000ms);
  CAPTURE(shutdown.count());
  TeardownControl c;
  Supervisor s(c, {3, 0, shutdown});
  REQUIRE(s.Start(kTeardownT0).ok());
  const Clock::time_point failed = kTeardownT0 + 500ms;
  s.OnExit(101, {3, 0}, failed);
  CHECK(c.Count(100, SIGTERM) == 1);
  CHECK(c.Count(102, SIGTERM) == 1);
  CHECK(c.Count(101, SIGTERM) == 0);  // it is gone
  REQUIRE(s.deadline().has_value());
  CHECK(*s.deadline() == failed + shutdown);
  s.OnTick(failed + shutdown - 1ms);
  CHECK(c.Count(SIGKILL) == 0);
  s.OnTick(failed + shutdown);
  CHECK(c.Count(100, SIGKILL) == 1);
  CHECK(c.Count(102, SIGKILL) == 1);
  CHECK_FALSE(s.deadline().has_value());  // nothing more to wait for
  s.OnExit(100, {0, SIGKILL}, failed + shutdown);
  s.OnExit(102, {0, SIGKILL}, failed + shutdown);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 3);
  REQUIRE(s.root_cause() != nullptr);
  CHECK(s.root_cause()->local_rank == 1);
}

TEST_CASE("a stack sample that never answers delays the SIGKILL by the sampling bound at most",
          "[supervisor][timing]") {
  // tests/integration/test_kill_stacks.sh, a gdb that never answers:
  // --shutdown-timeout 1 and the 5 s bound on sampling.
  TeardownControl c;
  SupervisorOptions o{2, 0, 1s};
  o.sample_before_kill = 5s;
  Supervisor s(c, o);
  REQUIRE(s.Start(kTeardownT0).ok());
  const Clock::time_point failed = kTeardownT0 + 500ms;
  s.OnExit(100, {5, 0}, failed);
  s.OnTick(failed + 1s);
  CHECK(c.sampled == std::vector<std::vector<int>>{{101}});
  CHECK(c.Count(SIGKILL) == 0);
  REQUIRE(s.deadline().has_value());
  CHECK(*s.deadline() == failed + 6s);
  s.OnTick(failed + 6s - 1ms);
  CHECK(c.Count(SIGKILL) == 0);
  s.OnTick(failed + 6s);
  CHECK(c.Count(101, SIGKILL) == 1);
  s.OnExit(101, {0, SIGKILL}, failed + 6s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 5);
}

TEST_CASE("a stop signal to workers that ignore it ends in a SIGKILL at the shutdown timeout", "[supervisor][timing]") {
  // tests/integration/test_ssh_launch.sh (SIGINT to the head) and
  // test_slow_console.sh (SIGTERM): forwarded at once, 128+N in the end.
  struct Case {
    int sig;
    int code;
  };
  const Case k = GENERATE(Case{SIGINT, 130}, Case{SIGTERM, 143});
  CAPTURE(k.sig);
  TeardownControl c;
  Supervisor s(c, {2, 0, 2s});
  REQUIRE(s.Start(kTeardownT0).ok());
  s.OnStopSignal(k.sig, kTeardownT0);
  CHECK(c.Count(100, k.sig) == 1);
  CHECK(c.Count(101, k.sig) == 1);
  s.OnExit(100, {0, k.sig}, kTeardownT0 + 10ms);  // one obeys; 101 does not
  s.OnTick(kTeardownT0 + 2s - 1ms);
  CHECK(c.Count(SIGKILL) == 0);
  s.OnTick(kTeardownT0 + 2s);
  CHECK(c.Count(101, SIGKILL) == 1);
  CHECK(c.Count(100, SIGKILL) == 0);
  s.OnExit(101, {0, SIGKILL}, kTeardownT0 + 2s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == k.code);
}

TEST_CASE("a failure elsewhere in the job ends this node's workers by the shutdown timeout", "[supervisor][timing]") {
  // tests/integration/test_rdzv_netns.sh, test_fault_link_down.sh,
  // test_fault_host_stopped.sh: a lost node aborts the others' workers.
  TeardownControl c;
  Supervisor s(c, {2, 3, 3s});
  REQUIRE(s.Start(kTeardownT0).ok());
  const Clock::time_point lost = kTeardownT0 + 10s;
  s.Abort(1, lost);
  CHECK(c.Count(100, SIGTERM) == 1);
  CHECK(c.Count(101, SIGTERM) == 1);
  REQUIRE(s.deadline().has_value());
  CHECK(*s.deadline() == lost + 3s);
  s.OnTick(lost + 3s);
  CHECK(c.Count(SIGKILL) == 2);
  s.OnExit(100, {0, SIGKILL}, lost + 3s);
  s.OnExit(101, {0, SIGKILL}, lost + 3s);
  REQUIRE(s.done());
  CHECK(s.exit_code() == 1);
  CHECK(s.restart_count() == 0);  // an abort from outside never restarts
}

TEST_CASE("a silence is reported one hang timeout after the last line, short or long", "[hang_watch][timing]") {
  // tests/integration/test_hang.sh (5 s), test_hang_multinode.sh (5 s, and 2 s
  // under a stand-alone coordinator), and a timeout past the watch's minute.
  const std::chrono::milliseconds timeout = GENERATE(1000ms, 2000ms, 5000ms, 90000ms, 1800000ms);
  CAPTURE(timeout.count());
  HangWatch h(timeout);
  const Clock::time_point last = kTeardownT0;
  Clock::time_point now = kTeardownT0;
  std::optional<Clock::duration> silent;
  int looks = 0;
  while (!silent && looks < 100) {
    std::optional<Clock::time_point> at = h.NextCheck(last, last, now);
    REQUIRE(at.has_value());
    CHECK(*at - now <= HangWatch::kLook);  // no oversleeping a pause
    CHECK(*at <= last + timeout);          // no look past the report's time
    now = *at;
    silent = h.Check(last, last, now);
    ++looks;
  }
  REQUIRE(silent.has_value());
  CHECK(now == last + timeout);
  CHECK(*silent == timeout);
  // Once reported, the watch looks again a timeout (at most kLook) later, and
  // says nothing new about the same silence.
  std::optional<Clock::time_point> again = h.NextCheck(last, last, now);
  REQUIRE(again.has_value());
  CHECK(*again - now == std::min<Clock::duration>(timeout, HangWatch::kLook));
  CHECK_FALSE(h.Check(last, last, *again).has_value());
}
