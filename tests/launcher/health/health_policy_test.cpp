#include "launcher/health/health_policy.hpp"

#include <catch2/catch.hpp>

using dlaunch::launcher::CheckDue;
using dlaunch::launcher::HeldOutStep;
using dlaunch::launcher::NextAfterFailure;
using dlaunch::launcher::SteadyTime;
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
