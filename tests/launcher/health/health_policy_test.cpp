#include "launcher/health/health_policy.hpp"

#include <catch2/catch.hpp>

using dlaunch::launcher::CheckDue;
using dlaunch::launcher::HeldOutStep;
using dlaunch::launcher::kWaitingLook;
using dlaunch::launcher::NextAfterFailure;
using dlaunch::launcher::NextWhileWaiting;
using dlaunch::launcher::SteadyTime;
using dlaunch::launcher::WaitingStep;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {
const SteadyTime kT0{std::chrono::hours(1)};
}  // namespace

TEST_CASE("a check is due before the first join and once the last pass is an interval old", "[health]") {
  const milliseconds interval = seconds(300);
  CHECK(CheckDue(std::nullopt, kT0, interval));  // none has passed yet
  CHECK_FALSE(CheckDue(kT0, kT0, interval));
  CHECK_FALSE(CheckDue(kT0, kT0 + seconds(299), interval));
  CHECK_FALSE(CheckDue(kT0, kT0 + seconds(300) - milliseconds(1), interval));
  CHECK(CheckDue(kT0, kT0 + seconds(300), interval));  // stale from the interval on
  CHECK(CheckDue(kT0, kT0 + std::chrono::hours(5), interval));
}

TEST_CASE("a held-out node checks again an interval later, and gives up at its join timeout", "[health]") {
  const milliseconds interval = seconds(300);
  const SteadyTime deadline = kT0 + seconds(600);
  HeldOutStep first = NextAfterFailure(kT0, interval, deadline);
  CHECK(first.kind == HeldOutStep::Kind::kRetry);
  CHECK(first.at == kT0 + seconds(300));
  // The next check would come at the deadline, when nothing can join: end then.
  HeldOutStep second = NextAfterFailure(kT0 + seconds(300), interval, deadline);
  CHECK(second.kind == HeldOutStep::Kind::kGiveUp);
  CHECK(second.at == deadline);
  // A check that took long and failed after the deadline ends the node at once.
  HeldOutStep late = NextAfterFailure(kT0 + seconds(700), interval, deadline);
  CHECK(late.kind == HeldOutStep::Kind::kGiveUp);
  CHECK(late.at == kT0 + seconds(700));
  // A join timeout shorter than the interval: no second check.
  HeldOutStep short_join = NextAfterFailure(kT0, interval, kT0 + seconds(20));
  CHECK(short_join.kind == HeldOutStep::Kind::kGiveUp);
  CHECK(short_join.at == kT0 + seconds(20));
}

TEST_CASE("a waiting node checks whenever its pass turns an interval old", "[health]") {
  const milliseconds interval = seconds(300);
  // Just joined on a fresh pass: the first check while it waits comes an interval after that pass.
  WaitingStep fresh = NextWhileWaiting(true, kT0, kT0 + seconds(5), interval);
  CHECK(fresh.kind == WaitingStep::Kind::kLook);
  CHECK(fresh.at == kT0 + seconds(300));
  // Then, still waiting, it checks: again and again, an interval after each pass.
  WaitingStep due = NextWhileWaiting(true, kT0, kT0 + seconds(300), interval);
  CHECK(due.kind == WaitingStep::Kind::kCheck);
  CHECK(due.at == kT0 + seconds(300));
  WaitingStep next = NextWhileWaiting(true, kT0 + seconds(301), kT0 + seconds(301), interval);
  CHECK(next.kind == WaitingStep::Kind::kLook);
  CHECK(next.at == kT0 + seconds(601));
  // A node that starts to wait long after its last pass (it ran workers for an hour) checks at once.
  CHECK(NextWhileWaiting(true, kT0, kT0 + std::chrono::hours(1), interval).kind == WaitingStep::Kind::kCheck);
  CHECK(NextWhileWaiting(true, std::nullopt, kT0, interval).kind == WaitingStep::Kind::kCheck);
}

TEST_CASE("a node that does not wait never checks, and looks again soon once its pass is stale", "[health]") {
  const milliseconds interval = seconds(300);
  // Running workers on a fresh pass: nothing to look at before the pass turns stale.
  WaitingStep fresh = NextWhileWaiting(false, kT0, kT0 + seconds(5), interval);
  CHECK(fresh.kind == WaitingStep::Kind::kLook);
  CHECK(fresh.at == kT0 + seconds(300));
  // Stale and still running: it looks again every kWaitingLook, so that it checks within that of
  // starting to wait (a standby), however long it ran.
  WaitingStep stale = NextWhileWaiting(false, kT0, kT0 + std::chrono::hours(1), interval);
  CHECK(stale.kind == WaitingStep::Kind::kLook);
  CHECK(stale.at == kT0 + std::chrono::hours(1) + kWaitingLook);
  // An interval shorter than that look: it looks every interval.
  WaitingStep quick = NextWhileWaiting(false, kT0, kT0 + seconds(10), milliseconds(200));
  CHECK(quick.at == kT0 + seconds(10) + milliseconds(200));
}
