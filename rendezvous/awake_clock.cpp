#include "rendezvous/awake_clock.hpp"

#include <algorithm>

namespace dlaunch::rendezvous {

AwakeClock::Clock::time_point AwakeClock::Now(Clock::time_point real) {
  if (due_ && real - *due_ > late_) {
    paused_ += real - *due_;
    resumed_ = real;
    due_ = real;  // the lateness is counted once, whatever reads the clock next
  }
  return real - paused_;
}

AwakeClock::Clock::time_point AwakeClock::Arm(Clock::time_point due, Clock::time_point real) {
  due_ = std::max(due + paused_, real);
  return due + paused_;
}

}  // namespace dlaunch::rendezvous
