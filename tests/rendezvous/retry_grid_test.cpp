// The retry grid: every agent's next try falls on the same tick, whatever its
// own rhythm, and no later than the tick's spread; the spread grows with the
// job and stays within half the period.
#include "rendezvous/retry_grid.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::rendezvous {
namespace {

using namespace std::chrono_literals;

TEST_CASE("RetryPeriod gives 250us an agent, within 25ms and 2s", "[retry_grid]") {
  CHECK(RetryPeriod(1) == 25ms);
  CHECK(RetryPeriod(2) == 25ms);
  CHECK(RetryPeriod(64) == 25ms);
  CHECK(RetryPeriod(100) == 25ms);
  CHECK(RetryPeriod(101) == 25ms);  // 25.25ms, whole milliseconds
  CHECK(RetryPeriod(104) == 26ms);
  CHECK(RetryPeriod(256) == 64ms);
  CHECK(RetryPeriod(1024) == 256ms);
  CHECK(RetryPeriod(4096) == 1024ms);
  CHECK(RetryPeriod(7'999) == 1999ms);
  CHECK(RetryPeriod(8'000) == 2s);
  CHECK(RetryPeriod(2'000'000'000) == 2s);  // no overflow
  CHECK(RetryPeriod(0) == 25ms);
  CHECK(RetryPeriod(-3) == 25ms);
}

TEST_CASE("PatientPeriod keeps the period for 2s, then stretches it to a multiple of it of 100ms or more",
          "[retry_grid]") {
  CHECK(PatientPeriod(25ms, 0s) == 25ms);
  CHECK(PatientPeriod(25ms, 1999ms) == 25ms);
  CHECK(PatientPeriod(25ms, 2s) == 100ms);
  CHECK(PatientPeriod(25ms, 10min) == 100ms);
  CHECK(PatientPeriod(26ms, 3s) == 104ms);  // a multiple, so its ticks are the shorter period's
  CHECK(PatientPeriod(64ms, 3s) == 128ms);
  CHECK(PatientPeriod(100ms, 3s) == 100ms);
  CHECK(PatientPeriod(256ms, 3s) == 256ms);  // long enough already
  CHECK(PatientPeriod(0ms, 3s) == 100ms);    // never a period of nothing
  CHECK(PatientPeriod(0ms, 0s) == 1ms);
  // Every tick of the patient period is a tick of the short one.
  const std::chrono::nanoseconds tick = 1'796'000'000s;
  for (auto at : {0ms, 13ms, 99ms, 250ms})
    for (std::chrono::milliseconds p : {25ms, 26ms, 64ms}) {
      RetryGrid patient{PatientPeriod(p, 1h), 0ns};
      std::chrono::nanoseconds next = tick + at + UntilNextTry(patient, tick + at, 0.0);
      CHECK(next % p == 0ns);
    }
}

TEST_CASE("GridFor spreads the first 4,096 agents 20us apart and the rest 100us, within 2ms and half the period",
          "[retry_grid]") {
  CHECK(GridFor(100ms, 2).spread == 2ms);
  CHECK(GridFor(256ms, 1024).spread == 20480us);
  CHECK(GridFor(512ms, 4096).spread == 81920us);
  CHECK(GridFor(1024ms, 5096).spread == 81920us + 100ms);  // 1,000 past the accept queue
  CHECK(GridFor(800ms, 10'000).spread == 400ms);           // half the period
  CHECK(GridFor(2000ms, 1'000'000).spread == 1000ms);
  CHECK(GridFor(2000ms, 2'000'000'000).spread == 1000ms);  // no overflow
  CHECK(GridFor(3ms, 2).spread == 1500us);                 // half, under the 2ms floor
  CHECK(GridFor(256ms, 1024).period == 256ms);
  CHECK(GridFor(0ms, 2).period == 1ms);  // never a grid with no period
  CHECK(GridFor(100ms, 0).spread == 2ms);
  CHECK(GridFor(100ms, -5).spread == 2ms);
  CHECK(GridFor(25ms, 64).spread == 2ms);
}

TEST_CASE("UntilNextTry lands every caller on the next tick, then up to the spread late", "[retry_grid]") {
  RetryGrid grid{100ms, 10ms};
  const std::chrono::nanoseconds tick = 1'796'000'000s;  // a multiple of 100ms
  CHECK(UntilNextTry(grid, tick, 0.0) == 100ms);         // on a tick: the next one
  CHECK(UntilNextTry(grid, tick + 1ns, 0.0) == 100ms - 1ns);
  CHECK(UntilNextTry(grid, tick + 30ms, 0.0) == 70ms);
  CHECK(UntilNextTry(grid, tick + 99ms, 0.0) == 1ms);
  // Callers at different moments of one tick meet at the next.
  for (auto at : {1ms, 17ms, 64ms, 99ms}) CHECK(tick + at + UntilNextTry(grid, tick + at, 0.0) == tick + 100ms);
  CHECK(UntilNextTry(grid, tick + 30ms, 0.5) == 75ms);
  CHECK(UntilNextTry(grid, tick + 30ms, 1.0) == 80ms);
  CHECK(UntilNextTry(grid, tick + 30ms, 7.0) == 80ms);   // never past the spread
  CHECK(UntilNextTry(grid, tick + 30ms, -1.0) == 70ms);  // nor before the tick
  CHECK(UntilNextTry(grid, -30ms, 0.0) == 30ms);         // a clock before the epoch
  CHECK(UntilNextTry(RetryGrid{0ns, 0ns}, tick, 0.0) == 1ns);
}

}  // namespace
}  // namespace dlaunch::rendezvous
