#include "launcher/process/hang_watch.hpp"

#include <catch2/catch.hpp>

#include "launcher/core/private_dir.hpp"
#include "tests/temp_dir.hpp"

using namespace dlaunch::launcher;
using namespace std::chrono_literals;

namespace {
const Clock::time_point kT0 = Clock::time_point{} + 1h;
}  // namespace

TEST_CASE("the hang watch fires after a timeout of silence, not before", "[hang_watch]") {
  HangWatch h(30s);
  REQUIRE(h.on());
  Clock::time_point last = kT0;
  CHECK(h.NextCheck(last, last, kT0) == kT0 + 30s);
  CHECK_FALSE(h.Check(last, last, kT0 + 29s).has_value());
  // Output moved the check on.
  last = kT0 + 20s;
  CHECK_FALSE(h.Check(last, last, kT0 + 30s).has_value());
  CHECK(h.NextCheck(last, last, kT0 + 30s) == kT0 + 50s);
  std::optional<Clock::duration> silent = h.Check(last, last, kT0 + 51s);
  REQUIRE(silent.has_value());
  CHECK(*silent == 31s);
}

TEST_CASE("a silence is reported once; the next report needs new output", "[hang_watch]") {
  HangWatch h(10s);
  Clock::time_point last = kT0;
  REQUIRE(h.Check(last, last, kT0 + 10s).has_value());
  // The same silence, however long: no second report, and a look every timeout.
  CHECK_FALSE(h.Check(last, last, kT0 + 25s).has_value());
  CHECK(h.NextCheck(last, last, kT0 + 25s) == kT0 + 35s);
  CHECK_FALSE(h.Check(last, last, kT0 + 1h).has_value());
  // A line, then silence again: a new report.
  last = kT0 + 2h;
  CHECK(h.NextCheck(last, last, last) == last + 10s);
  CHECK_FALSE(h.Check(last, last, last + 9s).has_value());
  CHECK(h.Check(last, last, last + 10s) == 10s);
}

TEST_CASE("output the console holds back is not silence", "[hang_watch]") {
  HangWatch h(10s);
  Clock::time_point bytes = kT0;
  // Held output reads as output now.
  CHECK_FALSE(h.Check(bytes, kT0 + 60s, kT0 + 60s).has_value());
  CHECK(h.NextCheck(bytes, kT0 + 60s, kT0 + 60s) == kT0 + 70s);
  // Released, the silence since the last bytes counts again.
  CHECK(h.Check(bytes, bytes, kT0 + 61s) == 61s);
}

TEST_CASE("a job frozen past its check is not silent: the silence counts from the resume", "[hang_watch]") {
  HangWatch h(30s);
  Clock::time_point last = kT0;
  CHECK(h.NextCheck(last, last, kT0) == kT0 + 30s);
  // Suspended at kT0 + 5 s for ten minutes: the check runs long past its time.
  CHECK_FALSE(h.Check(last, last, kT0 + 10min).has_value());
  CHECK(h.NextCheck(last, last, kT0 + 10min) == kT0 + 10min + 30s);
  CHECK_FALSE(h.Check(last, last, kT0 + 10min + 29s).has_value());
  // Silent for a timeout after the resume: that is a hang, and its length is
  // what the ranks had to write in.
  CHECK(h.Check(last, last, kT0 + 10min + 30s) == 30s);
}

TEST_CASE("the watch looks every minute, so a pause inside a long timeout is seen too", "[hang_watch]") {
  HangWatch h(30min);
  Clock::time_point last = kT0;
  CHECK(h.NextCheck(last, last, kT0) == kT0 + 60s);
  CHECK_FALSE(h.Check(last, last, kT0 + 60s).has_value());
  CHECK(h.NextCheck(last, last, kT0 + 60s) == kT0 + 120s);
  // Suspended from about kT0 + 100 s to kT0 + 25 min: no report then, and none
  // 30 min after the last output, only 30 min after the resume.
  CHECK_FALSE(h.Check(last, last, kT0 + 25min).has_value());
  Clock::time_point now = kT0 + 25min;
  while (now < kT0 + 55min) {
    Clock::time_point at = *h.NextCheck(last, last, now);
    CHECK(at - now <= 60s);
    now = at;
    std::optional<Clock::duration> silent = h.Check(last, last, now);
    if (now < kT0 + 55min) CHECK_FALSE(silent.has_value());
    if (now == kT0 + 55min) CHECK(silent == 30min);
  }
  CHECK(now == kT0 + 55min);
}

TEST_CASE("the time a report takes (the stacks) is no pause", "[hang_watch]") {
  HangWatch h(10s);
  Clock::time_point last = kT0;
  CHECK(h.NextCheck(last, last, kT0) == kT0 + 10s);
  REQUIRE(h.Check(last, last, kT0 + 10s).has_value());
  // The stacks took 4 s; a rank wrote meanwhile, at 12 s: its silence counts from there.
  last = kT0 + 12s;
  CHECK(h.NextCheck(last, last, kT0 + 14s) == kT0 + 22s);
  CHECK(h.Check(last, last, kT0 + 22s) == 10s);
}

TEST_CASE("a check a little late (a busy machine) is no pause", "[hang_watch]") {
  HangWatch h(10s);
  Clock::time_point last = kT0;
  CHECK(h.NextCheck(last, last, kT0) == kT0 + 10s);
  CHECK(h.Check(last, last, kT0 + 10s + 900ms) == 10s + 900ms);
}

TEST_CASE("a hang watch of 0 is off", "[hang_watch]") {
  HangWatch h(0s);
  CHECK_FALSE(h.on());
  CHECK_FALSE(h.NextCheck(kT0, kT0, kT0 + 1h).has_value());
  CHECK_FALSE(h.Check(kT0, kT0, kT0 + 1h).has_value());
}

TEST_CASE("the hang's cause quotes the report under the root cause", "[hang_watch]") {
  CHECK(HangCause(42s, {"rank 1: in recv", "hang: full stacks in /r/stacks-1.txt"}) ==
        std::vector<std::string>{"root cause: no rank made progress for 42s (--hang-action stop)",
                                 "  | rank 1: in recv", "  | hang: full stacks in /r/stacks-1.txt"});
}

TEST_CASE("the hang's stacks go to a new numbered file, with its event", "[hang_watch]") {
  dlaunch::testing::TempDir dir("hang");
  EventLog events;
  REQUIRE(events.Open(dir / "events.jsonl").ok());
  REQUIRE(dlaunch::launcher::WriteFile(dir / "stacks-1.txt", "an earlier run's").ok());
  std::string said = SaveStacks(dir.path, {}, events);
  CHECK(said == "full stacks in " + (dir / "stacks-2.txt"));
  CHECK(dlaunch::testing::ReadFile(dir / "stacks-1.txt") == "an earlier run's");
  CHECK(dlaunch::testing::ReadFile(dir / "events.jsonl").find(R"("event":"stacks")") != std::string::npos);
}
