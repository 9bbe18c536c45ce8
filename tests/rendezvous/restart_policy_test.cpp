// The restart rules with a fake clock: restarts counted once, restarts without
// progress stopped after K in a row, the backoff and its reset, a lost node.
#include "rendezvous/restart_policy.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::rendezvous {
namespace {

using namespace std::chrono_literals;
using Verdict = RestartDecision::Verdict;
using Clock = RestartPolicy::Clock;

const Clock::time_point t0{};

// Runs generations that each start and fail 1 s later, reporting nothing;
// returns the verdict of each failure.
std::vector<Verdict> CrashAtStart(RestartPolicy& p, int runs, Failure kind = Failure::kWorker) {
  std::vector<Verdict> out;
  Clock::time_point t = t0;
  for (int i = 0; i < runs; ++i) {
    p.Started(t);
    t += 1s;
    out.push_back(p.Failed(kind, t).verdict);
    if (out.back() != Verdict::kRestart) break;
  }
  return out;
}

}  // namespace

TEST_CASE("restart policy: restarts run out, then the worker's failure stands", "[restart_policy]") {
  RestartPolicy p({.max_restarts = 2});
  CHECK(CrashAtStart(p, 5) == std::vector<Verdict>{Verdict::kRestart, Verdict::kRestart, Verdict::kExhausted});
  CHECK(p.restarts() == 2);
}

TEST_CASE("restart policy: a crash at step 0 runs K + 1 times", "[restart_policy]") {
  for (int k : {1, 2, 3}) {
    RestartPolicy p({.max_restarts = 10, .max_no_progress_restarts = k});
    std::vector<Verdict> v = CrashAtStart(p, 20);
    INFO("K = " << k);
    CHECK(v.size() == static_cast<std::size_t>(k + 1));  // the first run and K restarts
    CHECK(v.back() == Verdict::kNoProgress);
    CHECK(p.restarts() == k);
    CHECK(p.no_progress_streak() == k);
  }
  RestartPolicy p({.max_restarts = 10, .max_no_progress_restarts = 2});
  p.Started(t0);
  p.Failed(Failure::kWorker, t0 + 1s);
  p.Started(t0 + 2s);
  p.Failed(Failure::kWorker, t0 + 3s);
  p.Started(t0 + 4s);
  RestartDecision d = p.Failed(Failure::kWorker, t0 + 5s);
  CHECK(d.verdict == Verdict::kNoProgress);
  CHECK(d.why == "2 restarts in a row made no progress (no rank passed its progress at the failure before)");
}

TEST_CASE("restart policy: a rank that passes its level keeps restarting", "[restart_policy]") {
  RestartPolicy p({.max_restarts = 4, .max_no_progress_restarts = 1});
  Clock::time_point t = t0;
  std::vector<Verdict> v;
  for (int run = 0; run < 10; ++run) {
    p.Started(t);
    p.Progress(0, 0);
    p.Progress(0, 100 * (run + 1));  // each run gets further
    p.Progress(1, 5);                // another rank stays put
    t += 1s;
    v.push_back(p.Failed(Failure::kWorker, t).verdict);
    if (v.back() != Verdict::kRestart) break;
  }
  CHECK(v == std::vector<Verdict>{Verdict::kRestart, Verdict::kRestart, Verdict::kRestart, Verdict::kRestart,
                                  Verdict::kExhausted});
}

TEST_CASE("restart policy: reaching the old level again is not progress", "[restart_policy]") {
  RestartPolicy p({.max_restarts = 10, .max_no_progress_restarts = 2});
  p.Started(t0);
  p.Progress(3, 500);
  CHECK(p.Failed(Failure::kWorker, t0 + 1s).verdict == Verdict::kRestart);
  // From the checkpoint at 400 back up to 500, never past it.
  p.Started(t0 + 2s);
  p.Progress(3, 400);
  p.Progress(3, 500);
  CHECK(p.Failed(Failure::kWorker, t0 + 3s).verdict == Verdict::kRestart);
  CHECK(p.no_progress_streak() == 1);
  p.Started(t0 + 4s);
  p.Progress(3, 501);  // past it: the streak resets
  CHECK(p.Failed(Failure::kWorker, t0 + 5s).verdict == Verdict::kRestart);
  CHECK(p.no_progress_streak() == 0);
  p.Progress(3, -1);  // nothing
  p.Started(t0 + 6s);
  CHECK(p.Failed(Failure::kWorker, t0 + 7s).verdict == Verdict::kRestart);
  p.Started(t0 + 8s);
  CHECK(p.Failed(Failure::kWorker, t0 + 9s).verdict == Verdict::kNoProgress);
}

