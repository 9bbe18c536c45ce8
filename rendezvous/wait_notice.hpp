// When to tell the console that a rendezvous is still waiting: a host whose
// nodes have not all come, an agent whose coordinator is not up yet. The join
// timeout is 600 s by default, and a launcher that says nothing for ten minutes
// looks hung. The first notice comes 30 s into the wait, then one each time the
// wait has doubled (60 s, 120 s, 240 s, 480 s): five lines in ten minutes, none
// for a wait that ends within 30 s, the usual case.
#pragma once

#include <chrono>

namespace dlaunch::rendezvous {

class WaitNotice {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kFirst{30};

  explicit WaitNotice(Clock::duration first = kFirst) : first_(first) {}

  // A wait that began at `since` goes on at `now`: true when a notice is due,
  // once for each. A different `since` is a new wait, counted from its start.
  bool Due(Clock::time_point since, Clock::time_point now);

 private:
  Clock::duration first_;
  Clock::duration next_{};
  Clock::time_point since_ = Clock::time_point::min();
};

}  // namespace dlaunch::rendezvous
