#include "rendezvous/retry_grid.hpp"

#include <algorithm>

namespace dlaunch::rendezvous {

using std::chrono::nanoseconds;

namespace {
// The most connections Linux queues for accept by default (net.core.somaxconn);
// a SYN past a full queue is dropped and sent again a second later.
constexpr long kAcceptQueue = 4096;
constexpr std::chrono::microseconds kPerAgent{250};
constexpr std::chrono::milliseconds kShortest{25}, kLongest{2'000};
constexpr std::chrono::milliseconds kPatience{2'000}, kPatientShortest{100};
}  // namespace

std::chrono::milliseconds RetryPeriod(int max_nodes) {
  auto period = std::chrono::duration_cast<std::chrono::milliseconds>(kPerAgent * std::max(1, max_nodes));
  return std::clamp<std::chrono::milliseconds>(period, kShortest, kLongest);
}

nanoseconds PatientPeriod(std::chrono::milliseconds period, nanoseconds waited) {
  nanoseconds p = std::max<nanoseconds>(period, std::chrono::milliseconds(1));
  if (waited < kPatience || p >= kPatientShortest) return p;
  return p * ((kPatientShortest + p - nanoseconds(1)) / p);
}

RetryGrid GridFor(nanoseconds period, int max_nodes) {
  nanoseconds p = std::max<nanoseconds>(period, std::chrono::milliseconds(1));
  long n = std::max(1, max_nodes);
  long queued = std::min(n, kAcceptQueue);
  nanoseconds spread = std::chrono::microseconds(20) * queued + std::chrono::microseconds(100) * (n - queued);
  return RetryGrid{p,
                   std::clamp<nanoseconds>(spread, std::min<nanoseconds>(std::chrono::milliseconds(2), p / 2), p / 2)};
}

nanoseconds UntilNextTry(const RetryGrid& grid, nanoseconds wall, double late) {
  nanoseconds period = std::max<nanoseconds>(grid.period, nanoseconds(1));
  nanoseconds into = wall % period;
  if (into < nanoseconds(0)) into += period;  // a clock before the epoch
  auto lateness = static_cast<nanoseconds::rep>(static_cast<double>(grid.spread.count()) * std::clamp(late, 0.0, 1.0));
  return period - into + nanoseconds(lateness);
}

}  // namespace dlaunch::rendezvous
