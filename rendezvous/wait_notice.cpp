#include "rendezvous/wait_notice.hpp"

namespace dlaunch::rendezvous {

bool WaitNotice::Due(Clock::time_point since, Clock::time_point now) {
  if (since != since_) {
    since_ = since;
    next_ = first_;
  }
  if (now - since < next_) return false;
  // A tick that came late (a stopped process) says it once, for the latest mark passed.
  while (now - since >= next_) next_ *= 2;
  return true;
}

}  // namespace dlaunch::rendezvous