TEST_CASE("restart policy: a silent generation that ran healthy_run is progress", "[restart_policy]") {
  RestartPolicy p({.max_restarts = 10, .max_no_progress_restarts = 1, .healthy_run = 600s});
  p.Started(t0);
  CHECK(p.Failed(Failure::kWorker, t0 + 1s).verdict == Verdict::kRestart);
  p.Started(t0 + 2s);
  CHECK(p.Failed(Failure::kWorker, t0 + 2s + 600s).verdict == Verdict::kRestart);  // ran 10 minutes
  CHECK(p.no_progress_streak() == 0);
  p.Started(t0 + 1000s);
  CHECK(p.Failed(Failure::kWorker, t0 + 1000s + 599s).verdict == Verdict::kNoProgress);  // a second short of it
}

TEST_CASE("restart policy: a generation that reports but stays put is not saved by its length", "[restart_policy]") {
  RestartPolicy p({.max_restarts = 10, .max_no_progress_restarts = 1, .healthy_run = 60s});
  p.Started(t0);
  p.Progress(0, 7);
  p.Failed(Failure::kWorker, t0 + 1s);
  p.Started(t0 + 2s);
  p.Progress(0, 7);  // stuck at the same step for an hour
  CHECK(p.Failed(Failure::kWorker, t0 + 3600s).verdict == Verdict::kNoProgress);
}

TEST_CASE("restart policy: a lost node neither waits nor counts toward no progress", "[restart_policy]") {
  RestartPolicy p({.max_restarts = 10, .max_no_progress_restarts = 1, .backoff_min = 10s, .backoff_max = 300s});
  p.Started(t0);
  RestartDecision first = p.Failed(Failure::kWorker, t0 + 1s);
  CHECK(first.verdict == Verdict::kRestart);
  CHECK(first.wait == 10s);
  for (int i = 0; i < 3; ++i) {
    p.Started(t0 + 10s * (i + 2));
    RestartDecision d = p.Failed(Failure::kNodeLost, t0 + 10s * (i + 2) + 1s);
    CHECK(d.verdict == Verdict::kRestart);
    CHECK(d.wait == 0s);
    CHECK(p.no_progress_streak() == 0);
  }
  CHECK(p.restarts() == 4);  // each one still spends a restart
  p.Started(t0 + 100s);
  RestartDecision d = p.Failed(Failure::kWorker, t0 + 101s);
  CHECK(d.verdict == Verdict::kNoProgress);
}

TEST_CASE("restart policy: the backoff doubles up to its cap and resets after a healthy run", "[restart_policy]") {
  RestartPolicy p({.max_restarts = 100, .backoff_min = 10s, .backoff_max = 300s, .healthy_run = 600s});
  std::vector<std::chrono::milliseconds> waits;
  Clock::time_point t = t0;
  for (int i = 0; i < 7; ++i) {
    p.Started(t);
    t += 5s;
    waits.push_back(p.Failed(Failure::kWorker, t).wait);
  }
  CHECK(waits == std::vector<std::chrono::milliseconds>{10s, 20s, 40s, 80s, 160s, 300s, 300s});
  p.Started(t);
  t += 600s;  // healthy
  CHECK(p.Failed(Failure::kWorker, t).wait == 10s);
  p.Started(t);
  CHECK(p.Failed(Failure::kWorker, t + 1s).wait == 20s);
}

TEST_CASE("restart policy: no backoff by default, and huge caps do not overflow", "[restart_policy]") {
  RestartPolicy none({.max_restarts = 3});
  none.Started(t0);
  CHECK(none.Failed(Failure::kWorker, t0 + 1s).wait == 0s);
  const std::chrono::milliseconds day = 86'400'000ms * 365;
  RestartPolicy big({.max_restarts = 1000, .backoff_min = 1ms, .backoff_max = day});
  std::chrono::milliseconds last{0};
  for (int i = 0; i < 200; ++i) {
    big.Started(t0);
    last = big.Failed(Failure::kWorker, t0 + 1s).wait;
    REQUIRE(last.count() > 0);
    REQUIRE(last <= day);
  }
  CHECK(last == day);
}

TEST_CASE("restart policy: no restarts allowed means the first failure stands", "[restart_policy]") {
  RestartPolicy p({.max_restarts = 0, .max_no_progress_restarts = 1});
  p.Started(t0);
  CHECK(p.Failed(Failure::kWorker, t0 + 1s).verdict == Verdict::kExhausted);
  CHECK(p.restarts() == 0);
}

}  // namespace dlaunch::rendezvous
