// The retry grid: every agent's next try falls on the same tick, whatever its
// own rhythm, and no later than the tick's spread; the spread grows with the
// job and stays within half the period.
#include "rendezvous/retry_grid.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::rendezvous {
namespace {

using namespace std::chrono_literals;

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
